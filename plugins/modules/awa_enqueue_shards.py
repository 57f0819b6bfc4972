#!/usr/bin/python
# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: awa_enqueue_shards
short_description: Change an Awa queue's enqueue shard count safely, in one transaction
version_added: 0.1.0
description:
  - Sets C(awa.queue_meta.enqueue_shards) of an Awa queue (every physical queue of a striped queue)
    to O(shards), replacing the hand-written upsert of Awa's documentation.
  - In the same transaction it provisions every lane the new count needs (priorities 1 to 4 for
    every shard below O(shards) of every physical queue), grants O(runtime_roles) C(USAGE, SELECT, UPDATE)
    on every lane sequence of the queue, and records the change in a ledger. The new count is written
    last, just before commit, so no producer can see a count whose lanes do not exist yet.
  - Concurrent runs on the same queue are serialized by a transaction advisory lock; the plan is made
    inside the transaction that applies it.
  - A run that finds nothing to change writes nothing at all and reports C(changed=false).
  - If the connection is lost while COMMIT is in flight, the module reconnects, waits until that transaction has
    ended and looks the change up by its RV(change_id). It reports the change committed, or fails saying it was not
    applied and nothing was written. Only when it cannot look (the database stays unreachable, or that transaction
    is still open after O(lock_timeout)) does it report the outcome as unknown, with the query that tells
    (RV(lost_commit)).
  - A change is for a queue the database knows - one with a C(awa.queue_meta) row, lanes, jobs or a runtime serving
    it. A queue it has never seen is refused before anything is written, in check mode too, naming the known
    queues closest to its name (a typo, most likely); O(new_queue) prepares a new queue before its first producer.
  - Lowering the count needs no provisioning. Lanes of shards at or above the new count are never
    deleted; jobs on them keep draining (see M(awa.operations.awa_enqueue_shards_info) with C(wait=drained)).
  - Awa 0.6 worker runtimes cache the count until they restart. Restart them after a change
    (the role C(awa.operations.enqueue_shards) does it) and wait with
    M(awa.operations.awa_enqueue_shards_info) C(wait=converged).
  - After the change (in check mode, at once) it reads its queues as M(awa.operations.awa_enqueue_shards_info) does and
    returns that read as RV(observed) - which runtimes run the new count, and the database's clock - so a restart
    can be planned without another task.
author:
  - awa.operations engineers (@awa-operations)
extends_documentation_fragment:
  - awa.operations.connection
  - awa.operations.attributes
  - awa.operations.attributes.action_group
attributes:
  check_mode:
    support: full
    details:
      - Runs the same reads in a READ ONLY transaction and returns the statements, diff and
        C(changed) the real run would produce. It never writes. It takes no advisory lock, only the
        C(ACCESS SHARE) locks of its reads, and like a real run it waits at most O(lock_timeout) for any of
        them (for example behind an C(awa migrate) holding C(ACCESS EXCLUSIVE) on an Awa table).
  diff_mode:
    support: full
    details:
      - Before and after per physical queue - the shard count, complete lanes, lanes missing below
        the count, and missing runtime-role privileges.
  async:
    support: full
    details:
      - Runs under C(async) as any module does (for example in AWX), with C(poll) above 0 or with C(poll=0) followed
        by M(ansible.builtin.async_status); the result and its warnings are the same.
options:
  queue:
    description:
      - The logical queue name, exactly as the application uses it (stored literally; any characters but
        C(#) and control characters, at most 255).
      - For a striped queue give the logical name; the physical queues C(<queue>#0) .. C(<queue>#N-1)
        follow from O(stripes).
      - Give either O(queue) (with O(shards)) or O(queues).
    type: str
  shards:
    description:
      - The enqueue shard count to set, from 1 (strict FIFO per queue and priority) to 64
        (partitioned FIFO across 64 shards).
      - Required with O(queue).
    type: int
  stripes:
    description:
      - The queue stripe count of the runtimes (C(queue_storage_queue_stripe_count)). With more than one
        stripe the count is set on every physical queue C(<queue>#0) .. C(<queue>#N-1).
      - When not set it is detected from the stored C(<queue>#n) lanes, and is 1 when there are none.
        A value that disagrees with the stored stripes is an error.
      - Only with O(queue); each entry of O(queues) has its own.
    type: int
  new_queue:
    description:
      - The queue may be new to the database - no C(awa.queue_meta) row, no lanes, no jobs, no runtime serving it -
        and is prepared before its first producer (its lanes, grants and count).
      - Without it such a queue is refused, before anything is written and in check mode too, with the known
        queues whose names are closest to it; a queue the database knows is changed either way.
      - Only with O(queue); each entry of O(queues) has its own.
    type: bool
    default: false
    version_added: 0.5.0
  queues:
    description:
      - Several queues in one module run, on one connection, in the order given. Each is changed in its own
        transaction exactly as O(queue) would be. The listed queues are read once, together, and each queue's
        transaction is sent without waiting on each statement; a queue that another run changed since that read is
        planned again in its own transaction. Prefer it to a loop over O(queue) when changing many queues -
        each loop item is a module run of its own (about 0.4 s of Ansible overhead each on a small machine).
      - O(runtime_roles), O(lock_timeout), O(ledger), O(ledger_schema) and O(reason) apply to every entry.
      - The run stops at the first queue that fails. The queues before it stay changed, the error names them,
        and a re-run (the change is idempotent) finishes the list.
    type: list
    elements: dict
    suboptions:
      queue:
        description: The logical queue name, as for O(queue).
        type: str
        required: true
      shards:
        description: Its enqueue shard count, as for O(shards).
        type: int
        required: true
      stripes:
        description: Its stripe count, as for O(stripes).
        type: int
      new_queue:
        description:
          - It may be new to the database, as for O(new_queue).
          - The queues the database has never seen that do not set it are refused together, before any queue of
            the list is changed.
        type: bool
        default: false
        version_added: 0.5.0
  runtime_roles:
    description:
      - Roles Awa runtimes and producers connect as. Each gets C(USAGE, SELECT, UPDATE) on every lane
        sequence of the queue, including lanes created earlier by other roles, which Awa 0.6.9's own
        grants do not cover.
      - Each role must exist. Awa 0.6.9 runtimes also need C(CREATE) on the queue-storage schema (its lane
        triggers run C(CREATE SEQUENCE IF NOT EXISTS)); this module does not grant that.
    type: list
    elements: str
    default: []
  lock_timeout:
    description:
      - Seconds to wait for any lock (another run on the same queue, a lane being created by Awa, the
        C(awa.queue_meta) row, or DDL such as a running C(awa migrate)), in a real run and in check mode.
        When reached, the run fails, names the sessions holding locks if it can see them, and changes
        nothing. V(0) waits without limit.
      - It also bounds the wait, after a connection lost during COMMIT, for that transaction to end (RV(lost_commit)).
    type: float
    default: 5
  ledger:
    description:
      - Record every change in the ledger table C(<ledger_schema>.enqueue_shards_changes) (who, when, from, to,
        the physical queues, the runtime instances live at that moment, and the run's RV(change_id)), in the
        change's own transaction.
      - Without the ledger, a change whose connection is lost during COMMIT is looked up by its transaction's
        status, which a failover to a standby makes unreadable (RV(lost_commit)).
      - The ledger is created on first use, which needs C(CREATE) on the database (or on O(ledger_schema)).
      - M(awa.operations.awa_enqueue_shards_info) needs it to judge whether runtimes run with the new count.
    type: bool
    default: true
  ledger_schema:
    description:
      - Schema of the change ledger.
    type: str
    default: awa_operations
  reason:
    description:
      - Free text stored with the ledger row, for example a change ticket and the operator's name.
    type: str
  detail:
    version_added: 0.5.0
    description:
      - Return the statements (RV(queries)) and the whole read after the change (RV(observed)) - every runtime, stale
        and shutting down ones too, each queue's lanes and shards and its own summary lines, and the summary as one
        string - as M(awa.operations.awa_enqueue_shards_info) returns them with
        O(awa.operations.awa_enqueue_shards_info#module:detail).
      - V(false) leaves them out, so that one queue's change fits a screen; the change and the read are the same
        either way (check mode still runs the statements' reads, and V(true) shows what it would run).
    type: bool
    default: false
notes:
  - Supports Awa 0.6.x (schema versions 39 and 40, tested with 0.6.0, 0.6.5, 0.6.8 and 0.6.9) with the queue-storage
    engine active, on PostgreSQL 17 and 18.
  - The lane sequences this module creates are owned by the connected role (or O(session_role)).
seealso:
  - module: awa.operations.awa_enqueue_shards_info
  - name: Awa ADR-025 Sharded enqueue heads
    description: Why and how Awa shards its enqueue heads.
    link: https://github.com/hardbyte/awa/blob/main/docs/adr/025-sharded-enqueue-heads.md
"""

EXAMPLES = r"""
- name: Raise the shard count of queue "orders" to 8 (check first with --check --diff)
  awa.operations.awa_enqueue_shards:
    login_host: db1.example.com
    login_db: app
    login_user: awa_migrator
    login_password: "{{ vault_awa_migrator_password }}"
    queue: orders
    shards: 8
    runtime_roles: [awa_runtime]
    reason: "CHG-1234 raise orders to 8 shards"
  register: orders_change

- name: Lower a striped queue back to 2 shards on both stripes
  awa.operations.awa_enqueue_shards:
    login_host: db1.example.com
    login_db: app
    login_user: awa_migrator
    login_password: "{{ vault_awa_migrator_password }}"
    queue: events
    stripes: 2
    shards: 2

- name: Prepare queue "invoices" before its first producer starts (without new_queue a queue the database has never seen is refused)
  awa.operations.awa_enqueue_shards:
    login_host: db1.example.com
    login_db: app
    login_user: awa_migrator
    login_password: "{{ vault_awa_migrator_password }}"
    queue: invoices
    shards: 4
    new_queue: true
    runtime_roles: [awa_runtime]

- name: Several queues in one run (one connection; each queue in its own transaction)
  awa.operations.awa_enqueue_shards:
    login_host: db1.example.com
    login_db: app
    login_user: awa_migrator
    login_password: "{{ vault_awa_migrator_password }}"
    queues:
      - {queue: orders, shards: 8}
      - {queue: events, shards: 4, stripes: 2}
      - {queue: refunds, shards: 2, new_queue: true}
    runtime_roles: [awa_runtime]

- name: Ad hoc, from the shell
  ansible.builtin.debug:
    msg: >-
      ansible localhost -m awa.operations.awa_enqueue_shards
      -a 'login_host=db1 login_db=app login_user=awa_migrator queue=orders shards=8' --check --diff
"""

RETURN = r"""
changed:
  description: Whether anything was (or, in check mode, would be) written.
  returned: always
  type: bool
  sample: true
queue:
  description: The logical queue.
  returned: when O(queue) is set
  type: str
  sample: orders
shards:
  description: The requested enqueue shard count.
  returned: when O(queue) is set
  type: int
  sample: 8
stripes:
  description: The stripe count used (requested or detected).
  returned: when O(queue) is set
  type: int
  sample: 1
physical_queues:
  description: The queue names the count was set on.
  returned: always
  type: list
  elements: str
  sample: [orders]
previous_shards:
  description: The effective shard count of each physical queue before the run (1 when it had no queue_meta row).
  returned: always
  type: dict
  sample: {"orders": 1}
lanes_created:
  description: Lanes (queue, priority, shard) that were (or would be) created.
  returned: always
  type: int
  sample: 31
lanes_repaired:
  description: Existing lanes whose sequences were missing and were (or would be) recreated by Awa's C(ensure_lane_sequences).
  returned: always
  type: int
  sample: 0
grants_added:
  description: (runtime role, lane sequence) pairs that lacked C(USAGE), C(SELECT) or C(UPDATE) and were (or would be) granted.
  returned: always
  type: int
  sample: 62
ordering:
  description: The ordering contract the new count gives.
  returned: when O(queue) is set
  type: str
  sample: "partitioned FIFO: FIFO per (queue, priority, shard) across 8 shards; use ordering_key for per-key FIFO"
queries:
  description:
    - The statements the change runs for its plan, with their values bound, in the order they run - Awa's
      lane advisory locks, the head rows of lanes on shards producers cannot route to yet (their triggers create
      the lane sequences), repairs of lane sequences, the ledger table on first use, the lane rows, the head rows
      of lanes producers can already route to, the grants, the ledger row, and last the C(awa.queue_meta)
      upsert. In check mode, the statements the real run would execute. Empty when nothing changes.
    - Not listed are the C(lock_timeout) setting and the per-queue advisory lock every real run takes first (which also
      sets, for its transaction only, the change id the ledger row reads, so check mode reports the same statements),
      and the reads - those the plan is made from, and the re-read that verifies the lanes and grants before the
      ledger row.
    - The sample is a real run raising queue C(orders) from 1 to 2 shards, its shard-0 lanes complete, without
      O(runtime_roles) (so without grants), the ledger existing.
  returned: with O(detail=true)
  type: list
  elements: str
  sample:
    - >-
      SELECT count(pg_advisory_xact_lock(hashtextextended(concat_ws(':', 'awa'::text, q, p, s), 0)))
      FROM (SELECT q, p, s FROM unnest('{orders,orders,orders,orders}'::text[], '{1,2,3,4}'::int2[]::int[],
      '{1,1,1,1}'::int2[]::int[]) WITH ORDINALITY AS lane(q, p, s, n) ORDER BY n) AS ordered
    - >-
      INSERT INTO "awa"."queue_enqueue_heads" (queue, priority, enqueue_shard) SELECT * FROM
      unnest('{orders,orders,orders,orders}'::text[], '{1,2,3,4}'::int2[]::smallint[], '{1,1,1,1}'::int2[]::smallint[])
      ON CONFLICT (queue, priority, enqueue_shard) DO NOTHING
    - >-
      INSERT INTO "awa"."queue_claim_heads" (queue, priority, enqueue_shard) SELECT * FROM
      unnest('{orders,orders,orders,orders}'::text[], '{1,2,3,4}'::int2[]::smallint[], '{1,1,1,1}'::int2[]::smallint[])
      ON CONFLICT (queue, priority, enqueue_shard) DO NOTHING
    - >-
      INSERT INTO "awa_operations"."enqueue_shards_changes" (queue, physical_queues, stripes, from_shards, to_shards,
      lanes_created, grants_added, runtime_roles, live_runtime_ids, reason, "change_id")
      SELECT CAST('orders' AS text), '{orders}'::text[], CAST(1 AS int), CAST('{"orders": 1}' AS jsonb),
      CAST(2 AS smallint), CAST(4 AS int), CAST(0 AS int), '{}'::text[],
      ARRAY(SELECT ri.instance_id FROM awa.runtime_instances AS ri WHERE NOT ri.shutting_down
      AND ri.last_seen_at + make_interval(secs => GREATEST(((GREATEST(ri.snapshot_interval_ms, 1000) / 1000) * 3)::int, 30))
      >= now() ORDER BY ri.instance_id), CAST(NULL AS text), CAST(current_setting('awa_operations.change_id') AS uuid)
      RETURNING id, changed_at, cardinality(live_runtime_ids)
    - >-
      INSERT INTO awa.queue_meta (queue, enqueue_shards) SELECT q, CAST(2 AS smallint) FROM unnest('{orders}'::text[]) AS q
      ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards RETURNING queue, enqueue_shards
diff:
  description: Before and after, per physical queue (with O(queues), merged over the queues in order).
  returned: when diff mode is on
  type: dict
  contains:
    before:
      description: Per physical queue, its state before the run.
      type: dict
      contains: &queue_side
        enqueue_shards:
          description: The effective shard count (1 when the queue has no C(awa.queue_meta) row).
          type: int
        lanes:
          description: Complete lanes (lane row, both head rows and both sequences) of the queue, at any shard.
          type: int
        lanes_missing:
          description: Lanes below the count that are not complete.
          type: int
        missing_grants:
          description: (runtime role, privilege, lane sequence) triples that O(runtime_roles) lack.
          type: int
    after:
      description: The same, after the run (in check mode, after the real run).
      type: dict
      contains: *queue_side
  sample:
    before: {"orders": {"enqueue_shards": 1, "lanes": 1, "lanes_missing": 3, "missing_grants": 0}}
    after: {"orders": {"enqueue_shards": 8, "lanes": 32, "lanes_missing": 0, "missing_grants": 0}}
change_id:
  version_added: 0.2.0
  description:
    - The id (a UUID) this run generated for its change (with O(queues), in each queue's result). The ledger row
      carries it in its C(change_id) column, written in the change's own transaction, so the change can be
      looked up by it - as the module does itself when the connection is lost during COMMIT (RV(lost_commit)).
    - A ledger created by awa.operations 0.1.0 gets the column from the first run by its owner (or a member of the
      owning role). Until then the rows of other roles carry no change id, and the run warns, naming the owner
      and the statement to run.
    - Also returned, with RV(lost_commit), when such a run fails because its commit was not applied or its
      outcome is unknown.
  returned: when a change was applied (not in check mode, not when nothing changed)
  type: str
  sample: 3f6c2a8e-5d1b-4b7e-9a42-0c8e1f7d2b65
lost_commit:
  version_added: 0.2.0
  description:
    - Present when the connection was lost while COMMIT was in flight. The module reconnected with the same
      options (6 attempts within about 15 s), waited (at most O(lock_timeout)) until the change's transaction had
      ended by taking the queue's advisory lock, and looked the change up - by its RV(change_id) in the ledger,
      or, when its ledger row has no change id (O(ledger=false), or a 0.1.0 ledger it may not alter), by
      C(pg_xact_status) of its transaction on the same server history.
    - V(committed) - the run succeeds with the change's result and a warning; nothing to re-run.
      V(not applied) - the run fails; nothing was written; re-run. V(unknown) - the run fails because it could
      not look (the database stayed unreachable, the transaction was still open after O(lock_timeout), or a
      change without a change id met another server history after a failover); the message gives the query
      that tells.
    - With O(queues), in the result of the queue whose commit it was (a queue found committed does not stop
      the list; the next queue runs on a new connection) or at the top level of the failure.
  returned: when the connection was lost during COMMIT
  type: dict
  contains: &lost_commit
    outcome:
      description: V(committed), V(not applied) or V(unknown).
      type: str
    resolved_by:
      description: V(change id in the ledger) or V(transaction status) (not with V(unknown)).
      type: str
    reconnect_attempts:
      description: The attempt (from 1) on which the module reconnected and looked it up (not with V(unknown)).
      type: int
  sample: {"outcome": "committed", "resolved_by": "change id in the ledger", "reconnect_attempts": 1}
ledger:
  description: The ledger row written for this change (with O(queues), in each queue's result).
  returned: when a change was applied, O(ledger=true) and O(queue) is set
  type: dict
  contains: &ledger
    schema:
      description: The ledger schema.
      type: str
    table:
      description: The ledger table.
      type: str
    id:
      description: The row id.
      type: int
    changed_at:
      description: When the change was recorded, by the database clock (ISO 8601).
      type: str
    live_runtimes:
      description: How many Awa runtime instances were live at that moment.
      type: int
    change_id:
      description: The RV(change_id) the row carries (null for a row of a 0.1.0 ledger the run may not alter).
      type: str
  sample: {"schema": "awa_operations", "table": "enqueue_shards_changes", "id": 7,
           "changed_at": "2026-11-29T10:24:32.632444+00:00", "live_runtimes": 2,
           "change_id": "3f6c2a8e-5d1b-4b7e-9a42-0c8e1f7d2b65"}
queues:
  description:
    - With O(queues), each queue's own result by logical queue name, with the keys a run with O(queue) returns,
      except RV(queries) and RV(diff), which the top level gives once for the whole list, merged in order.
    - The other top-level values are totals (RV(lanes_created), RV(lanes_repaired), RV(grants_added)) or merged over
      the queues (RV(physical_queues), RV(previous_shards)); RV(changed) is true when any queue changed.
  returned: when O(queues) is set
  type: dict
  contains:
    changed:
      description: Whether anything of this queue was (or would be) written.
      type: bool
    check_mode:
      description: Whether the run was a check-mode run.
      type: bool
    queue:
      description: The logical queue.
      type: str
    shards:
      description: Its requested enqueue shard count.
      type: int
    stripes:
      description: Its stripe count (requested or detected).
      type: int
    physical_queues:
      description: Its physical queues.
      type: list
      elements: str
    previous_shards:
      description: The effective shard count of each of its physical queues before the run.
      type: dict
    lanes_created:
      description: Its lanes that were (or would be) created.
      type: int
    lanes_repaired:
      description: Its lanes whose sequences were (or would be) recreated.
      type: int
    grants_added:
      description: Its (runtime role, lane sequence) pairs that were (or would be) granted.
      type: int
    ordering:
      description: The ordering contract its new count gives.
      type: str
    duration:
      description: Seconds its change took.
      type: float
    change_id:
      description: The id of its change, as RV(change_id) (when its change was applied).
      type: str
    ledger:
      description: The ledger row of its change, as RV(ledger) (when its change was applied with O(ledger=true)).
      type: dict
      contains: *ledger
    lost_commit:
      description: How its COMMIT was looked up, as RV(lost_commit) (when the connection was lost during it).
      type: dict
      contains: *lost_commit
  sample: {"orders": {"changed": true, "check_mode": false, "queue": "orders", "shards": 8, "stripes": 1,
           "physical_queues": ["orders"], "previous_shards": {"orders": 1}, "lanes_created": 28, "lanes_repaired": 0,
           "grants_added": 0, "ordering": "partitioned FIFO: FIFO per (queue, priority, shard) across 8 shards; use
           ordering_key for per-key FIFO", "duration": 0.09, "change_id": "3f6c2a8e-5d1b-4b7e-9a42-0c8e1f7d2b65",
           "ledger": {"schema": "awa_operations", "table": "enqueue_shards_changes", "id": 7,
           "changed_at": "2026-11-29T10:24:32.632444+00:00", "live_runtimes": 2,
           "change_id": "3f6c2a8e-5d1b-4b7e-9a42-0c8e1f7d2b65"}}}
observed:
  version_added: 0.3.0
  description:
    - The queues of the run read right after the change, on its connection (in check mode, the state now) - exactly
      what M(awa.operations.awa_enqueue_shards_info) returns for them with O(awa.operations.awa_enqueue_shards_info#module:queues)
      set to their names and the same O(runtime_roles), O(ledger_schema), O(lock_timeout) and O(detail), so no read
      of its own is needed after a change - for example by the restart plan of the role
      P(awa.operations.enqueue_shards#role), which asks for the detail.
    - One read for the whole list, in a fixed number of statements. When a lost COMMIT closed the connection, it is read
      on a new one. A read that fails fails the run, with the change's result and a message saying that the change
      stands.
  returned: always
  type: dict
  contains:
    read_at:
      description: When it was read, by the database's clock (ISO 8601).
      type: str
    server:
      description: The server read (host:port).
      type: str
    converged:
      description: As RV(awa.operations.awa_enqueue_shards_info#module:converged) - every live runtime runs the current
        count of every queue of the run.
      type: bool
    drained:
      description: As RV(awa.operations.awa_enqueue_shards_info#module:drained).
      type: bool
    queues:
      description: Per logical queue of the run, its view - each as in
        RV(awa.operations.awa_enqueue_shards_info#module:queues) (count, convergence with the stragglers named, last
        recorded change, depths, grants, findings; with O(detail), its lanes, shards and summary lines too).
      type: dict
    runtimes:
      description: With O(detail) only - every Awa runtime, as in RV(awa.operations.awa_enqueue_shards_info#module:runtimes)
        (live or not, pid, start, the queues whose current count it does not run yet).
      type: list
      elements: dict
    new_runtimes:
      description: With O(detail) only - the live, healthy runtimes, as in
        RV(awa.operations.awa_enqueue_shards_info#module:new_runtimes).
      type: list
      elements: dict
    expected_new_runtimes:
      description: Always V(0).
      type: int
    findings:
      description: As RV(awa.operations.awa_enqueue_shards_info#module:findings).
      type: list
      elements: str
    summary:
      description: With O(detail) only - as RV(awa.operations.awa_enqueue_shards_info#module:summary).
      type: str
    summary_lines:
      description: As RV(awa.operations.awa_enqueue_shards_info#module:summary_lines).
      type: list
      elements: str
  sample:
    summary_lines: ["orders: enqueue_shards 8 (was 1, change #7 ...)", "  runtimes: 0 of 2 live runtimes on the current count ..."]
    read_at: "2026-11-29T10:24:32.801254+00:00"
    server: "db1.example.com:5432"
    converged: false
    drained: false
    queues: {"orders": {"queue": "orders", "enqueue_shards": {"orders": 8}, "converged": false, "runtimes_live": 2,
             "runtimes_converged": 0, "stragglers": [{"pid": 4242, "physical_queue": "orders", "...": "..."}],
             "...": "..."}}
    expected_new_runtimes: 0
    findings: []
check_mode:
  description: Whether the run was a check-mode run.
  returned: always
  type: bool
  sample: false
duration:
  description: Seconds the run took, connecting excluded.
  returned: always
  type: float
  sample: 0.045
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection
from ansible_collections.awa.operations.plugins.module_utils.db.options import (
    DEFAULT_LOCK_TIMEOUT, DEFAULT_SCHEMA, connection_argument_spec, validate_lock_timeout)
from ansible_collections.awa.operations.plugins.module_utils.change.result import EnqueueShardsResult
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_and_read
from ansible_collections.awa.operations.plugins.module_utils.module_main import run_module
from ansible_collections.awa.operations.plugins.module_utils.change.request import ENTRY_KEYS, validate_requests

# One queue (queue, shards[, stripes]) or a list of them (queues).
ARGUMENT_RULES = {
    "required_one_of": [("queue", "queues")],
    "mutually_exclusive": [("queue", "queues"), ("shards", "queues"), ("stripes", "queues"), ("new_queue", "queues")],
    "required_together": [("queue", "shards")],
}


def argument_spec() -> dict[str, Any]:
    spec = connection_argument_spec()
    spec.update(
        queue={"type": "str"},
        shards={"type": "int"},
        stripes={"type": "int"},
        new_queue={"type": "bool", "default": False},
        queues={"type": "list", "elements": "dict", "options": {
            "queue": {"type": "str", "required": True},
            "shards": {"type": "int", "required": True},
            "stripes": {"type": "int"},
            "new_queue": {"type": "bool", "default": False},
        }},
        runtime_roles={"type": "list", "elements": "str", "default": []},
        lock_timeout={"type": "float", "default": DEFAULT_LOCK_TIMEOUT},
        ledger={"type": "bool", "default": True},
        ledger_schema={"type": "str", "default": DEFAULT_SCHEMA},
        reason={"type": "str"},
        detail={"type": "bool", "default": False},
    )
    return spec


def run(module: AnsibleModule) -> tuple[EnqueueShardsResult, list[str]]:
    """The run: the change of ``queue`` (one request) or of ``queues`` (a list of them), then the read of them after
    it; what was asked says the result's form (operation.change_queues)."""
    params = module.params
    # ``queue`` is validated as the one entry of a list, and asked as one request.
    one = params["queues"] is None
    requests = validate_requests([{key: params[key] for key in ENTRY_KEYS}] if one else params["queues"],
                                 params["runtime_roles"], params["ledger"])
    validate_lock_timeout(params["lock_timeout"])
    with open_connection(params, writes=True) as conn:
        return change_and_read(
            conn, requests[0] if one else requests, diff=module._diff,  # pylint: disable=protected-access
            reconnect=lambda: connect(params, writes=True), check_mode=module.check_mode,
            lock_timeout=params["lock_timeout"], ledger_schema=params["ledger_schema"], reason=params["reason"],
            detail=params["detail"])


def main() -> None:
    run_module(AnsibleModule, argument_spec(), ARGUMENT_RULES, run)


if __name__ == "__main__":
    main()
