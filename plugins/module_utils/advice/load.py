# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reads of a load window (``load_window.watch``): the lanes' lock keys and cursors, and what backends wait on.

Part of the introspect package, the only SQL that reads (installation.py says
how its reads behave). Each is one statement, whatever the number of lanes.
"""

from __future__ import annotations

from typing import Optional

from ansible_collections.awa.operations.plugins.module_utils.advice import contention
from ansible_collections.awa.operations.plugins.module_utils.db.connection import sql
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.depths import LANE_READABLE_JOINS

# One row per client backend of the database: (state, wait type, wait event, locktype, database, classid, objid,
# query, application name) - contention.classify reads the first eight; benchmarks name roles by the ninth.
ACTIVITY_SAMPLE_SQL = """
SELECT a.state, a.wait_event_type, a.wait_event, l.locktype, l.database::int8, l.classid::int8, l.objid::int8,
       left(a.query, 200), a.application_name
FROM pg_stat_activity AS a
LEFT JOIN pg_locks AS l ON l.pid = a.pid AND NOT l.granted
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
  -- Other roles' backends show a NULL backend_type (and state) without pg_read_all_stats: keep them, hidden.
  AND coalesce(a.backend_type, 'client backend') = 'client backend'
"""

# Both lock keys of every lane (contention.py): reserve_enqueue_seq's, on the qualified name of the lane's
# enqueue sequence, and the Rust producers', on 'awa:<queue>:<priority>:<shard>'. As pg_locks shows a
# bigint advisory key: classid = high 32 bits, objid = low 32 bits.
LANE_LOCK_KEYS_SQL = """
SELECT k.kind, h.queue, h.priority, h.enqueue_shard, (k.key >> 32) & 4294967295, k.key & 4294967295
FROM {enqueue_heads} AS h
CROSS JOIN LATERAL (VALUES
    (%(reservation)s, hashtextextended(format('%%I.%%I', %(schema)s::text, h.seq_name), 0)),
    (%(insert)s, hashtextextended(format('awa:%%s:%%s:%%s', h.queue, h.priority, h.enqueue_shard), 0))
) AS k (kind, key)
WHERE h.queue = ANY(%(queues)s)
"""

# Every lane's two cursors (the next sequence values); NULL where this role may not read a sequence.
LANE_CURSORS_SQL = """
SELECT h.queue, h.priority, h.enqueue_shard,
       CASE WHEN seqs.readable THEN {next_value}(h.seq_name) END,
       CASE WHEN seqs.readable THEN {next_value}(c.seq_name) END
FROM {enqueue_heads} AS h
JOIN {claim_heads} AS c USING (queue, priority, enqueue_shard)
""" + LANE_READABLE_JOINS + """WHERE h.queue = ANY(%(queues)s)
"""

Cursors = dict[contention.Lane, tuple[Optional[int], Optional[int]]]  # lane -> (enqueue next, claim next)


def _identifiers(schema: str) -> dict:
    return {"enqueue_heads": sql.Identifier(schema, "queue_enqueue_heads"),
            "claim_heads": sql.Identifier(schema, "queue_claim_heads"),
            "next_value": sql.Identifier(schema, "sequence_next_value")}


def fetch_activity_sample(conn) -> list[tuple]:
    """Every other client backend of the database now: what it runs and waits on (ACTIVITY_SAMPLE_SQL's rows)."""
    return conn.execute(ACTIVITY_SAMPLE_SQL).fetchall()


def fetch_lane_keys(conn, schema: str, queues: list[str]) -> contention.LaneKeys:
    """The advisory-lock keys of every lane of ``queues``, as pg_locks shows them."""
    rows = conn.execute(sql.SQL(LANE_LOCK_KEYS_SQL).format(**_identifiers(schema)),
                        {"schema": schema, "queues": queues, "reservation": contention.RESERVATION,
                         "insert": contention.INSERT}).fetchall()
    return {(classid, objid): (kind, (queue, priority, shard)) for kind, queue, priority, shard, classid, objid in rows}


def fetch_cursors(conn, schema: str, queues: list[str]) -> Cursors:
    """Both cursors of every lane of ``queues``; (None, None) where this role may not read the sequences."""
    rows = conn.execute(sql.SQL(LANE_CURSORS_SQL).format(**_identifiers(schema)),
                        {"schema": schema, "queues": queues}).fetchall()
    return {(queue, priority, shard): (enqueue_next, claim_next) for queue, priority, shard, enqueue_next, claim_next in rows}
