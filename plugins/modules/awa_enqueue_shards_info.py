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
    ordering it implies, which lanes exist or are missing, and per lane (priority, shard) the exact ready
    depth, the sequence lag and the age of the oldest ready job, flagging shards at or above the count.
  - Reports grant health - lane sequences a runtime role cannot use (C(USAGE), C(SELECT), C(UPDATE)) and lane
    sequences owned by a runtime role - each with the fix.
  - Reports every Awa runtime (C(awa.runtime_instances)), live or stale by Awa's own rule, and whether it runs
    with the current count of each queue. Awa 0.6 runtimes cache the count until they restart and do not
    publish it, so a runtime counts as converged when it is a new process since the last change recorded by
    M(awa.operations.awa_enqueue_shards) (and started no earlier than O(clock_margin) before it). A snapshot
    that reports its count (a future Awa) is judged by that report.
  - Can wait until every live runtime has converged, or until the shards at or above the count have drained
    (which implies converged first). Each poll prints a progress line.
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
  - awa.operations.connection
  - awa.operations.attributes.info_module
  - awa.operations.attributes.action_group
options:
  queue:
    description:
      - The logical queue to report on. When neither O(queue) nor O(queues) is set, every queue with lanes or an
        C(awa.queue_meta) row is reported.
    type: str
  queues:
    description:
      - Several logical queues to report on (and wait for) in one read; their stripes are detected.
      - An empty list reports no queue, only the runtimes (enough for O(wait=restarted)).
      - Mutually exclusive with O(queue).
    type: list
    elements: str
  stripes:
    description:
      - The queue stripe count of O(queue). Detected from the stored C(<queue>#n) lanes when not set.
      - Only with O(queue).
    type: int
  runtime_roles:
    description:
      - Runtime roles whose privileges on lane sequences are checked, and whose ownership of lane sequences is
        reported as a hazard.
    type: list
    elements: str
    default: []
  wait:
    description:
      - V(none) reports at once.
      - V(converged) polls until every live runtime runs with the current count of every queue reported.
      - V(drained) polls until converged and no ready job is left on a shard at or above the count.
      - V(restarted) polls until at least O(expected_new_runtimes) live, healthy runtimes are not in
        O(known_runtimes) (used between the batches of a rolling restart).
      - On timeout the task fails, names every runtime still waited for (host, pid, instance id, age) and
        returns the last observed state.
    type: str
    default: none
    choices: [none, converged, drained, restarted]
  wait_timeout:
    description:
      - Seconds to wait in total, over all queues. V(0) looks once.
      - A poll that starts just before the deadline still finishes, so a wait can last up to one poll longer
        (its lock waits bounded by O(lock_timeout)).
    type: float
    default: 300
  wait_sleep:
    description:
      - Seconds between polls.
    type: float
    default: 2
  clock_margin:
    description:
      - Seconds of clock skew allowed between runtime hosts (whose clocks stamp C(started_at)) and the database
        (whose clock stamps the change). A runtime that started up to this long before a change, and was not
        live when it committed, still counts as started after it.
    type: float
    default: 5
  ledger_schema:
    description:
      - Schema of the change ledger written by M(awa.operations.awa_enqueue_shards).
    type: str
    default: awa_operations
  known_runtimes:
    description:
      - Runtime instance ids seen before a restart; runtimes not in this list are returned as RV(new_runtimes).
    type: list
    elements: str
    default: []
  expected_new_runtimes:
    description:
      - How many new runtimes O(wait=restarted) waits for.
    type: int
    default: 0
  lock_timeout:
    description:
      - Seconds each read waits for a lock, in every transaction of the read. When reached, the task fails at once,
        names the sessions holding locks if it can see them (for example a running C(awa migrate)), and writes
        nothing. V(0) waits without limit.
      - With O(wait), a poll that reaches it ends the wait with that failure at once; it is not retried until
        O(wait_timeout), since the state cannot be seen while the lock is held.
    type: float
    default: 5
  advise:
    description:
      - Watch the load on the queues reported for O(advise_window) seconds and advise, per queue, a shard count
        (RV(advice)) - raise to a count, keep, lower (after a drain), or "sharding will not help" with the limit
        named (NOTIFY at commit, WAL flush, CPU, the claimers, or the copy path's lane locks) - each with the
        evidence it used and the ordering consequence of following it.
      - The signals are lane advisory-lock waiters from C(pg_locks) and C(pg_stat_activity) sampled every 25 ms,
        the jobs enqueued and claimed per shard from the lane sequences at both ends of the window, and the
        backlog. A raise is advised only where the gains table (O(advise_gains)) measured at least x1.3 for that
        load and enqueue path, and never past the count where the measured gains stop.
      - Producers that send everything to one shard whatever the count is are reported as a finding.
      - Not with O(wait) (run them as two tasks). Writes nothing; advice is read under load, so advise while the
        queue carries the load that matters.
    type: bool
    default: false
  advise_window:
    description:
      - Seconds to watch the load with O(advise), between 1 and 600.
    type: float
    default: 10
  advise_gains:
    description:
      - A gains table of your own (from C(python -m benchmarks.shard_gains RESULTS.json) after the collection's
        shard_choice benchmark ran on hardware like yours) instead of the one measured for this release
        (docs/performance.md).
      - 'Its form is C({"gains": {PATH: {N: {S: GAIN}}}, "limits": {PATH: {N: LIMIT}}}) with PATH one of V(insert),
        V(copy) and V(copy_keyed), N producers, S shards and GAIN the measured throughput over S=1; C(limits) is
        optional.'
    type: dict
  health:
    description:
      - Also read what a bad change shows on the database side (RV(health)) - the database's deadlock count
        (C(pg_stat_database.deadlocks)), and per queue the jobs that failed or were retried since its last change
        recorded by M(awa.operations.awa_enqueue_shards).
      - Two more statements, in a READ ONLY transaction of their own; with O(wait), on every poll.
      - The rollout role reads it before the change and after every batch of restarts, and stops the rollout when
        a reading crosses the limit the operator set.
    type: bool
    default: false
    version_added: 0.2.0
notes:
  - The connected role needs C(SELECT) on the lane sequences to read depths (for example Awa's migrator or the
    owner); lanes it cannot read are reported with unknown depth, not as errors.
  - With O(advise), the connected role should be a member of C(pg_monitor) (for C(pg_read_all_stats)), or the
    wait events and statements of other roles' backends are hidden and the advice says so in its findings;
    C(pg_locks) needs no grant. It also needs C(SELECT) on the lane sequences, as for depths.
  - Ready depth counts ready jobs only; jobs being worked (leases) and scheduled or retrying jobs
    (C(deferred_jobs)) carry no shard until they are claimed back or promoted.
seealso:
  - module: awa.operations.awa_enqueue_shards
"""

EXAMPLES = r"""
- name: Show the shard state of queue "orders"
  awa.operations.awa_enqueue_shards_info:
    login_host: db1.example.com
    login_db: app
    login_user: awa_migrator
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
    queue: orders
    wait: converged
    wait_timeout: 600

- name: Watch "orders" under load for 30 seconds and advise a shard count
  awa.operations.awa_enqueue_shards_info:
    login_host: db1.example.com
    login_db: app
    login_user: awa_monitor
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

- name: After a lowering, wait until the old shards have drained
  awa.operations.awa_enqueue_shards_info:
    login_host: db1.example.com
    login_db: app
    login_user: awa_migrator
    queue: orders
    wait: drained
    wait_timeout: 1800
    wait_sleep: 10
"""

RETURN = r"""
converged:
  description: Whether every live runtime runs with the current count of every queue reported.
  returned: always
  type: bool
  sample: true
drained:
  description: Whether every queue reported has converged and holds no ready job on a shard at or above its count.
  returned: always
  type: bool
  sample: false
queues:
  description: Per logical queue.
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
      description: Whether converged and no ready job is left at or above the count.
      type: bool
    runtimes_live:
      description: Live runtimes (M).
      type: int
    runtimes_converged:
      description: Live runtimes on the current count (N).
      type: int
    stragglers:
      description: For each live runtime not yet on the current count - C(instance_id), C(hostname), C(pid),
        C(version), C(started_at), C(seconds_since_start), C(seconds_since_seen), C(physical_queue), C(reason).
      type: list
      elements: dict
    last_change:
      description: Per physical queue, the last change of its count recorded in the ledger (C(id), C(changed_at),
        C(from_shards), C(to_shards), C(changed_by), C(reason)).
      type: dict
    ready_depth:
      description: Ready jobs over all lanes (null when some lane could not be read).
      type: int
    depth_beyond_count:
      description: Ready jobs on shards at or above the count (null when some such lane could not be read).
      type: int
    lanes_complete:
      description: Lanes whose head rows and sequences all exist.
      type: int
    lanes_missing:
      description: Lanes below the count that do not (fully) exist, as C(queue), C(priority), C(shard).
      type: list
      elements: dict
    lanes:
      description: Every lane - C(queue), C(priority), C(shard), C(beyond_count), C(complete), C(readable),
        C(ready_depth), C(seq_lag) (an upper bound), C(oldest_ready_age_seconds).
      type: list
      elements: dict
    shards:
      description: The lanes summed over priorities, one row per physical queue and shard.
      type: list
      elements: dict
    grants:
      description: C(missing) privileges per runtime role (C(role), C(privileges), C(sequences) count, C(examples))
        and C(sequence_owners) (role to number of lane sequences it owns).
      type: dict
    findings:
      description: Problems found, each saying what to do.
      type: list
      elements: str
    summary_lines:
      description: This queue's lines of RV(summary_lines).
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
read_at:
  description: The database's clock when the (last) read began, ISO 8601.
  returned: always
  type: str
  sample: "2026-11-30T16:39:40.123456+00:00"
runtimes:
  description: Every runtime snapshot row - C(instance_id), C(hostname), C(pid), C(version), C(started_at),
    C(last_seen_at), C(live), C(stale), C(shutting_down), C(healthy), C(leader), C(seconds_since_start),
    C(seconds_since_seen), C(reported_shards), C(converged), C(pending_queues).
  returned: always
  type: list
  elements: dict
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
      description:
        - The window (C(window_seconds), C(samples)), C(enqueued_per_s), C(claimed_per_s), C(enqueued_by_shard),
          C(busiest_shard_share), C(lag_growth), the waiters per sample (C(lane_lock_waiters),
          C(notify_lock_waiters), C(wal_waiters)), C(enqueuers_on_cpu_share), C(concurrent_enqueuers), the
          enqueue C(path) (insert, copy or copy_keyed), the C(measured_row) of the gains table it was judged by,
          and C(hidden_backend_samples).
      type: dict
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
        - Per logical queue - C(since) (when its physical queues' last recorded change committed, ISO 8601; null when
          none was recorded), C(failed_jobs) (jobs that failed for good since then, including those moved to the
          dead-letter queue) and C(retried_jobs) (jobs whose attempt failed since then and that wait for their retry
          or were re-enqueued for it; Awa prunes a retried job once it is done, so this counts the retries still in
          flight).
        - The counts are null when no change was recorded.
      type: dict
  sample:
    read_at: "2026-11-30T16:39:41.004211+00:00"
    deadlocks: 3
    stats_reset: null
    queues:
      orders: {since: "2026-11-30T16:38:02.551920+00:00", failed_jobs: 0, retried_jobs: 2}
findings:
  description: The findings of every queue (and of queues whose stripes could not be resolved).
  returned: always
  type: list
  elements: str
  sample: []
new_runtimes:
  description: Live, healthy runtimes whose instance id is not in O(known_runtimes) (all of them when it is empty).
  returned: always
  type: list
  elements: dict
  sample: []
expected_new_runtimes:
  description: The value of O(expected_new_runtimes).
  returned: always
  type: int
  sample: 0
summary:
  description: A few human-readable lines per queue - the count, N of M runtimes converged, depth per shard.
  returned: always
  type: str
  sample: "orders: enqueue_shards 8 (was 1, change #3 ...)\n  runtimes: 1 of 2 live runtimes on the current count ..."
summary_lines:
  description: The same summary as a list of lines, for ansible.builtin.debug.
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

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.awa.operations.plugins.module_utils.connection import (
    HAS_PSYCOPG,
    connection_argument_spec,
    open_connection,
)
from ansible_collections.awa.operations.plugins.module_utils.errors import AwaOperationsError, WaitTimeout
from ansible_collections.awa.operations.plugins.module_utils.health_reads import add_health
from ansible_collections.awa.operations.plugins.module_utils.module_arguments import build_module
from ansible_collections.awa.operations.plugins.module_utils.shards_info import (
    add_advice,
    advise_queues,
    info_argument_spec,
    validate_advice_options,
    validate_read_options,
    wait_for_shards_info,
)


def argument_spec() -> dict:
    spec = connection_argument_spec()
    spec.update(info_argument_spec())
    return spec


def main() -> None:
    module = build_module(AnsibleModule, argument_spec(), supports_check_mode=True,
                          mutually_exclusive=[("queue", "queues")])
    if not HAS_PSYCOPG:
        module.fail_json(msg=missing_required_lib("psycopg >= 3.1"))
    params = module.params
    try:
        validate_read_options(params["wait_timeout"], params["wait_sleep"], params["lock_timeout"])
        validate_advice_options(params["advise"], params["advise_window"], params["advise_gains"], params["wait"])
        with open_connection(params) as conn:
            info = wait_for_shards_info(
                conn, params["wait"], params["wait_timeout"], params["wait_sleep"], queue=params["queue"],
                queues=params["queues"], stripes=params["stripes"], runtime_roles=tuple(params["runtime_roles"]),
                ledger_schema=params["ledger_schema"], margin_seconds=params["clock_margin"],
                known_runtimes=tuple(params["known_runtimes"]), expected_new_runtimes=params["expected_new_runtimes"],
                lock_timeout=params["lock_timeout"])
            if params["health"]:
                add_health(conn, info, params["lock_timeout"])
            if params["advise"]:
                add_advice(info, advise_queues(conn, info, params["advise_window"], params["lock_timeout"],
                                               params["advise_gains"]))
    except WaitTimeout as exc:
        for warning in exc.result.pop("warnings", []):
            module.warn(warning)
        module.fail_json(msg=exc.message, **exc.result)
    except AwaOperationsError as exc:
        module.fail_json(msg=exc.message, **exc.details)
    for warning in info.pop("warnings"):
        module.warn(warning)
    module.exit_json(**info)


if __name__ == "__main__":
    main()
