# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Applying a plan: the only code that writes. It builds the statements, runs them, verifies, commits.

Statements are built from the plan with ``psycopg.sql`` (identifiers quoted,
values bound) and run in the caller's transaction, in this order:

1. lane advisory locks, in Awa's lane order (queue, priority, shard), so
   Awa's own lane creation (Rust ``ensure_lane_inserts``) waits for us;
2. lanes on shards producers cannot route to yet (shard >= current count);
3. repairs of existing lanes with Awa's ``ensure_lane_sequences``;
4. the change ledger table, the first time (or, run by its owner, the
   change_id column a ledger created by awa.operations 0.1.0 lacks);
5. lane counter rows and lanes on shards producers can already route to,
   last, so the window in which a producer's own first write into the same
   lane could collide with ours is short;
6. grants on every lane sequence the runtime roles lack;
7. the re-read that verifies them (in ``apply_change``);
8. the ledger row, then the ``awa.queue_meta`` upsert, just before commit,
   so the row lock on queue_meta is held only for the commit.

Then it commits (``apply_change``): a COMMIT whose connection is lost is
looked up (``lost_commit.settle``), by the change id the ledger row carries.

Scalar values are cast with ``CAST(x AS type)``, not ``x::type``: the rendered
statements are returned as ``queries`` and shown in the module's RETURN
sample, and ansible-doc's text output deletes ``q, 8::`` as if it were an RST
directive. The Awa facts relied on are in docs/awa-internals.md.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ansible_collections.awa.operations.plugins.module_utils.change import lost_commit
from ansible_collections.awa.operations.plugins.module_utils.change.plan import ChangedSinceRead, LaneKey, Plan, queue_summary
from ansible_collections.awa.operations.plugins.module_utils.change.request import ChangeRequest
from ansible_collections.awa.operations.plugins.module_utils.change.result import QueueChangeRun
from ansible_collections.awa.operations.plugins.module_utils.db.connection import (
    Statement, commit, one_row, schema_sql, sql, transaction)
from ansible_collections.awa.operations.plugins.module_utils.errors import CommitLost, DatabaseError
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import ordering_contract
from ansible_collections.awa.operations.plugins.module_utils.schema.lanes import send_queue_state
from ansible_collections.awa.operations.plugins.module_utils.schema.ledger import (
    LedgerPlan, ledger_statements, recorded_row)
from ansible_collections.awa.operations.plugins.module_utils.schema.sessions import (
    describe_lock_holders, fetch_transaction_identity)

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection


def _columns(keys: Sequence[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """Lane keys as the statements bind them: a column each of queues, priorities (and shards), in lane order."""
    return dict(zip(("queues", "priorities", "shards"), (list(column) for column in zip(*sorted(keys)))))


@dataclass
class Prepared:
    """One queue's change, planned from a read: the request and its plan, the statements that make it (split where
    the caller verifies) and how they record it, and what a run reports of it."""

    request: ChangeRequest
    schema: str
    plan: Plan
    provision: list[Statement]
    record: Statement | None
    switch: Statement | None
    warnings: list[str]
    # The ledger's DDL is a script of several statements: the extended protocol of pipeline mode takes one.
    pipelined: bool = True
    # The ledger row carries the change id (else a lost commit is looked up by its transaction).
    records_change_id: bool = False
    # The statements as they are sent, values bound (what a check-mode run reports): the read renders them.
    queries: list[str] = field(default_factory=list)

    @property
    def all(self) -> list[Statement]:
        return [*self.provision, *(s for s in (self.record, self.switch) if s is not None)]


def prepare_change(request: ChangeRequest, schema: str, plan: Plan, ledger_schema: str,
                   ledger_plan: LedgerPlan | None, reason: str | None = None, warnings: Sequence[str] = ()) -> Prepared:
    """``request``'s change as ``plan`` says it: every statement a real run executes (none when nothing changes),
    its ledger's as ``ledger_plan`` says (none without one: ledger false, or nothing changes) - create the ledger,
    add the change_id column to an existing one (its owner runs this), and a row that carries the change id or
    not - and the warnings: ``warnings`` (the installation's), the plan's and the ledger's.
    """
    said = [*warnings, *plan.warnings, *(ledger_plan.warnings if ledger_plan else [])]
    if not plan.changed:
        return Prepared(request, schema, plan, [], None, None, said)

    def hidden(key: LaneKey) -> bool:
        # Producers route to [0, current count) only: lanes beyond stay invisible until commit.
        return key[2] >= plan.previous_shards[key[0]]

    def heads(keep: Callable[[LaneKey], bool]) -> list[Statement]:
        # Head rows; Awa's BEFORE INSERT trigger creates each lane sequence.
        return [Statement(sql.SQL(
            "INSERT INTO {} (queue, priority, enqueue_shard) "
            "SELECT * FROM unnest(%(queues)s::text[], %(priorities)s::smallint[], %(shards)s::smallint[]) "
            "ON CONFLICT (queue, priority, enqueue_shard) DO NOTHING").format(sql.Identifier(schema, table)),
            _columns(kept)) for table, keys in (("queue_enqueue_heads", plan.enqueue_heads_to_create),
                                                ("queue_claim_heads", plan.claim_heads_to_create))
            if (kept := [key for key in keys if keep(key)])]

    locked = sorted(set(plan.enqueue_heads_to_create) | set(plan.claim_heads_to_create) | set(plan.lanes_to_repair))
    # Awa's lane-insert locks: hashtextextended('{schema}:{queue}:{priority}:{shard}', 0) (docs/awa-internals.md §3).
    before_ledger = [Statement(sql.SQL(
        "SELECT count(pg_advisory_xact_lock(hashtextextended(concat_ws(':', %(schema)s::text, q, p, s), 0))) "
        "FROM (SELECT q, p, s FROM unnest(%(queues)s::text[], %(priorities)s::int[], %(shards)s::int[]) "
        "WITH ORDINALITY AS lane(q, p, s, n) ORDER BY n) AS ordered"), {"schema": schema, **_columns(locked)})] if (
        locked) else []
    before_ledger += heads(hidden)
    if plan.lanes_to_repair:
        before_ledger.append(Statement(schema_sql(
            schema, "SELECT count({ensure_lane_sequences}(q, p, s)) FROM unnest(%(queues)s::text[], "
            "%(priorities)s::smallint[], %(shards)s::smallint[]) AS lane(q, p, s)"), _columns(plan.lanes_to_repair)))
    after_ledger = [Statement(schema_sql(
        schema, "INSERT INTO {queue_lanes} (queue, priority) SELECT * FROM unnest(%(queues)s::text[], "
        "%(priorities)s::smallint[]) ON CONFLICT (queue, priority) DO NOTHING"),
        _columns(plan.lane_rows_to_create))] if plan.lane_rows_to_create else []
    after_ledger += heads(lambda key: not hidden(key))
    if plan.grants_added:
        after_ledger.append(Statement(sql.SQL("GRANT USAGE, SELECT, UPDATE ON SEQUENCE {} TO {}").format(
            sql.SQL(", ").join(sql.Identifier(schema, name) for name in plan.grant_sequences),
            sql.SQL(", ").join(sql.Identifier(role) for role in plan.grant_roles))))
    switch = Statement(sql.SQL(
        "INSERT INTO awa.queue_meta (queue, enqueue_shards) "
        "SELECT q, CAST(%(shards)s AS smallint) FROM unnest(%(queues)s::text[]) AS q "
        "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards "
        "RETURNING queue, enqueue_shards"), {"queues": list(plan.meta_queues_to_update), "shards": plan.shards}) if (
        plan.meta_queues_to_update) else None
    # The ledger's own statements: its table the first time (between the lanes producers cannot see yet and
    # those they can), and its row.
    ddl, record = ledger_statements(ledger_schema, ledger_plan, {
        "queue": plan.queue, "physical_queues": plan.physical_queues, "stripes": plan.stripes,
        "previous_shards": plan.previous_shards, "shards": plan.shards, "lanes_created": len(plan.lanes_to_create),
        "grants_added": plan.grants_added, "runtime_roles": plan.grant_roles, "reason": reason})
    provision = before_ledger + ([ddl] if ddl is not None else []) + after_ledger
    return Prepared(request, schema, plan, provision, record, switch, said, pipelined=ddl is None,
                    records_change_id=bool(ledger_plan and ledger_plan.records_change_id))


def planned_result(plan: Plan, queries: list[str], *, check_mode: bool, warnings: list[str]) -> QueueChangeRun:
    """One queue's change as its plan says it (the ledger row, change id and lost commit are added once known)."""
    return {
        "changed": plan.changed, "check_mode": check_mode, "queue": plan.queue, "shards": plan.shards,
        "stripes": plan.stripes, "physical_queues": plan.physical_queues, "previous_shards": plan.previous_shards,
        "lanes_created": len(plan.lanes_to_create), "lanes_repaired": len(plan.lanes_to_repair),
        "grants_added": plan.grants_added, "ordering": ordering_contract(plan.shards), "duration": 0.0,
        "queries": queries, "diff": {"before": plan.before, "after": plan.after}, "warnings": warnings}


def apply_change(conn: Connection, prepared: Prepared, *, check_mode: bool, lock_timeout: float, ledger_schema: str,
                 reconnect: Callable[[], Connection] | None) -> QueueChangeRun:
    """One queue's change: its planned result in check mode or with nothing to change; else its transaction, which
    takes the queue's lock naming a new change id, runs the statements, verifies them against the plan, records and
    switches, and commits, a lost COMMIT settled on a connection from ``reconnect`` (``lost_commit``).

    Every statement is sent before any result is read, so on a connection in
    pipeline mode (unless the ledger's table is created) the whole change
    costs one round trip; nothing commits before the results are checked.
    The ledger row written carries the change id unless its ledger has no
    column for it. Raises ``ChangedSinceRead`` when the queue's counts are no
    longer those it was planned from; on any failure the transaction is
    rolled back and nothing is written.
    """
    started = time.monotonic()
    plan = prepared.plan
    action = f"changing enqueue_shards of queue {plan.queue!r}"
    result = planned_result(plan, prepared.queries, check_mode=check_mode, warnings=prepared.warnings)
    if plan.changed and not check_mode:
        # The id its ledger row will carry (a check-mode run writes none, and returns none).
        change_id = str(uuid.uuid4())
        with transaction(conn, action, lock_timeout=lock_timeout,
                         on_lock_timeout=lambda: describe_lock_holders(conn, ["awa", ledger_schema])):
            with conn.pipeline() if prepared.pipelined else contextlib.nullcontext():
                for statement in [lost_commit.queue_lock(plan.queue, change_id), *prepared.provision]:
                    conn.execute(*statement)
                observed = send_queue_state(conn, prepared.schema, plan.physical_queues, prepared.request.runtime_roles,
                                            dict.fromkeys(plan.physical_queues, plan.shards))
                record, switch = (None if statement is None else conn.execute(*statement)
                                  for statement in (prepared.record, prepared.switch))
                # After provisioning, before the switch: the state re-read in this transaction must hold every
                # planned lane and grant (the summary the plan's before was made with), and the counts it was made from.
                state = observed()
                if state.enqueue_shards != plan.previous_shards:
                    raise ChangedSinceRead(
                        f"queue {plan.queue!r} was changed while this run planned it (counts {plan.previous_shards} "
                        f"when read, {state.enqueue_shards} now); the transaction was rolled back and nothing "
                        "changed. Re-run to change it.")
                provisioned = {queue: queue_summary(state, queue, plan.shards) for queue in plan.physical_queues}
                if provisioned != plan.after:
                    raise DatabaseError(
                        f"After provisioning queue {plan.queue!r} the database does not match the plan (expected "
                        f"{plan.after}, found {provisioned}); the transaction was rolled back and nothing changed.")
                if record is not None:
                    result["ledger"] = recorded_row(ledger_schema, one_row(record),
                                                    change_id if prepared.records_change_id else None)
                switched: dict[str, int] = dict(switch.fetchall()) if switch is not None else {}
                if any(switched.get(queue) != plan.shards for queue in plan.meta_queues_to_update):
                    raise DatabaseError(f"awa.queue_meta did not take enqueue_shards={plan.shards}: {switched}; "
                                        "the transaction was rolled back and nothing changed.")
            result["change_id"] = change_id
            # Without a change id in the row, a lost commit is looked up by its transaction.
            pending = lost_commit.PendingChange(
                plan.queue, change_id, result, None if prepared.record is None else ledger_schema,
                None if prepared.records_change_id else fetch_transaction_identity(conn), lock_timeout)
            try:
                commit(conn, action)
            except CommitLost as exc:
                # Looked up on a new connection: this one, and its transaction, are gone.
                result = lost_commit.settle(pending, exc.message, reconnect)
    result["duration"] = round(time.monotonic() - started, 3)
    return result
