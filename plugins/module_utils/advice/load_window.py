# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Watch the load on queues for a window: lane cursors at both ends, and what the backends wait on.

Round trips do not grow with the lanes: one statement for the lock keys of
every lane of the queues, one for every lane's cursors at each end of the
window, and one per sample (every ``interval`` seconds) of pg_stat_activity
joined to the lock each backend waits for. Only the window reads these, so
they live here rather than in ``schema``.
Each read is its own READ ONLY transaction, because PostgreSQL keeps one
statistics snapshot per transaction: a sample in a new transaction sees the
backends as they are now.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ansible_collections.awa.operations.plugins.module_utils.advice import contention
from ansible_collections.awa.operations.plugins.module_utils.db.connection import sql, transaction
from ansible_collections.awa.operations.plugins.module_utils.errors import PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.schema.lanes import LANE_READABLE_JOINS
from ansible_collections.awa.operations.plugins.module_utils.schema.installation import fetch_queue_storage_schema

if TYPE_CHECKING:
    from typing import TypeAlias

    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection, Row

T = TypeVar("T")

SAMPLE_INTERVAL = 0.025

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
# enqueue sequence, and the Rust producers', on 'awa:<queue>:<priority>:<shard>' (bigint keys, which pg_locks
# shows split: contention.split_key).
LANE_LOCK_KEYS_SQL = """
SELECT k.kind, h.queue, h.priority, h.enqueue_shard, k.key
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

# An alias in quotes, its kind for the type checker only: evaluated, it would need Python 3.9 (3.8 sanity).
Cursors: TypeAlias = "dict[contention.Lane, tuple[int | None, int | None]]"  # lane -> (enqueue next, claim next)


def _identifiers(schema: str) -> dict[str, sql.Identifier]:
    return {"enqueue_heads": sql.Identifier(schema, "queue_enqueue_heads"),
            "claim_heads": sql.Identifier(schema, "queue_claim_heads"),
            "next_value": sql.Identifier(schema, "sequence_next_value")}


def fetch_activity_sample(conn: Connection) -> list[Row]:
    """Every other client backend of the database now: what it runs and waits on (ACTIVITY_SAMPLE_SQL's rows)."""
    return conn.execute(ACTIVITY_SAMPLE_SQL).fetchall()


def fetch_lane_keys(conn: Connection, schema: str, queues: list[str]) -> contention.LaneKeys:
    """The advisory-lock keys of every lane of ``queues``, as pg_locks shows them."""
    rows = conn.execute(sql.SQL(LANE_LOCK_KEYS_SQL).format(**_identifiers(schema)),
                        {"schema": schema, "queues": queues, "reservation": contention.RESERVATION,
                         "insert": contention.INSERT}).fetchall()
    return {contention.split_key(key): (kind, (queue, priority, shard)) for kind, queue, priority, shard, key in rows}


def fetch_cursors(conn: Connection, schema: str, queues: list[str]) -> Cursors:
    """Both cursors of every lane of ``queues``; (None, None) where this role may not read the sequences."""
    rows = conn.execute(sql.SQL(LANE_CURSORS_SQL).format(**_identifiers(schema)),
                        {"schema": schema, "queues": queues}).fetchall()
    return {(queue, priority, shard): (enqueue_next, claim_next) for queue, priority, shard, enqueue_next, claim_next in rows}


@dataclass(frozen=True)
class LoadWindow:
    """What one window of ``seconds`` saw."""

    seconds: float
    tally: contention.ContentionTally
    cursors_before: Cursors
    cursors_after: Cursors


def watch(conn: Connection, queues: list[str], seconds: float, lock_timeout: float, interval: float = SAMPLE_INTERVAL) -> LoadWindow:
    """Sample the backends every ``interval`` seconds for ``seconds``, between two reads of the lanes' cursors."""
    def read(action: str, reader: Callable[[], T]) -> T:
        with transaction(conn, action, lock_timeout=lock_timeout, read_only=True):
            return reader()

    # The info module's read has checked that queue storage is active: this names its schema.
    schema = read("reading the queue storage schema", lambda: fetch_queue_storage_schema(conn))
    if schema is None:
        # Switched to another engine since that read (the event source watches window after window).
        raise PreconditionFailed("The queue-storage engine is no longer active, so its lanes' load cannot be watched.")
    # Reading a lane's cursors locks its sequences until the transaction ends: the reads are short transactions.
    lane_keys = read("reading the lane lock keys", lambda: fetch_lane_keys(conn, schema, queues))
    before = read("reading the lane cursors", lambda: fetch_cursors(conn, schema, queues))
    started = time.monotonic()
    tally, next_at = contention.ContentionTally(), started
    while time.monotonic() - started < seconds:
        rows = read("sampling pg_stat_activity", lambda: fetch_activity_sample(conn))
        tally.add([contention.classify(row, lane_keys) for row in rows])
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    after = read("reading the lane cursors", lambda: fetch_cursors(conn, schema, queues))
    return LoadWindow(round(time.monotonic() - started, 3), tally, before, after)
