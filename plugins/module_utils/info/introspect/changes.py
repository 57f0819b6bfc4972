# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The change ledger: the latest switch of each physical queue's count, and a change looked up by its id
(``apply`` writes the ledger).

Part of the introspect package, the reads more than one step makes (installation.py says how they behave).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.awa.operations.plugins.module_utils.db.connection import one_row, sql
from ansible_collections.awa.operations.plugins.module_utils.ledger import TABLE as LEDGER_TABLE
from ansible_collections.awa.operations.plugins.module_utils.ledger import RecordedChange

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection


LATEST_CHANGES_SQL = """
SELECT DISTINCT ON (pq) c.id, pq, c.changed_at, (c.from_shards ->> pq)::int, c.to_shards,
       c.live_runtime_ids::text[], c.changed_by, c.reason
FROM {table} AS c, unnest(c.physical_queues) AS pq
WHERE c.physical_queues && %(queues)s::text[] AND pq = ANY(%(queues)s)
  AND (c.from_shards ->> pq)::int IS DISTINCT FROM c.to_shards
ORDER BY pq, c.id DESC
"""


def fetch_latest_changes(conn: Connection, ledger_schema: str, physical_queues: list[str]) -> dict[str, RecordedChange]:
    """physical queue -> its latest recorded shard-count switch (queues never switched are absent)."""
    rows = conn.execute(sql.SQL(LATEST_CHANGES_SQL).format(table=sql.Identifier(ledger_schema, LEDGER_TABLE)),
                        {"queues": physical_queues}).fetchall()
    return {row[1]: RecordedChange(row[0], row[1], row[2], row[3], row[4], frozenset(row[5]), row[6], row[7])
            for row in rows}


# A ledger row by the change id the client gave it, or by the transaction that wrote it. The table and the
# column are looked up first: a failover target (or a lost first change) may have neither.
LEDGER_COLUMN_SQL = """
SELECT EXISTS (SELECT 1 FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
               JOIN pg_namespace AS n ON n.oid = c.relnamespace
               WHERE n.nspname = %(schema)s AND c.relname = %(table)s AND a.attname = %(column)s AND NOT a.attisdropped)
"""
RECORDED_CHANGE_SQL = "SELECT id, changed_at, cardinality(live_runtime_ids) FROM {table} WHERE {column} = CAST(%(value)s AS {type})"
LEDGER_LOOKUP_TYPES = {"change_id": "uuid", "transaction_id": "xid8"}


def fetch_recorded_change(conn: Connection, ledger_schema: str, column: str, value: str) -> tuple[Any, ...] | None:
    """(id, changed_at, live runtimes) of the ledger row whose ``column`` (change_id or transaction_id) is ``value``."""
    if not one_row(conn.execute(LEDGER_COLUMN_SQL, {"schema": ledger_schema, "table": LEDGER_TABLE,
                                                    "column": column}))[0]:
        return None
    return conn.execute(sql.SQL(RECORDED_CHANGE_SQL).format(
        table=sql.Identifier(ledger_schema, LEDGER_TABLE), column=sql.Identifier(column),
        type=sql.SQL(LEDGER_LOOKUP_TYPES[column])), {"value": value}).fetchone()
