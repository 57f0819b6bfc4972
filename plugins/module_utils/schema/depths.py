# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ready depth and lag per lane: the exact count Awa uses, never the stale next_seq - claim_seq columns.

Part of the schema package, the reads of Awa's schema that the change and the read both make
(installation.py says how they behave). docs/awa-internals.md §9 has the count; reading a
lane's cursors locks its two sequences until the transaction ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ansible_collections.awa.operations.plugins.module_utils.db.connection import sql

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection


@dataclass(frozen=True)
class LaneDepth:
    queue: str
    priority: int
    shard: int
    readable: bool
    seq_lag: int | None
    ready_depth: int | None
    oldest_ready_age_seconds: float | None
    # The lane's next enqueue sequence value: it grows by one for each job enqueued on the lane.
    enqueue_cursor: int | None = None


# Whether this role may read both sequences of the lane joined as h (enqueue head) and c (claim head): seqs.readable.
LANE_READABLE_JOINS = """
CROSS JOIN LATERAL (
    SELECT to_regclass(quote_ident(%(schema)s) || '.' || quote_ident(h.seq_name)) AS enqueue_oid,
           to_regclass(quote_ident(%(schema)s) || '.' || quote_ident(c.seq_name)) AS claim_oid
) AS oids
CROSS JOIN LATERAL (
    SELECT oids.enqueue_oid IS NOT NULL AND oids.claim_oid IS NOT NULL
           AND has_sequence_privilege(oids.enqueue_oid, 'SELECT')
           AND has_sequence_privilege(oids.claim_oid, 'SELECT') AS readable
) AS seqs
"""

LANE_DEPTH_SQL = """
SELECT h.queue, h.priority, h.enqueue_shard, seqs.readable,
       cursor.enqueue_next - cursor.claim_next,
       CASE WHEN NOT seqs.readable THEN NULL
            WHEN cursor.enqueue_next <= cursor.claim_next THEN 0
            ELSE ready.depth END,
       CASE WHEN seqs.readable AND cursor.enqueue_next > cursor.claim_next
            THEN greatest(0, extract(epoch FROM now() - ready.oldest_run_at))::float8 END,
       cursor.enqueue_next
FROM {enqueue_heads} AS h
JOIN {claim_heads} AS c USING (queue, priority, enqueue_shard)
""" + LANE_READABLE_JOINS + """LEFT JOIN LATERAL (
    SELECT {next_value}(h.seq_name) AS enqueue_next, {next_value}(c.seq_name) AS claim_next
    WHERE seqs.readable
) AS cursor ON true
LEFT JOIN LATERAL (
    -- Only lanes whose enqueue cursor is ahead of the claim cursor can hold ready rows.
    SELECT count(*) AS depth, min(r.run_at) AS oldest_run_at
    FROM {ready_entries} AS r
    WHERE r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
      AND r.lane_seq >= cursor.claim_next
      AND NOT EXISTS (SELECT 1 FROM {ready_tombstones} AS t
                      WHERE t.queue = r.queue AND t.priority = r.priority AND t.enqueue_shard = r.enqueue_shard
                        AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot
                        AND t.ready_generation = r.ready_generation)
) AS ready ON seqs.readable AND cursor.enqueue_next > cursor.claim_next
WHERE h.queue = ANY(%(queues)s)
ORDER BY h.queue, h.priority, h.enqueue_shard
"""


def fetch_lane_depths(conn: Connection, schema: str, queues: list[str]) -> list[LaneDepth]:
    """Exact ready depth, sequence lag and oldest ready age of every lane of ``queues``.

    Lanes whose sequences the connected role cannot read are reported with
    ``readable=False`` and no numbers instead of failing the whole read.
    """
    rows = conn.execute(sql.SQL(LANE_DEPTH_SQL).format(
        enqueue_heads=sql.Identifier(schema, "queue_enqueue_heads"),
        claim_heads=sql.Identifier(schema, "queue_claim_heads"),
        ready_entries=sql.Identifier(schema, "ready_entries"),
        ready_tombstones=sql.Identifier(schema, "ready_tombstones"),
        next_value=sql.Identifier(schema, "sequence_next_value"),
    ), {"schema": schema, "queues": list(queues)}).fetchall()
    return [LaneDepth(*row) for row in rows]
