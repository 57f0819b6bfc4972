# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lanes of physical queues: their counts, the health of every lane's objects, and their ready depths.

Part of the schema package, the reads of Awa's schema that the change and the read both make (installation.py says
how they behave). A lane's ready depth and lag are the exact count Awa uses, never the stale next_seq - claim_seq
columns (docs/awa-internals.md §9 has the count); reading a lane's cursors locks its two sequences until the
transaction ends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection, Cursor, schema_sql
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import PRIORITIES


# awa.queue_meta and the control plane always live in schema "awa"; lanes live in the
# queue-storage schema (docs/awa-internals.md §2).
LANE_PRIVILEGES = ("USAGE", "SELECT", "UPDATE")


@dataclass
class LaneState:
    """One lane (queue, priority, shard) and the health of its objects."""

    queue: str
    priority: int
    shard: int
    has_lane_row: bool
    has_enqueue_head: bool
    has_claim_head: bool
    enqueue_seq: str
    claim_seq: str
    has_enqueue_seq: bool
    has_claim_seq: bool
    head_names_ok: bool
    enqueue_seq_owner: str | None
    claim_seq_owner: str | None
    # (role, privilege, sequence) the runtime roles lack.
    missing_privileges: list[tuple[str, str, str]]
    # Whether the connected role may GRANT on both sequences (owner or member of the owner).
    grantable: bool

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.queue, self.priority, self.shard)

    @property
    def complete(self) -> bool:
        return (self.has_lane_row and self.has_enqueue_head and self.has_claim_head
                and self.has_enqueue_seq and self.has_claim_seq and self.head_names_ok)


@dataclass
class QueueState:
    """Shard counts (queue_meta) and every relevant lane of some physical queues."""

    enqueue_shards: dict[str, int]
    lanes: list[LaneState]
    # Physical queues paused with `awa queue pause` (their workers claim nothing).
    paused: frozenset[str] = frozenset()

    def lanes_of(self, queue: str) -> list[LaneState]:
        return self._lanes_by_queue.get(queue, [])

    @cached_property
    def _lanes_by_queue(self) -> dict[str, list[LaneState]]:
        # Grouped once: a read of a hundred queues looks up each queue's lanes, not every lane for each queue.
        grouped: dict[str, list[LaneState]] = {}
        for lane in self.lanes:
            grouped.setdefault(lane.queue, []).append(lane)
        return grouped


LANE_STATE_SQL = """
WITH schema_oid AS (
    SELECT oid FROM pg_namespace WHERE nspname = %(schema)s
), enqueue_heads AS MATERIALIZED (
    SELECT queue, priority, enqueue_shard, seq_name FROM {queue_enqueue_heads} WHERE queue = ANY(%(queues)s)
), claim_heads AS MATERIALIZED (
    SELECT queue, priority, enqueue_shard, seq_name FROM {queue_claim_heads} WHERE queue = ANY(%(queues)s)
), lanes AS (
    SELECT q.queue, p::smallint AS priority, s::smallint AS enqueue_shard
    FROM unnest(%(queues)s::text[], %(shards)s::int[]) AS q(queue, shards), unnest(%(priorities)s::int[]) AS p,
         generate_series(0, q.shards - 1) AS s
    UNION SELECT queue, priority, enqueue_shard FROM enqueue_heads
    UNION SELECT queue, priority, enqueue_shard FROM claim_heads
), named AS MATERIALIZED (
    -- Awa's own name function, called once per lane and sequence.
    SELECT l.*,
           {queue_lane_sequence_name}('queue_enqueue_seq', l.queue, l.priority, l.enqueue_shard) AS enqueue_seq,
           {queue_lane_sequence_name}('queue_claim_seq', l.queue, l.priority, l.enqueue_shard) AS claim_seq
    FROM lanes AS l
), resolved AS (
    SELECT n.*,
           (ql.queue IS NOT NULL) AS has_lane_row,
           (eh.queue IS NOT NULL) AS has_enqueue_head,
           (ch.queue IS NOT NULL) AS has_claim_head,
           (eh.seq_name IS NOT DISTINCT FROM n.enqueue_seq OR eh.queue IS NULL)
             AND (ch.seq_name IS NOT DISTINCT FROM n.claim_seq OR ch.queue IS NULL) AS head_names_ok,
           es.oid AS enqueue_oid, cs.oid AS claim_oid, es.relowner AS enqueue_owner, cs.relowner AS claim_owner
    FROM named AS n
    LEFT JOIN (SELECT queue, priority FROM {queue_lanes} WHERE queue = ANY(%(queues)s)) AS ql
           ON ql.queue = n.queue AND ql.priority = n.priority
    LEFT JOIN enqueue_heads AS eh
           ON eh.queue = n.queue AND eh.priority = n.priority AND eh.enqueue_shard = n.enqueue_shard
    LEFT JOIN claim_heads AS ch
           ON ch.queue = n.queue AND ch.priority = n.priority AND ch.enqueue_shard = n.enqueue_shard
    -- One index lookup per sequence (OFFSET 0 keeps it a lookup): never a scan of every sequence in the schema.
    LEFT JOIN LATERAL (SELECT c.oid, c.relowner FROM pg_class AS c
                       WHERE c.relname = n.enqueue_seq AND c.relnamespace = (SELECT oid FROM schema_oid)
                       OFFSET 0) AS es ON true
    LEFT JOIN LATERAL (SELECT c.oid, c.relowner FROM pg_class AS c
                       WHERE c.relname = n.claim_seq AND c.relnamespace = (SELECT oid FROM schema_oid)
                       OFFSET 0) AS cs ON true
)
SELECT queue, priority, enqueue_shard, has_lane_row, has_enqueue_head, has_claim_head,
       enqueue_seq, claim_seq, enqueue_oid IS NOT NULL, claim_oid IS NOT NULL, head_names_ok,
       pg_get_userbyid(enqueue_owner), pg_get_userbyid(claim_owner),
       ARRAY(SELECT ARRAY[r, priv, seq.name]
             FROM unnest(%(roles)s::text[]) AS r, unnest(%(privileges)s::text[]) AS priv,
                  (VALUES (enqueue_oid, enqueue_seq), (claim_oid, claim_seq)) AS seq(oid, name)
             WHERE seq.oid IS NOT NULL AND NOT has_sequence_privilege(r, seq.oid, priv)
             ORDER BY r, seq.name, priv),
       (enqueue_oid IS NULL OR pg_has_role(enqueue_owner, 'USAGE'))
         AND (claim_oid IS NULL OR pg_has_role(claim_owner, 'USAGE'))
FROM resolved
ORDER BY queue, priority, enqueue_shard
"""

META_SQL = """
SELECT q, m.enqueue_shards, COALESCE(m.paused, false)
FROM unnest(%(queues)s::text[]) AS q LEFT JOIN awa.queue_meta AS m ON m.queue = q
"""


def fetch_queue_counts(conn: Connection, queues: list[str], sent: Cursor | None = None) -> QueueState:
    """The queue_meta rows of ``queues`` alone - each one's count, and which are paused - without their lanes; read
    from ``sent`` when META_SQL was sent already.

    One statement, whatever the number of queues.
    """
    meta = (sent or conn.execute(META_SQL, {"queues": list(queues)})).fetchall()
    # No row means 1 (Awa's readers COALESCE it).
    return QueueState(enqueue_shards={queue: (value or 1) for queue, value, dummy in meta}, lanes=[],
                      paused=frozenset(queue for queue, dummy, paused in meta if paused))


def fetch_queue_state(conn: Connection, schema: str, queues: list[str], roles: Sequence[str],
                      shards: Mapping[str, int] | None = None) -> QueueState:
    """queue_meta rows and lanes of ``queues``: lanes 1..4 x [0, S) plus every existing lane, S each queue's count
    in ``shards`` (the counts planned) or else its current one. Two statements, whatever the number of queues and
    lanes (``send_queue_state`` sends them without reading)."""
    return send_queue_state(conn, schema, queues, roles, shards)()


def send_queue_state(conn: Connection, schema: str, queues: list[str], roles: Sequence[str],
                     shards: Mapping[str, int] | None = None) -> Callable[[], QueueState]:
    """``fetch_queue_state``'s statements sent now, their rows read when the returned function is called (on a
    connection in pipeline mode, in the same round trip as what was sent before); without ``shards`` the current
    counts are read first."""
    meta = conn.execute(META_SQL, {"queues": list(queues)})
    current: QueueState | None = None
    if shards is None:
        current = fetch_queue_counts(conn, queues, meta)
        shards = current.enqueue_shards
    lanes = conn.execute(schema_sql(schema, LANE_STATE_SQL), {
        "queues": list(queues), "shards": [shards[queue] for queue in queues], "priorities": list(PRIORITIES),
        "schema": schema, "roles": list(roles), "privileges": list(LANE_PRIVILEGES)})

    def read() -> QueueState:
        # LANE_STATE_SQL's rows: LaneState's fields in its column order.
        rows = [(*row[:13], [tuple(triple) for triple in row[13]], row[14]) for row in lanes.fetchall()]
        return replace(current or fetch_queue_counts(conn, queues, meta), lanes=[LaneState(*row) for row in rows])
    return read


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
FROM {queue_enqueue_heads} AS h
JOIN {queue_claim_heads} AS c USING (queue, priority, enqueue_shard)
""" + LANE_READABLE_JOINS + """LEFT JOIN LATERAL (
    SELECT {sequence_next_value}(h.seq_name) AS enqueue_next, {sequence_next_value}(c.seq_name) AS claim_next
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
    rows = conn.execute(schema_sql(schema, LANE_DEPTH_SQL), {"schema": schema, "queues": list(queues)}).fetchall()
    return [LaneDepth(*row) for row in rows]
