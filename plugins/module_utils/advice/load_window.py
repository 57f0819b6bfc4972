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

What the backends wait on is read from the samples by pure functions
(``classify``, ``ContentionTally``).

A sample row is one client backend: its state, wait event, the lock it waits
for (if any) and the start of its statement. The locks that matter for a
shard count (docs/awa-internals.md, shard choice):

* a lane's reservation lock: the advisory lock ``reserve_enqueue_seq`` takes on
  ``hashtextextended('awa.<lane sequence>', 0)`` and holds until commit, so
  every enqueue into one lane waits for the one before it to commit;
* a lane's insert lock: the advisory lock Awa's Rust producers take on
  ``hashtextextended('awa:<queue>:<priority>:<shard>', 0)``, also until commit
  (``enqueue_many_copy`` takes it on every call);
* the NOTIFY commit lock: PostgreSQL's ``PreCommit_Notify`` locks the shared
  object pg_database/0, so every committing transaction that notified waits
  for the one before it, whatever the shard count;
* the WAL: waits to write or flush it at commit, whatever the shard count.

pg_locks shows a bigint advisory key as classid (high 32 bits) and objid (low
32 bits). pg_stat_activity shows other roles' wait events and statements only
to members of pg_read_all_stats (pg_monitor); without it they read as hidden.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ansible_collections.awa.operations.plugins.module_utils.db.connection import schema_sql, transaction
from ansible_collections.awa.operations.plugins.module_utils.errors import PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.schema.lanes import LANE_READABLE_JOINS
from ansible_collections.awa.operations.plugins.module_utils.schema.installation import fetch_queue_storage_schema

if TYPE_CHECKING:
    from typing import TypeAlias

    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection, Row

PG_DATABASE_OID = 1262
RESERVATION, INSERT, NOTIFY = "lane reservation", "lane insert", "notify"
# Wait events of writing and flushing the WAL at commit (PostgreSQL 17 and 18 spellings).
WAL_WAITS = frozenset({"IO:WalSync", "IO:WalWrite", "IO:WALSync", "IO:WALWrite", "LWLock:WALWrite",
                       "LWLock:WALInsert"})
HIDDEN = "hidden"
# What a backend's statement is, by a fragment of its text (the first that matches). The SQL path is one
# call of insert_job_compat; Awa's Rust producers (enqueue_many_copy) run a transaction of several statements:
# the lane insert lock, the lane reservation, then COPY into ready_entries.
STATEMENT_KINDS = (("insert_job_compat", "insert"), ("pg_advisory_xact_lock(hashtextextended", "copy"),
                   ("reserve_enqueue_seq", "copy"), ("copy awa.", "copy"), ("claim_ready", "claim"))
ENQUEUE_STATEMENTS = frozenset({"insert", "copy"})

# An alias in quotes, its kind for the type checker only: evaluated, it would need Python 3.9 (3.8 sanity).
Lane: TypeAlias = "tuple[str, int, int]"  # (physical queue, priority, shard)
LaneKeys: TypeAlias = "dict[tuple[int, int], tuple[str, Lane]]"  # (classid, objid) -> (lock kind, lane)


@dataclass(frozen=True)
class BackendSample:
    """One backend in one sample."""

    wait: str  # "CPU", "<type>:<event>", "idle in transaction", "idle" or HIDDEN
    lock: str | None = None  # RESERVATION, INSERT, NOTIFY, "advisory", another lock type, or None
    lane: Lane | None = None
    statement: str | None = None  # "insert", "copy", "claim", "other", or None (hidden)


def split_key(key: int) -> tuple[int, int]:
    """A bigint advisory key as pg_locks shows it: (classid, objid)."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    return unsigned >> 32, unsigned & 0xFFFFFFFF


def wait_label(state: str | None, wait_event_type: str | None, wait_event: str | None) -> str:
    """What an active backend waits on ("CPU" when on nothing), its state otherwise; HIDDEN without a state.

    pg_stat_activity hides the state of other roles' backends from roles without pg_read_all_stats.
    """
    if state is None:
        return HIDDEN
    if state == "active":
        return f"{wait_event_type}:{wait_event}" if wait_event_type else "CPU"
    return "idle in transaction" if state.startswith("idle in transaction") else "idle"


def lock_kind(locktype: str | None, database: int | None, classid: int | None, objid: int | None,
              lane_keys: LaneKeys) -> tuple[str | None, Lane | None]:
    """The lock a backend waits for, named, and the lane it belongs to (if it is a lane's)."""
    if locktype == "advisory":
        found = lane_keys.get((classid, objid)) if classid is not None and objid is not None else None
        return found if found is not None else ("advisory", None)
    if locktype == "object" and database == 0 and classid == PG_DATABASE_OID and objid == 0:
        return NOTIFY, None
    return locktype, None


def classify(row: tuple[Any, ...], lane_keys: LaneKeys) -> BackendSample:
    """One sample row: (state, wait type, wait event, locktype, database, classid, objid, query)."""
    state, wait_type, wait_event, locktype, database, classid, objid, query = row[:8]
    lock, lane = lock_kind(locktype, database, classid, objid, lane_keys)
    # No statement (None) where another role's is hidden from this one.
    text = None if query is None or query.startswith("<insufficient privilege>") else query.lower()
    statement = None if text is None else next((kind for part, kind in STATEMENT_KINDS if part in text), "other")
    return BackendSample(wait_label(state, wait_type, wait_event), lock, lane, statement)


@dataclass
class ContentionTally:
    """What the samples of a window add up to, per physical queue and for the whole database."""

    samples: int = 0
    lane_waiters: Counter[str] = field(default_factory=Counter)  # physical queue -> backend-samples waiting on its lanes
    lane_statements: dict[str, Counter[str]] = field(default_factory=dict)  # physical queue -> Counter of the waiting statements
    notify_waiters: int = 0
    wal_waiters: int = 0
    enqueuers_on_cpu: int = 0  # active enqueue statements waiting on nothing
    enqueuers_active: int = 0  # backend-samples in an enqueue statement (waiting or not)
    enqueue_statements: Counter[str] = field(default_factory=Counter)  # "insert" / "copy" -> backend-samples
    peak_enqueuers: int = 0  # the most backends in an enqueue statement in one sample
    hidden: int = 0  # backend-samples whose state this role may not see

    def add(self, backends: list[BackendSample]) -> None:
        self.samples += 1
        self.hidden += sum(backend.wait == HIDDEN for backend in backends)
        self.notify_waiters += sum(backend.lock == NOTIFY for backend in backends)
        self.wal_waiters += sum(backend.wait in WAL_WAITS for backend in backends)
        for backend in backends:
            if backend.lane is not None:
                self.lane_waiters[backend.lane[0]] += 1
                self.lane_statements.setdefault(backend.lane[0], Counter())[backend.statement or HIDDEN] += 1
        enqueuers = [backend for backend in backends
                     if backend.statement in ENQUEUE_STATEMENTS and backend.wait != "idle"]
        self.enqueue_statements.update(str(backend.statement) for backend in enqueuers)
        self.enqueuers_on_cpu += sum(backend.wait == "CPU" for backend in enqueuers)
        self.enqueuers_active += len(enqueuers)
        self.peak_enqueuers = max(self.peak_enqueuers, len(enqueuers))

    def per_sample(self, count: int) -> float:
        """A count of backend-samples as backends per sample."""
        return round(count / self.samples, 3) if self.samples else 0.0


T = TypeVar("T")

SAMPLE_INTERVAL = 0.025

# One row per client backend of the database: (state, wait type, wait event, locktype, database, classid, objid,
# query, application name) - classify reads the first eight; benchmarks name roles by the ninth.
ACTIVITY_SAMPLE_SQL = """
SELECT a.state, a.wait_event_type, a.wait_event, l.locktype, l.database::int8, l.classid::int8, l.objid::int8,
       left(a.query, 200), a.application_name
FROM pg_stat_activity AS a
LEFT JOIN pg_locks AS l ON l.pid = a.pid AND NOT l.granted
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
  -- Other roles' backends show a NULL backend_type (and state) without pg_read_all_stats: keep them, hidden.
  AND coalesce(a.backend_type, 'client backend') = 'client backend'
"""

# Both lock keys of every lane (RESERVATION, INSERT): reserve_enqueue_seq's, on the qualified name of the lane's
# enqueue sequence, and the Rust producers', on 'awa:<queue>:<priority>:<shard>' (bigint keys, which pg_locks
# shows split: split_key).
LANE_LOCK_KEYS_SQL = """
SELECT k.kind, h.queue, h.priority, h.enqueue_shard, k.key
FROM {queue_enqueue_heads} AS h
CROSS JOIN LATERAL (VALUES
    (%(reservation)s, hashtextextended(format('%%I.%%I', %(schema)s::text, h.seq_name), 0)),
    (%(insert)s, hashtextextended(format('awa:%%s:%%s:%%s', h.queue, h.priority, h.enqueue_shard), 0))
) AS k (kind, key)
WHERE h.queue = ANY(%(queues)s)
"""

# Every lane's two cursors (the next sequence values); NULL where this role may not read a sequence.
LANE_CURSORS_SQL = """
SELECT h.queue, h.priority, h.enqueue_shard,
       CASE WHEN seqs.readable THEN {sequence_next_value}(h.seq_name) END,
       CASE WHEN seqs.readable THEN {sequence_next_value}(c.seq_name) END
FROM {queue_enqueue_heads} AS h
JOIN {queue_claim_heads} AS c USING (queue, priority, enqueue_shard)
""" + LANE_READABLE_JOINS + """WHERE h.queue = ANY(%(queues)s)
"""

Cursors: TypeAlias = "dict[Lane, tuple[int | None, int | None]]"  # lane -> (enqueue next, claim next)


def _lane_rows(conn: Connection, statement: str, schema: str, queues: list[str], **params: str) -> list[Row]:
    """The rows of a statement on the lane heads of ``queues`` (LANE_LOCK_KEYS_SQL, LANE_CURSORS_SQL)."""
    return conn.execute(schema_sql(schema, statement), {"schema": schema, "queues": queues, **params}).fetchall()


def fetch_activity_sample(conn: Connection) -> list[Row]:
    """Every other client backend of the database now: what it runs and waits on (ACTIVITY_SAMPLE_SQL's rows)."""
    return conn.execute(ACTIVITY_SAMPLE_SQL).fetchall()


def fetch_lane_keys(conn: Connection, schema: str, queues: list[str]) -> LaneKeys:
    """The advisory-lock keys of every lane of ``queues``, as pg_locks shows them."""
    rows = _lane_rows(conn, LANE_LOCK_KEYS_SQL, schema, queues, reservation=RESERVATION, insert=INSERT)
    return {split_key(key): (kind, (queue, priority, shard)) for kind, queue, priority, shard, key in rows}


def fetch_cursors(conn: Connection, schema: str, queues: list[str]) -> Cursors:
    """Both cursors of every lane of ``queues``; (None, None) where this role may not read the sequences."""
    rows = _lane_rows(conn, LANE_CURSORS_SQL, schema, queues)
    return {(queue, priority, shard): (enqueue_next, claim_next) for queue, priority, shard, enqueue_next, claim_next in rows}


@dataclass(frozen=True)
class LoadWindow:
    """What one window of ``seconds`` saw."""

    seconds: float
    tally: ContentionTally
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
    tally, next_at = ContentionTally(), started
    while time.monotonic() - started < seconds:
        rows = read("sampling pg_stat_activity", lambda: fetch_activity_sample(conn))
        tally.add([classify(row, lane_keys) for row in rows])
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    after = read("reading the lane cursors", lambda: fetch_cursors(conn, schema, queues))
    return LoadWindow(round(time.monotonic() - started, 3), tally, before, after)
