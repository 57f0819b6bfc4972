"""What the backends of one database wait on, sampled every ~25 ms.

A thread reads ``pg_stat_activity`` joined to the lock each backend waits
for (``pg_locks``, not granted) on its own connection, with the info
module's own read (module_utils/advice/load_window.py), classifies every
client backend of the database, and tallies:

* per role (producer, worker, other; from ``application_name``): how many
  backend-samples were on CPU, waiting on each ``wait_event_type:wait_event``,
  idle in a transaction, or idle;
* the locks waited on: an Awa lane's reservation lock (the advisory lock
  ``reserve_enqueue_seq`` takes on ``hashtextextended('awa.<lane sequence>', 0)``
  and holds until commit), a lane's insert lock (the advisory lock Rust
  ``ensure_lane_inserts`` takes on ``hashtextextended('awa:<queue>:<priority>:<shard>', 0)``,
  also until commit; ``enqueue_many_copy`` takes it on every call, its store
  being new each time), the NOTIFY commit lock (PostgreSQL's
  ``PreCommit_Notify`` locks the shared object pg_database/0 until the commit
  is done), any other advisory lock, or another lock type;
* per sample, how many backends waited on any lane lock and on the NOTIFY
  lock (a histogram over the samples).

Classifying and tallying are pure functions of the rows, so recorded samples
can be replayed in tests; the sampler keeps the raw rows (idle backends left
out, statement text added) of the sample with the most lane-lock waiters, of
the one with the most NOTIFY-lock waiters and of the one with the most
workers waiting on a lock, for that.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import psycopg

from ansible_collections.awa.operations.plugins.module_utils.advice import load_window

OTHER_ROLE = "other"
Lane = tuple[int, int]  # (priority, shard)
LaneKeys = dict[tuple[int, int], tuple[str, Lane]]  # (classid, objid) -> (lock kind, lane)


@dataclass(frozen=True)
class BackendSample:
    """One backend in one sample."""

    role: str
    wait: str  # "CPU", "<type>:<event>", "idle in transaction" or "idle"
    lock: str | None = None  # "lane reservation", "lane insert", "notify", "advisory", another lock type, or None
    lane: Lane | None = None


def classify(row: tuple, roles: dict[str, str], lane_keys: LaneKeys) -> BackendSample:
    """One row of the info module's activity sample (module_utils/advice/load_window.py) as a BackendSample.

    The wait and the lock are named as the info module's advice names them
    (module_utils/advice/load_window.py); the role comes from the application name.
    The statement text is kept only in example samples.
    """
    state, wait_type, wait_event, locktype, database, classid, objid, dummy, application = row[:9]
    lock, lane = load_window.lock_kind(locktype, database, classid, objid, lane_keys)
    return BackendSample(roles.get(application, OTHER_ROLE), load_window.wait_label(state, wait_type, wait_event),
                         lock, lane)


@dataclass
class WaitTally:
    """Everything the samples of one window add up to."""

    samples: int = 0
    waits: dict[str, Counter] = field(default_factory=dict)  # role -> wait label -> backend-samples
    locks: dict[str, Counter] = field(default_factory=dict)  # role -> lock label -> backend-samples
    lane_waits: Counter = field(default_factory=Counter)  # "priority/shard" -> backend-samples
    lane_waiters_per_sample: Counter = field(default_factory=Counter)  # waiters -> samples
    notify_waiters_per_sample: Counter = field(default_factory=Counter)

    def add(self, backends: list[BackendSample]) -> None:
        self.samples += 1
        for backend in backends:
            self.waits.setdefault(backend.role, Counter())[backend.wait] += 1
            if backend.lock:
                self.locks.setdefault(backend.role, Counter())[backend.lock] += 1
            if backend.lane:
                self.lane_waits[f"{backend.lane[0]}/{backend.lane[1]}"] += 1
        self.lane_waiters_per_sample[sum(1 for backend in backends if backend.lane)] += 1
        self.notify_waiters_per_sample[sum(1 for backend in backends if backend.lock == "notify")] += 1

    def as_dict(self) -> dict:
        """JSON-ready (histogram keys become strings)."""
        return {
            "samples": self.samples,
            "waits": {role: dict(counts.most_common()) for role, counts in sorted(self.waits.items())},
            "locks": {role: dict(counts.most_common()) for role, counts in sorted(self.locks.items())},
            "lane_waits": dict(sorted(self.lane_waits.items())),
            "lane_waiters_per_sample": {str(k): v for k, v in sorted(self.lane_waiters_per_sample.items())},
            "notify_waiters_per_sample": {str(k): v for k, v in sorted(self.notify_waiters_per_sample.items())},
        }


def fetch_lane_keys(conn: psycopg.Connection, queue: str) -> LaneKeys:
    """The lock keys of every lane of ``queue``, as the info module's advice reads them."""
    with conn.transaction():
        keys = load_window.fetch_lane_keys(conn, "awa", [queue])
    return {key: (kind, (priority, shard)) for key, (kind, (dummy, priority, shard)) in keys.items()}


class WaitSampler:
    """Samples in a thread from ``start()`` to ``stop()``; ``stop()`` returns the tally as a dict."""

    def __init__(self, dsn: str, roles: dict[str, str], lane_keys: LaneKeys, interval: float) -> None:
        self.roles = roles
        self.lane_keys = lane_keys
        self.interval = interval
        self.tally = WaitTally()
        self._conn = psycopg.connect(dsn, autocommit=True, application_name="awa-bench-sampler")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wait-sampler", daemon=True)
        self._started = self._stopped = 0.0
        self.examples: dict[str, dict] = {}  # "lane" / "notify" / "worker lock" -> {"waiters": n, "rows": [...]}

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            rows = load_window.fetch_activity_sample(self._conn)
            backends = [classify(row, self.roles, self.lane_keys) for row in rows]
            self.tally.add(backends)
            self._keep_example("lane", sum(1 for backend in backends if backend.lane), rows)
            self._keep_example("notify", sum(1 for backend in backends if backend.lock == "notify"), rows)
            self._keep_example("worker lock", sum(1 for b in backends if b.role == "worker" and b.lock), rows)
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _keep_example(self, kind: str, waiters: int, rows: list[tuple]) -> None:
        if waiters and waiters > self.examples.get(kind, {}).get("waiters", 0):
            self.examples[kind] = {"waiters": waiters, "rows": [list(row) for row in rows if row[0] != "idle"]}

    def start(self) -> "WaitSampler":
        self._started = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        self._stopped = time.monotonic()
        self._conn.close()
        seconds = self._stopped - self._started
        return {**self.tally.as_dict(), "seconds": round(seconds, 3),
                "interval_ms": round(1000 * seconds / self.tally.samples, 1) if self.tally.samples else None,
                "example_samples": self.examples}
