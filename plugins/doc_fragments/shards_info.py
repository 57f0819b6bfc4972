# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of awa_enqueue_shards_info, also those of the rollout role's internal read.

Twin of module_utils/info/options.py's ``argument_spec()`` (a unit test
keeps them equal). The role's internal read
(plugins/modules/__role/enqueue_shards_rollout_info.py) extends it with the
rollout's own options and the wait ``restarted``.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  queue:
    description:
      - The logical queue to report on. When neither O(queue) nor O(queues) is set, every queue with lanes or an
        C(awa.queue_meta) row is reported.
    type: str
  queues:
    description:
      - Several logical queues to report on (and wait for) in one read; their stripes are detected.
      - An empty list reports no queue, only the runtimes.
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
      - On timeout the task fails, names every runtime still waited for (host, pid, instance id, age) and
        returns the last observed state.
      - A lost connection (a failover, a restart) does not end the wait once it has reached the database. It
        connects again, to whichever server of O(login_host) is of the kind O(target_session_attrs) asks for
        (by default the primary, so after a failover the promoted standby), up to 24 times, 5 seconds apart (or
        O(wait_sleep) when longer) and within O(wait_timeout), and warns that it did and where it reads since
        (RV(awa.operations.awa_enqueue_shards_info#module:server)); then it fails, saying so. Two minutes cover a
        Patroni failover (about 40 s with its defaults) and a managed Multi-AZ one (typically 60 to 120 s); a longer
        outage is for the operator to look at.
    type: str
    default: none
    choices: [none, converged, drained]
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
        (RV(awa.operations.awa_enqueue_shards_info#module:advice)) - raise to a count, keep, lower (after a drain),
        or "sharding will not help" with the limit named (NOTIFY at commit, WAL flush, CPU, the claimers, or the
        copy path's lane locks) - each with the evidence it used and the ordering consequence of following it.
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
  committed:
    version_added: 0.2.0
    description:
      - 'What a change committed - the RV(awa.operations.awa_enqueue_shards#module:queues) of
        M(awa.operations.awa_enqueue_shards), or a mapping of queue names to C({shards: N, ledger: {id: ID}}) (the
        ledger row is optional; other keys are ignored, and so are check-mode results, which committed nothing).'
      - Every read compares it with the count of each of these queues it reads. When a count differs, the task
        fails at once - and a wait ends - naming the count found on
        RV(awa.operations.awa_enqueue_shards_info#module:server) and what to re-run, instead of waiting for (or
        reporting) convergence on a count that is not there. That happens when a failover promoted a standby that
        had not received the change (asynchronous replication), or when the count was changed again since (a later
        ledger row says by whom).
      - The role P(awa.operations.enqueue_shards#role) passes the result of its change to its waits.
    type: dict
  advise_gains:
    description:
      - A gains table of your own instead of the one measured for this release (docs/performance.md) - from a clone
        of the collection's repository (the built collection ships no benchmarks), run its shard_choice benchmark on
        hardware like yours (C(bash benchmarks/run.sh --suites shard_choice)), then
        C(python -m benchmarks.shard_gains RESULTS.json) prints the table.
      - 'Its form is C({"gains": {PATH: {N: {S: GAIN}}}, "limits": {PATH: {N: LIMIT}}}) with PATH one of V(insert),
        V(copy) and V(copy_keyed), N producers, S shards and GAIN the measured throughput over S=1; C(limits) is
        optional.'
    type: dict
  lanes:
    version_added: 0.3.0
    description:
      - Read each queue's lanes - which exist, their grants, and their exact ready depths.
      - V(false) reads only what runtime convergence needs - the runtimes, each queue's count and its last recorded
        change - in a fixed number of statements, whatever the number of lanes. Each queue of
        RV(awa.operations.awa_enqueue_shards_info#module:queues) then lacks the keys that come from its lanes
        (C(drained), C(ready_depth), C(depth_beyond_count), C(lanes_complete), C(lanes_missing), C(lanes), C(shards),
        C(grants)) and their findings, and RV(awa.operations.awa_enqueue_shards_info#module:drained) is not returned.
      - For a wait that does not look at the depths (O(wait=converged)), so that a poll costs the same for one queue
        or a hundred - the role P(awa.operations.enqueue_shards#role) reads so between the batches of a rolling
        restart. Not with O(wait=drained).
    type: bool
    default: true
  detail:
    version_added: 0.5.0
    description:
      - Return the whole read - every runtime (RV(awa.operations.awa_enqueue_shards_info#module:runtimes),
        RV(awa.operations.awa_enqueue_shards_info#module:new_runtimes)), stale and shutting down ones too; each
        queue's lanes and shards (RV(awa.operations.awa_enqueue_shards_info#module:queues.lanes),
        RV(awa.operations.awa_enqueue_shards_info#module:queues.shards)) and its own
        RV(awa.operations.awa_enqueue_shards_info#module:queues.summary_lines); and the summary as one string
        (RV(awa.operations.awa_enqueue_shards_info#module:summary)).
      - V(false) returns each thing once, so that one queue's read fits a screen - RV(awa.operations.awa_enqueue_shards_info#module:summary_lines)
        first, then each queue's count, depths, convergence with the runtimes not yet on the count
        (RV(awa.operations.awa_enqueue_shards_info#module:queues.stragglers)), last change, grants and findings.
        The ready jobs of each shard are in the summary lines; the runtimes are counted there and in each queue.
      - The reads are the same either way (this only chooses what is returned), and a wait judges every poll on all
        of it.
    type: bool
    default: false
  health:
    description:
      - Also read what a bad change shows on the database side
        (RV(awa.operations.awa_enqueue_shards_info#module:health)) - the database's deadlock count
        (C(pg_stat_database.deadlocks)), and per queue the jobs that failed or were retried since its last change
        recorded by M(awa.operations.awa_enqueue_shards).
      - Two more statements, in a READ ONLY transaction of their own; with O(wait), on every poll.
      - The rollout role reads it before the change and after every batch of restarts, and stops the rollout when
        a reading crosses the limit the operator set.
    type: bool
    default: false
    version_added: 0.2.0
"""
