# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The change ledger's latest switch of each physical queue's count (``apply`` writes the ledger).

Part of the introspect package, the only SQL that reads (installation.py says how its reads behave).
"""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.module_utils.connection import sql
from ansible_collections.awa.operations.plugins.module_utils.ledger import TABLE as LEDGER_TABLE
from ansible_collections.awa.operations.plugins.module_utils.ledger import RecordedChange


LATEST_CHANGES_SQL = """
SELECT DISTINCT ON (pq) c.id, pq, c.changed_at, (c.from_shards ->> pq)::int, c.to_shards,
       c.live_runtime_ids::text[], c.changed_by, c.reason
FROM {table} AS c, unnest(c.physical_queues) AS pq
WHERE c.physical_queues && %(queues)s::text[] AND pq = ANY(%(queues)s)
  AND (c.from_shards ->> pq)::int IS DISTINCT FROM c.to_shards
ORDER BY pq, c.id DESC
"""


def fetch_latest_changes(conn, ledger_schema: str, physical_queues: list[str]) -> dict[str, RecordedChange]:
    """physical queue -> its latest recorded shard-count switch (queues never switched are absent)."""
    rows = conn.execute(sql.SQL(LATEST_CHANGES_SQL).format(table=sql.Identifier(ledger_schema, LEDGER_TABLE)),
                        {"queues": physical_queues}).fetchall()
    return {row[1]: RecordedChange(row[0], row[1], row[2], row[3], row[4], frozenset(row[5]), row[6], row[7])
            for row in rows}
