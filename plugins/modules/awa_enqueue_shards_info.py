#!/usr/bin/python
# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: awa_enqueue_shards_info
short_description: Per-shard depth and lag, lane and grant health, and runtime convergence of Awa queues
version_added: 0.1.0
description:
  - Reports, for one Awa queue or for every queue, the enqueue shard count of each physical queue and the
    ordering it implies, which lanes exist or are missing, and per shard the exact ready depth; with O(detail), per
    lane (priority, shard) the exact ready depth, the sequence lag and the age of the oldest ready job, flagging
    shards at or above the count.
  - Its result fits a screen for a queue (RV(summary_lines) first); O(detail) returns all of it.
  - Reports grant health - lane sequences a runtime role cannot use (C(USAGE), C(SELECT), C(UPDATE)) and lane
    sequences owned by a runtime role - each with the fix.
  - Reports the Awa runtimes (C(awa.runtime_instances)) live by Awa's own rule, and whether each runs with the
    current count of each queue - every runtime, stale ones too, with O(detail). Awa 0.6 runtimes cache the count until they restart and do not
    publish it, so a runtime counts as converged when it is a new process since the last change recorded by
    M(awa.operations.awa_enqueue_shards) (and started no earlier than O(clock_margin) before it). A snapshot
    that reports its count (a future Awa) is judged by that report.
  - Can wait until every live runtime has converged, or until the shards at or above the count have drained
    (which implies converged first). Each poll prints a progress line (not under C(async), see the attribute).
  - With O(advise), watches the load on the queues for a window and advises a shard count for each, from signals
    a monitoring role can read and a gains table measured by the collection's benchmark.
  - Never writes. Each look reads the state in one REPEATABLE READ, READ ONLY transaction with a fixed number of
    statements; the ready depths of lanes beyond the first thousand are read in further READ ONLY transactions of
    at most a thousand lanes each (reading a lane's cursors locks its sequences until the transaction ends).
  - The reads take only C(ACCESS SHARE) locks, so they wait only behind DDL (for example an C(awa migrate) holding
    C(ACCESS EXCLUSIVE) on an Awa table), and never longer than O(lock_timeout).
author:
  - awa.operations engineers (@awa-operations)
extends_documentation_fragment:
  - awa.operations.shards_info
  - awa.operations.connection
  - awa.operations.attributes.info_module
  - awa.operations.attributes.action_group
attributes:
  async:
    support: full
    details:
      - With C(async), the module runs detached on the host and does its own wait, so no progress line is printed
        (Ansible prints its own C(ASYNC POLL) lines with C(poll) above 0); the result is the same, with RV(polls)
        and RV(duration). Follow a C(poll=0) task with M(ansible.builtin.async_status).
      - C(async) must give the job more seconds than O(wait_timeout), or the task fails before it starts, saying
        so; otherwise Ansible would end the job at the C(async) limit without the report of the stragglers.
notes:
  - The connected role needs C(SELECT) on the lane sequences to read depths (for example Awa's migrator or the
    owner); lanes it cannot read are reported with unknown depth, not as errors.
  - With O(advise), the connected role should be a member of C(pg_monitor) (for C(pg_read_all_stats)), or the
    wait events and statements of other roles' backends are hidden and the advice says so in its findings;
    C(pg_locks) needs no grant. It also needs C(SELECT) on the lane sequences, as for depths.
  - Ready depth counts ready jobs only; jobs being worked (leases) and scheduled or retrying jobs
    (C(deferred_jobs)) carry no shard until they are claimed back or promoted.
  - Under C(async) (AWX's long waits) the wait runs in the module, without progress lines; see the C(async)
    attribute.
seealso:
  - module: awa.operations.awa_enqueue_shards
"""

EXAMPLES = r"""
- name: Show the shard state of queue "orders"
  awa.operations.awa_enqueue_shards_info:
    login_host: db1.example.com
    login_db: app
    login_user: awa_migrator
    login_password: "{{ vault_awa_migrator_password }}"
    queue: orders
    runtime_roles: [awa_runtime]
  register: orders_state

- name: Print the summary as is
  ansible.builtin.debug:
    msg: "{{ orders_state.summary_lines }}"

- name: After restarting the runtimes, wait until every live runtime has the new count
  awa.operations.awa_enqueue_shards_info:
    login_host: db1.example.com
    login_db: app
    login_user: awa_migrator
    login_password: "{{ vault_awa_migrator_password }}"
    queue: orders
    wait: converged
    wait_timeout: 600

- name: Watch "orders" under load for 30 seconds and advise a shard count
  awa.operations.awa_enqueue_shards_info:
    login_host: db1.example.com
    login_db: app
    login_user: awa_monitor
    login_password: "{{ vault_awa_monitor_password }}"
    queue: orders
    advise: true
    advise_window: 30
  register: orders_advice

- name: Print the verdict, its evidence and its ordering consequence
  ansible.builtin.debug:
    msg:
      - "{{ orders_advice.advice.orders.message }}"
      - "{{ orders_advice.advice.orders.ordering }}"
      - "{{ orders_advice.advice.orders.evidence }}"

- name: Wait for two queues in the background (AWX), while other tasks run
  awa.operations.awa_enqueue_shards_info:
    login_host: db1.example.com
    login_db: app
    login_user: awa_migrator
    login_password: "{{ vault_awa_migrator_password }}"
    queues: [orders, emails]
    wait: converged
    wait_timeout: 900
  async: 960  # more than wait_timeout
  poll: 0
  register: background_wait

- name: Follow the background wait until it ends
  ansible.builtin.async_status:
    jid: "{{ background_wait.ansible_job_id }}"
  register: background_waited
  until: background_waited.finished
  retries: 100
  delay: 10

- name: After a lowering, wait until the old shards have drained
  awa.operations.awa_enqueue_shards_info:
    login_host: db1.example.com
    login_db: app
    login_user: awa_migrator
    login_password: "{{ vault_awa_migrator_password }}"
    queue: orders
    wait: drained
    wait_timeout: 1800
    wait_sleep: 10

- name: Change "orders" on whichever of two servers is the primary
  awa.operations.awa_enqueue_shards:
    login_host: db1.example.com,db2.example.com
    login_db: app
    login_user: awa_migrator
    login_password: "{{ vault_awa_migrator_password }}"
    queues: [{queue: orders, shards: 8}]
  register: orders_change

- name: Wait across a failover, and fail plainly if the change did not reach the new primary
  awa.operations.awa_enqueue_shards_info:
    login_host: db1.example.com,db2.example.com
    login_db: app
    login_user: awa_migrator
    login_password: "{{ vault_awa_migrator_password }}"
    queue: orders
    wait: converged
    committed: "{{ orders_change.queues }}"
"""

RETURN = r"""
converged:
  description: Whether every live runtime runs with the current count of every queue reported.
  returned: always
  type: bool
  sample: true
drained:
  description: Whether every queue reported has converged and holds no ready job on a shard at or above its count.
  returned: unless O(lanes=false)
  type: bool
  sample: false
queues:
  description: Per logical queue, keyed by its name.
  returned: always
  type: dict
  contains:
    queue:
      description: The logical queue.
      type: str
    stripes:
      description: The stripe count.
      type: int
    physical_queues:
      description: Its physical queues.
      type: list
      elements: str
    enqueue_shards:
      description: The current count of each physical queue.
      type: dict
    known:
      description:
        - Whether the database has ever seen the queue - a C(awa.queue_meta) row, lanes, jobs (scheduled ones wait
          without a lane) or a runtime serving it (its C(awa.runtime_instances) snapshot).
        - When false, its first finding says so and names the known queues closest to its name (a typo's likely
          intent); M(awa.operations.awa_enqueue_shards) refuses to change it unless asked to prepare a new queue
          (O(awa.operations.awa_enqueue_shards#module:new_queue)).
      type: bool
      version_added: 0.5.0
    paused:
      description: Whether a physical queue of it is paused (C(awa queue pause)); its workers claim nothing, so
        nothing drains until it is resumed.
      type: bool
    ordering:
      description: The ordering contract of that count.
      type: str
    converged:
      description: Whether every live runtime runs with the current count.
      type: bool
    drained:
      description: Whether converged and no ready job is left at or above the count - and, in a wait until drained,
        none arrived there since its first poll. Not with O(lanes=false).
      type: bool
    new_jobs_beyond_count:
      description:
        - Only with O(wait=drained) - the shards at or above the count that received new jobs since the wait's first
          poll (a lane's RV(queues.lanes[].enqueue_cursor) moved). Such a queue is not drained - a producer that was not
          restarted still enqueues with the old count - and a wait that times out names them.
      type: list
      elements: dict
      version_added: 0.3.0
      contains: &shard_key
        queue:
          description: The physical queue.
          type: str
        shard:
          description: The shard.
          type: int
    runtimes_live:
      description: Live runtimes (M).
      type: int
    runtimes_converged:
      description: Live runtimes on the current count (N).
      type: int
    stragglers:
      description: Each live runtime not yet on the current count of a physical queue, and why.
      type: list
      elements: dict
      contains:
        # The runtime's own keys, as in RV(runtimes).
        <<: &runtime_identity
          instance_id:
            description: The runtime's instance id.
            type: str
          hostname:
            description: Its host, when it reports one (Awa 0.6.9 runtimes do not).
            type: str
          pid:
            description: Its process id on that host.
            type: int
          version:
            description: Its Awa version.
            type: str
          started_at:
            description: When it started, by its host's clock, ISO 8601.
            type: str
          seconds_since_start:
            description: Seconds since it started.
            type: float
          seconds_since_seen:
            description: Seconds since its last snapshot.
            type: float
        physical_queue:
          description: The physical queue whose count it does not run with yet.
          type: str
        reason:
          description: Why, in words (for example that it was already running when the count changed).
          type: str
    last_change:
      description: Per physical queue, the last change of its count recorded in the ledger.
      type: dict
      contains:
        id:
          description: The change's id in the ledger.
          type: int
        changed_at:
          description: When it committed, by the database's clock, ISO 8601.
          type: str
        from_shards:
          description: The count before.
          type: int
        to_shards:
          description: The count it set.
          type: int
        changed_by:
          description: The database role that made it.
          type: str
        reason:
          description: The reason given with it, if any.
          type: str
    ready_depth:
      description: Ready jobs over all lanes (null when some lane could not be read). Not with O(lanes=false).
      type: int
    depth_beyond_count:
      description: Ready jobs on shards at or above the count (null when some such lane could not be read). Not with
        O(lanes=false).
      type: int
    lanes_complete:
      description: Lanes whose head rows and sequences all exist. Not with O(lanes=false).
      type: int
    lanes_missing:
      description: Lanes below the count that do not (fully) exist. Not with O(lanes=false).
      type: list
      elements: dict
      contains: &lane_key
        queue:
          description: The physical queue.
          type: str
        priority:
          description: The priority (1 to 4).
          type: int
        shard:
          description: The shard.
          type: int
    lanes:
      description: Every lane of its physical queues. With O(detail) only, and not with O(lanes=false).
      type: list
      elements: dict
      contains:
        <<: *lane_key
        beyond_count:
          description: Whether the shard is at or above the count.
          type: bool
        complete:
          description: Whether its head rows and both sequences exist.
          type: bool
        readable:
          description: Whether the connected role may read its sequences (its depth is null otherwise).
          type: bool
        ready_depth:
          description: Ready jobs, counted as Awa counts them (null when not readable).
          type: int
        seq_lag:
          description: Enqueue sequence minus claim sequence, an upper bound of the ready jobs (null when not
            readable).
          type: int
        oldest_ready_age_seconds:
          description: Age of its oldest ready job (null when it has none or is not readable).
          type: float
        enqueue_cursor:
          description: The lane's next enqueue sequence value, which grows by one for each job enqueued on the
            lane (null when not readable). O(wait=drained) compares it across polls to see new jobs beyond the count.
          type: int
          version_added: 0.3.0
    shards:
      description: The lanes summed over priorities, one row per physical queue and shard (their ready jobs are in
        RV(summary_lines)). With O(detail) only, and not with O(lanes=false).
      type: list
      elements: dict
      contains:
        <<: *shard_key
        beyond_count:
          description: Whether the shard is at or above the count.
          type: bool
        ready_depth:
          description: Ready jobs (null when a lane of it is not readable).
          type: int
        seq_lag:
          description: The sum of its lanes' sequence lags (null when a lane of it is not readable).
          type: int
        oldest_ready_age_seconds:
          description: Age of its oldest ready job (null when it has none).
          type: float
    grants:
      description: Grant health of the queue's lane sequences. Not with O(lanes=false).
      type: dict
      contains:
        missing:
          description: Per runtime role, the privileges it lacks on lane sequences.
          type: list
          elements: dict
          contains:
            role:
              description: The runtime role.
              type: str
            privileges:
              description: The privileges it lacks (C(SELECT), C(UPDATE), C(USAGE)).
              type: list
              elements: str
            sequences:
              description: On how many lane sequences.
              type: int
            examples:
              description: A few of those sequences.
              type: list
              elements: str
        sequence_owners:
          description: Role to the number of the queue's lane sequences it owns.
          type: dict
    findings:
      description: Problems found, each saying what to do.
      type: list
      elements: str
    summary_lines:
      description: This queue's lines of RV(summary_lines). With O(detail) only.
      type: list
      elements: str
  sample:
    orders:
      queue: orders
      stripes: 1
      physical_queues: [orders]
      enqueue_shards: {"orders": 8}
      converged: false
      drained: false
      runtimes_live: 2
      runtimes_converged: 1
server:
  version_added: 0.2.0
  description:
    - The server the state was read from, as C(host:port) - the one libpq chose among O(login_host). After a wait
      reconnected (a failover), the server it reads since.
  returned: always
  type: str
  sample: "db2.example.com:5432"
disconnected:
  version_added: 0.2.0
  description:
    - Present, and true, when the task failed because no server of O(login_host) accepted the connection or the
      connection was lost (a failover, a restart); trying again later may succeed.
  returned: on such a failure
  type: bool
  sample: true
read_at:
  description: The database's clock when the (last) read began, ISO 8601.
  returned: always
  type: str
  sample: "2026-11-30T16:39:40.123456+00:00"
runtimes:
  description:
    - Every runtime snapshot row (C(awa.runtime_instances)), live or not - stale ones (gone without a goodbye) and
      shutting down ones too, which Awa keeps a day.
    - Without O(detail), each queue counts its live runtimes and names those not on its count
      (RV(queues.stragglers)).
  returned: with O(detail=true)
  type: list
  elements: dict
  contains: &runtime
    <<: *runtime_identity
    last_seen_at:
      description: When it last wrote its snapshot, ISO 8601.
      type: str
    live:
      description: Live by Awa's own rule (not shutting down, seen within three snapshot intervals or 30 seconds),
        judged by the database's clock.
      type: bool
    stale:
      description: Neither live nor shutting down (gone without a goodbye).
      type: bool
    shutting_down:
      description: Whether it said it is shutting down.
      type: bool
    healthy:
      description: Whether its snapshot says it is healthy.
      type: bool
    leader:
      description: Whether it is the maintenance leader.
      type: bool
    reported_shards:
      description: Physical queue to the count its snapshot reports (empty for every released Awa so far).
      type: dict
    converged:
      description: Live and on the current count of every queue reported.
      type: bool
    pending_queues:
      description: The logical queues whose current count it does not run with yet.
      type: list
      elements: str
  sample:
    - instance_id: 3f1c2a9e-8d4b-4a57-9f0e-2b6d1c7a8e90
      pid: 4242
      live: true
      converged: false
      pending_queues: [orders]
advice:
  description:
    - Per logical queue, with O(advise) - the verdict, the count it advises, the limit when sharding will not
      help, one line saying so and why, the ordering consequence of following it, the evidence, and findings
      (producers that send everything to one shard; backends hidden from this role).
    - Its lines are also at the end of RV(summary_lines), and its findings in RV(findings).
  returned: when O(advise) is true
  type: dict
  contains:
    verdict:
      description: V(raise), V(keep), V(lower) (after a drain) or V(will_not_help).
      type: str
    shards:
      description: The current count (the largest of its physical queues').
      type: int
    to:
      description: The count advised (the current one unless raise or lower).
      type: int
    limit:
      description: With V(will_not_help), what limits the queue - C(NOTIFY at commit), C(WAL flush), C(CPU),
        C(the claimers) or C(the copy path's lane locks); null otherwise.
      type: str
    message:
      description: The verdict and why, in one line.
      type: str
    ordering:
      description: What following the advice does to ordering (key routing, FIFO, the drain a lowering needs).
      type: str
    evidence:
      description: What the window showed, as the verdict used it.
      type: dict
      contains:
        window_seconds:
          description: The window's length.
          type: float
        samples:
          description: How many times the backends were sampled.
          type: int
        enqueued_per_s:
          description: Jobs enqueued per second, over every lane of the queue.
          type: float
        claimed_per_s:
          description: Jobs claimed per second.
          type: float
        enqueued_by_shard:
          description: Shard to the jobs enqueued on it in the window.
          type: dict
        busiest_shard_share:
          description: The busiest shard's share of the enqueues (null without enqueues).
          type: float
        lag_growth:
          description: How much the backlog (enqueued, not yet claimed) grew (null when a lane is not readable).
          type: int
        lane_lock_waiters:
          description: Backends waiting on the queue's lane locks, per sample.
          type: float
        notify_lock_waiters:
          description: Backends waiting on the NOTIFY commit lock, per sample.
          type: float
        wal_waiters:
          description: Backends waiting to write or flush the WAL, per sample.
          type: float
        enqueuers_on_cpu_share:
          description: The share of enqueuing backends' samples on CPU, waiting on nothing.
          type: float
        concurrent_enqueuers:
          description: The load judged by - backends enqueuing at once.
          type: int
        path:
          description: The enqueue path - C(insert), C(copy) or C(copy_keyed).
          type: str
        measured_row:
          description: The row of the gains table the verdict was judged by (null when the table has none for the
            path).
          type: dict
          contains:
            producers:
              description: The producers of that row.
              type: int
            gains:
              description: Shard count to the measured throughput over one shard.
              type: dict
        hidden_backend_samples:
          description: Backend samples whose state this role may not see (grant it C(pg_monitor)).
          type: int
    findings:
      description: What the window showed beyond the verdict, each with what to do.
      type: list
      elements: str
  sample:
    orders:
      verdict: will_not_help
      shards: 1
      to: 1
      limit: NOTIFY at commit
      message: "orders: sharding will not help: the limit is NOTIFY at commit. 3.4 enqueuers per sample waited on
        its lane locks, but with 8 producer(s) on the insert path no count measured x1.3 over 1: past the lane
        lock, commits serialize."
      ordering: "Nothing changes: jobs keep their order per shard over 1 shard(s)."
      evidence: {lane_lock_waiters: 3.4, concurrent_enqueuers: 8, path: insert}
      findings: []
health:
  description:
    - With O(health) - what a bad change shows on the database side, read right after the queues.
  returned: when O(health) is true
  type: dict
  version_added: 0.2.0
  contains:
    read_at:
      description: The database's clock when it was read, ISO 8601.
      type: str
    deadlocks:
      description:
        - The database's cumulative deadlock count (C(pg_stat_database.deadlocks)); compare two readings.
        - A count change can make Awa 0.6.9 producers deadlock with each other in the seconds after it.
      type: int
    stats_reset:
      description: When the database's statistics were last reset (the count starts again from 0), ISO 8601; null
        if never.
      type: str
    queues:
      description:
        - Per logical queue, since its last change recorded by M(awa.operations.awa_enqueue_shards).
      type: dict
      contains:
        since:
          description: When the queue's physical queues' last recorded change committed, ISO 8601; null when none was
            recorded.
          type: str
        failed_jobs:
          description: Jobs that failed for good since then, including those moved to the dead-letter queue; null when
            no change was recorded.
          type: int
        retried_jobs:
          description:
            - Jobs whose attempt failed since then and that wait for their retry or were re-enqueued for it; null when
              no change was recorded.
            - Awa prunes a retried job once it is done, so this counts the retries still in flight.
          type: int
  sample:
    read_at: "2026-11-30T16:39:41.004211+00:00"
    deadlocks: 3
    stats_reset: null
    queues:
      orders: {since: "2026-11-30T16:38:02.551920+00:00", failed_jobs: 0, retried_jobs: 2}
findings:
  description:
    - The findings of every queue (and of queues whose stripes could not be resolved).
    - When no Awa runtime is live, one finding says so - RV(converged) then holds only because nothing runs.
  returned: always
  type: list
  elements: str
  sample: []
new_runtimes:
  description: The live, healthy runtimes, each as in RV(runtimes).
  returned: with O(detail=true)
  type: list
  elements: dict
  contains: *runtime
  sample: []
expected_new_runtimes:
  description: Always V(0).
  returned: always
  type: int
  sample: 0
summary:
  description: RV(summary_lines) as one string, a line per line.
  returned: with O(detail=true)
  type: str
  sample: "orders: enqueue_shards 8 (was 1, change #3 ...)\n  runtimes: 1 of 2 live runtimes on the current count ..."
summary_lines:
  description:
    - A few human-readable lines per queue - the count and its last change, N of M runtimes converged, ready jobs
      per shard, converged and drained - for ansible.builtin.debug.
    - The first key of the result (Ansible's own callbacks print keys sorted by name).
  returned: always
  type: list
  elements: str
  sample: ["orders: enqueue_shards 8 (was 1, change #3 ...)", "  runtimes: 2 of 2 live runtimes on the current count"]
waited:
  description: Whether the task waited (O(wait) other than V(none)).
  returned: always
  type: bool
  sample: true
polls:
  description: How many times the state was read.
  returned: always
  type: int
  sample: 4
duration:
  description: Seconds spent waiting.
  returned: always
  type: float
  sample: 6.2
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.awa.operations.plugins.module_utils.module_main import run_module
from ansible_collections.awa.operations.plugins.module_utils.info_run import run
from ansible_collections.awa.operations.plugins.module_utils.info.options import ARGUMENT_RULES, argument_spec


def main() -> None:
    # disconnected: no server could be reached or the session ended; the action plugin's wait retries it.
    run_module(AnsibleModule, argument_spec(), ARGUMENT_RULES, run, mark_disconnected=True)


if __name__ == "__main__":
    main()
