# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The statements of a shard-count change: the only code that writes.

Statements are built from the plan with ``psycopg.sql`` (identifiers quoted,
values bound) and run in the caller's transaction, in this order:

1. lane advisory locks, in Awa's lane order (queue, priority, shard), so
   Awa's own lane creation (Rust ``ensure_lane_inserts``) waits for us;
2. lanes on shards producers cannot route to yet (shard >= current count);
3. repairs of existing lanes with Awa's ``ensure_lane_sequences``;
4. the change ledger table, the first time;
5. lane counter rows and lanes on shards producers can already route to,
   last, so the window in which a producer's own first write into the same
   lane could collide with ours is short;
6. grants on every lane sequence the runtime roles lack;
7. (the caller re-reads and verifies here)
8. the ledger row, then the ``awa.queue_meta`` upsert, just before commit,
   so the row lock on queue_meta is held only for the commit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ansible_collections.awa.operations.plugins.module_utils.connection import psycopg, sql
from ansible_collections.awa.operations.plugins.module_utils.ledger import ledger_ddl, ledger_insert
from ansible_collections.awa.operations.plugins.module_utils.planner import Plan

QUEUE_LOCK_PREFIX = "awa.operations:enqueue_shards:"


@dataclass(frozen=True)
class Statement:
    """One statement and its bound parameters."""

    query: object  # sql.Composable
    params: dict | None = None


def queue_lock(queue: str) -> Statement:
    """Serializes concurrent runs of the module on one logical queue (transaction scoped)."""
    return Statement(sql.SQL("SELECT pg_advisory_xact_lock(hashtextextended(%(key)s::text, 0))"),
                     {"key": QUEUE_LOCK_PREFIX + queue})


def lock_timeout(seconds: float) -> Statement:
    return Statement(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{int(seconds * 1000)}ms")))


def _columns(keys: list[tuple]) -> list[list]:
    return [list(column) for column in zip(*keys)] if keys else []


def lane_locks(schema: str, keys: list[tuple]) -> Statement:
    """Awa's lane-insert locks: hashtextextended('{schema}:{queue}:{priority}:{shard}', 0)."""
    queues, priorities, shards = _columns(sorted(keys))
    return Statement(sql.SQL(
        "SELECT count(pg_advisory_xact_lock(hashtextextended(concat_ws(':', %(schema)s::text, q, p, s), 0))) "
        "FROM (SELECT q, p, s FROM unnest(%(queues)s::text[], %(priorities)s::int[], %(shards)s::int[]) "
        "WITH ORDINALITY AS lane(q, p, s, n) ORDER BY n) AS ordered"),
        {"schema": schema, "queues": queues, "priorities": priorities, "shards": shards})


def insert_lane_rows(schema: str, keys: list[tuple]) -> Statement:
    queues, priorities = _columns(sorted(keys))
    return Statement(sql.SQL(
        "INSERT INTO {} (queue, priority) SELECT * FROM unnest(%(queues)s::text[], %(priorities)s::smallint[]) "
        "ON CONFLICT (queue, priority) DO NOTHING").format(sql.Identifier(schema, "queue_lanes")),
        {"queues": queues, "priorities": priorities})


def insert_heads(schema: str, table: str, keys: list[tuple]) -> Statement:
    """Head rows; Awa's BEFORE INSERT trigger creates each lane sequence."""
    queues, priorities, shards = _columns(sorted(keys))
    return Statement(sql.SQL(
        "INSERT INTO {} (queue, priority, enqueue_shard) "
        "SELECT * FROM unnest(%(queues)s::text[], %(priorities)s::smallint[], %(shards)s::smallint[]) "
        "ON CONFLICT (queue, priority, enqueue_shard) DO NOTHING").format(sql.Identifier(schema, table)),
        {"queues": queues, "priorities": priorities, "shards": shards})


def repair_lane_sequences(schema: str, keys: list[tuple]) -> Statement:
    queues, priorities, shards = _columns(sorted(keys))
    return Statement(sql.SQL(
        "SELECT count({}(q, p, s)) FROM unnest(%(queues)s::text[], %(priorities)s::smallint[], "
        "%(shards)s::smallint[]) AS lane(q, p, s)").format(sql.Identifier(schema, "ensure_lane_sequences")),
        {"queues": queues, "priorities": priorities, "shards": shards})


def grant_lane_sequences(schema: str, sequences: list[str], roles: list[str]) -> Statement:
    return Statement(sql.SQL("GRANT USAGE, SELECT, UPDATE ON SEQUENCE {} TO {}").format(
        sql.SQL(", ").join(sql.Identifier(schema, name) for name in sequences),
        sql.SQL(", ").join(sql.Identifier(role) for role in roles)))


def upsert_queue_meta(queues: list[str], shards: int) -> Statement:
    return Statement(sql.SQL(
        "INSERT INTO awa.queue_meta (queue, enqueue_shards) SELECT q, %(shards)s::smallint FROM unnest(%(queues)s::text[]) AS q "
        "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards "
        "RETURNING queue, enqueue_shards"), {"queues": list(queues), "shards": shards})


@dataclass
class ChangeStatements:
    """The write statements of a plan, split where the caller verifies."""

    provision: list[Statement]
    record: Statement | None
    switch: Statement | None

    @property
    def all(self) -> list[Statement]:
        return [*self.provision, *(s for s in (self.record, self.switch) if s is not None)]


def _head_statements(schema: str, plan: Plan, keep) -> list[Statement]:
    enqueue = [key for key in plan.enqueue_heads_to_create if keep(key)]
    claim = [key for key in plan.claim_heads_to_create if keep(key)]
    return ([insert_heads(schema, "queue_enqueue_heads", enqueue)] if enqueue else []) + (
        [insert_heads(schema, "queue_claim_heads", claim)] if claim else [])


def build_change_statements(plan: Plan, schema: str, *, ledger_schema: str | None, create_ledger: bool,
                            reason: str | None = None) -> ChangeStatements:
    """Every statement a real run executes for ``plan`` (none when nothing changes)."""
    if not plan.changed:
        return ChangeStatements([], None, None)

    def hidden(key: tuple) -> bool:
        # Producers route to [0, current count) only: lanes beyond stay invisible until commit.
        return key[2] >= plan.previous_shards[key[0]]

    locked = sorted(set(plan.enqueue_heads_to_create) | set(plan.claim_heads_to_create) | set(plan.lanes_to_repair))
    provision = [lane_locks(schema, locked)] if locked else []
    provision += _head_statements(schema, plan, hidden)
    if plan.lanes_to_repair:
        provision.append(repair_lane_sequences(schema, plan.lanes_to_repair))
    if create_ledger and ledger_schema:
        provision.append(Statement(ledger_ddl(ledger_schema)))
    if plan.lane_rows_to_create:
        provision.append(insert_lane_rows(schema, plan.lane_rows_to_create))
    provision += _head_statements(schema, plan, lambda key: not hidden(key))
    if plan.grants.pairs:
        provision.append(grant_lane_sequences(schema, plan.grants.sequences, plan.grants.roles))
    record = None
    if ledger_schema:
        record = Statement(ledger_insert(ledger_schema), {
            "queue": plan.queue, "physical_queues": plan.physical_queues, "stripes": plan.stripes,
            "from_shards": json.dumps(plan.previous_shards), "to_shards": plan.shards,
            "lanes_created": len(plan.lanes_to_create), "grants_added": plan.grants.pairs,
            "runtime_roles": plan.grants.roles, "reason": reason})
    switch = upsert_queue_meta(plan.meta_queues_to_update, plan.shards) if plan.meta_queues_to_update else None
    return ChangeStatements(provision, record, switch)


def render(conn, statements: list[Statement]) -> list[str]:
    """The statements as psycopg would send them with their values bound (for reports)."""
    cursor = psycopg.ClientCursor(conn)
    return [cursor.mogrify(statement.query, statement.params).strip() for statement in statements]


def execute(conn, statement: Statement) -> list[tuple]:
    cursor = conn.execute(statement.query, statement.params)
    return cursor.fetchall() if cursor.description else []
