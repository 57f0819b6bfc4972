# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The change ledger: one row per applied change, written in the change's own transaction.

It is the audit trail (who, when, from, to) and the basis of the convergence
check: it records which runtime instances were running when the count switched.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.awa.operations.plugins.module_utils.connection import sql
from ansible_collections.awa.operations.plugins.module_utils.introspect import LIVE_RUNTIME_PREDICATE

DEFAULT_SCHEMA = "awa_operations"
TABLE = "enqueue_shards_changes"
# Serializes the first creation of the ledger by concurrent runs.
CREATE_LOCK_KEY = "awa.operations:ledger"

LEDGER_DDL = """
SELECT pg_advisory_xact_lock(hashtextextended({lock_key}, 0));
-- CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema
-- exists; a role given only CREATE on a prepared schema must skip it.
SELECT set_config('awa_operations.ledger_schema', {schema_name}, true);
DO $ledger$
BEGIN
  IF to_regnamespace(quote_ident(current_setting('awa_operations.ledger_schema'))) IS NULL THEN
    EXECUTE format('CREATE SCHEMA %I', current_setting('awa_operations.ledger_schema'));
  END IF;
END
$ledger$;
CREATE TABLE IF NOT EXISTS {table} (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    queue text NOT NULL,
    physical_queues text[] NOT NULL,
    stripes integer NOT NULL,
    from_shards jsonb NOT NULL,
    to_shards smallint NOT NULL,
    lanes_created integer NOT NULL,
    grants_added integer NOT NULL,
    runtime_roles text[] NOT NULL,
    live_runtime_ids uuid[] NOT NULL,
    reason text,
    changed_by text NOT NULL DEFAULT current_user,
    login_user text NOT NULL DEFAULT session_user,
    client_addr inet DEFAULT inet_client_addr(),
    application_name text DEFAULT current_setting('application_name'),
    transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX IF NOT EXISTS {index} ON {table} USING gin (physical_queues);
COMMENT ON TABLE {table} IS 'awa.operations: every enqueue_shards change (awa_enqueue_shards module)';
"""


def ledger_ddl(schema: str) -> sql.Composed:
    return sql.SQL(LEDGER_DDL).format(
        lock_key=sql.Literal(CREATE_LOCK_KEY), schema_name=sql.Literal(schema),
        table=sql.Identifier(schema, TABLE), index=sql.Identifier(f"{TABLE}_physical_queues_idx"))


INSERT_SQL = """
INSERT INTO {table} (queue, physical_queues, stripes, from_shards, to_shards, lanes_created, grants_added,
                     runtime_roles, live_runtime_ids, reason)
SELECT %(queue)s::text, %(physical_queues)s::text[], %(stripes)s::int, %(from_shards)s::jsonb,
       %(to_shards)s::smallint, %(lanes_created)s::int, %(grants_added)s::int, %(runtime_roles)s::text[],
       ARRAY(SELECT ri.instance_id FROM awa.runtime_instances AS ri WHERE {live} ORDER BY ri.instance_id),
       %(reason)s::text
RETURNING id, changed_at, cardinality(live_runtime_ids)
"""


def ledger_insert(schema: str) -> sql.Composed:
    return sql.SQL(INSERT_SQL).format(table=sql.Identifier(schema, TABLE), live=sql.SQL(LIVE_RUNTIME_PREDICATE))


@dataclass(frozen=True)
class RecordedChange:
    """The latest recorded switch of one physical queue's shard count."""

    id: int
    physical_queue: str
    changed_at: object  # datetime (database clock)
    from_shards: int
    to_shards: int
    live_runtime_ids: frozenset
    changed_by: str
    reason: str | None


LATEST_SQL = """
SELECT DISTINCT ON (pq) c.id, pq, c.changed_at, (c.from_shards ->> pq)::int, c.to_shards,
       c.live_runtime_ids::text[], c.changed_by, c.reason
FROM {table} AS c, unnest(c.physical_queues) AS pq
WHERE c.physical_queues && %(queues)s::text[] AND pq = ANY(%(queues)s)
  AND (c.from_shards ->> pq)::int IS DISTINCT FROM c.to_shards
ORDER BY pq, c.id DESC
"""


def fetch_latest_changes(conn, schema: str, physical_queues: list[str]) -> dict[str, RecordedChange]:
    """physical queue -> its latest recorded shard-count switch (queues never switched are absent)."""
    rows = conn.execute(sql.SQL(LATEST_SQL).format(table=sql.Identifier(schema, TABLE)),
                        {"queues": physical_queues}).fetchall()
    return {row[1]: RecordedChange(row[0], row[1], row[2], row[3], row[4], frozenset(row[5]), row[6], row[7])
            for row in rows}
