"""5. Which shard count helps: real producers on one queue at S = 1, 2, 4, 8.

The matrix: enqueue path x producers N x shard count S, each cell repeated.
It measures and decides nothing (issue 14, section 1).

* Paths: ``insert`` (awa-pg ``insert``, one job a call, through SQL
  ``awa.insert_job_compat``), ``copy`` (``enqueue_many_copy``, direct COPY,
  ``copy_batch`` jobs a call, no ordering key) and ``copy_keyed`` (the same
  with an ordering key per job, 97 distinct keys).
* An episode is one (path, N, repeat): one queue per S, each set to that S
  with the module's code (``change_queues``, which provisions its
  lanes, so a queue has exactly 4 x S lanes for the claims to scan),
  ``worker_runtimes`` worker runtimes serving them all (two, so claims
  compete for claim heads as in any redundant deployment), and N producer
  processes (test bed
  programs, each one connection, one call in flight, as fast as it can).
  The episode walks through every S in an order rotated by the repeat, so no
  S always comes first. Within an episode the producers keep their
  connections, so the S values are compared on the same backends; repeats
  use new processes (new backend pids, which the SQL path's shard choice
  depends on).
* Per S, a window: the producers' gate file is written with the queue of
  that S, after a warm-up the measured window runs, the gate is removed, the
  worker drains the queue. During the window pg_stat_activity and pg_locks
  are sampled every ``sample_interval`` (benchmarks/wait_sampler.py).

Recorded per window, as a monitoring role would read it where it can
(benchmarks/shard_choice_report.py turns it into tables): enqueue calls and
latencies (producer summaries), enqueue-to-handler-end latency of the jobs
created in the window (worker summary), per-lane sequence deltas (enqueued
and claimed jobs per shard), backlog per lane at the end, wait events and
lock waiters, ``pg_stat_user_functions`` deltas of the Awa functions
(``track_functions = pl`` on the database), WAL syncs, and the producers'
backend pids (the SQL path routes by ``pg_backend_pid() % S``).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from awa_testbed import processes
from awa_testbed.awadb import AwaDatabase
from awa_testbed.processes import ManagedProcess
from psycopg import sql

from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.advice import load_window
from ansible_collections.awa.operations.plugins.module_utils.schema.lanes import fetch_lane_depths
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request

from . import environment, shard_choice_report
from .convergence import start_all, stop_all
from .environment import BenchServer
from .producer_impact import errors_by_type
from .wait_sampler import WaitSampler, fetch_lane_keys

PRODUCER_APP = "awa-bench-producer"
WORKER_APP = "awa-bench-worker"
ROLES = {PRODUCER_APP: "producer", WORKER_APP: "worker"}
TRACKED_FUNCTIONS = ("insert_job_compat", "reserve_enqueue_seq", "claim_ready_runtime")
DRAIN_POLL_SECONDS = 0.1


@dataclass(frozen=True)
class EnqueuePath:
    """One way a producer enqueues."""

    mode: str  # the test bed producer's --mode
    batched: bool  # one job a call, or ``copy_batch`` jobs a call
    keyed: bool  # an ordering key on every job


PATHS = {
    "insert": EnqueuePath("insert", batched=False, keyed=False),
    "copy": EnqueuePath("enqueue_many_copy", batched=True, keyed=False),
    "copy_keyed": EnqueuePath("enqueue_many_copy", batched=True, keyed=True),
}


@dataclass(frozen=True)
class Matrix:
    """The cells and how long each is measured."""

    producers: tuple[int, ...] = (1, 2, 4, 8, 16)
    shards: tuple[int, ...] = (1, 2, 4, 8)
    paths: tuple[str, ...] = tuple(PATHS)
    repeats: int = 3
    window_seconds: float = 3.0
    warmup_seconds: float = 0.5
    episode_warmup_seconds: float = 1.0
    copy_batch: int = 20
    worker_runtimes: int = 2
    worker_slots: int = 128
    sample_interval: float = 0.025
    drain_timeout: float = 20.0

    def batch(self, path: str) -> int:
        return self.copy_batch if PATHS[path].batched else 1

    def problems(self) -> list[str]:
        """What is wrong with the matrix, each saying what to give instead (empty when it can run)."""
        found = []
        if not all(1 <= count <= 64 for count in self.shards):
            found.append(f"shard counts must be 1..64 (awa.queue_meta allows no other), got {list(self.shards)}")
        if not all(count >= 1 for count in self.producers):
            found.append(f"producer counts must be at least 1, got {list(self.producers)}")
        if self.repeats < 1:
            found.append(f"repeats must be at least 1, got {self.repeats}")
        if self.window_seconds <= 0:
            found.append(f"the window must be longer than 0 seconds, got {self.window_seconds:g}")
        return found


QUICK_MATRIX = Matrix(producers=(1, 4), shards=(1, 4), repeats=1, window_seconds=2.0)


def shard_order(shards: tuple[int, ...], repeat: int) -> list[int]:
    """The S values of one episode, rotated by the repeat (each S takes each position once in len(S) repeats)."""
    offset = repeat % len(shards)
    return list(shards[offset:] + shards[:offset])


# ---------------------------------------------------------------------------
# Reads of one queue (plain SQL; every one is cheap enough to run around a window)

FUNCTIONS_SQL = """
SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions
WHERE schemaname = 'awa' AND funcname = ANY(%s)
"""
# PostgreSQL 18 moved the WAL sync count from pg_stat_wal to pg_stat_io.
WAL_SYNCS_SQL = {17: "SELECT wal_sync FROM pg_stat_wal",
                 18: "SELECT coalesce(sum(fsyncs), 0)::int8 FROM pg_stat_io WHERE object = 'wal'"}
PRODUCER_PIDS_SQL = """
SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s ORDER BY pid
"""


def read_cursors(conn, queue: str) -> dict[str, tuple[int, int]]:
    """'priority/shard' -> (next enqueue sequence value, next claim sequence value)."""
    return {f"{priority}/{shard}": (enqueue, claim)
            for (dummy, priority, shard), (enqueue, claim) in load_window.fetch_cursors(conn, "awa", [queue]).items()}


def read_functions(conn) -> dict[str, dict]:
    rows = conn.execute(FUNCTIONS_SQL, (list(TRACKED_FUNCTIONS),)).fetchall()
    return {name: {"calls": calls, "total_ms": total, "self_ms": self_ms} for name, calls, total, self_ms in rows}


def backlog(conn, queue: str) -> dict[str, dict]:
    """Ready jobs and the oldest one's age per lane that has any (the exact count the info module reads)."""
    lanes = [lane for lane in fetch_lane_depths(conn, "awa", [queue]) if lane.ready_depth]
    return {f"{lane.priority}/{lane.shard}": {
        "ready": lane.ready_depth, "oldest_s": round(lane.oldest_ready_age_seconds or 0.0, 3)} for lane in lanes}


def wait_drained(conn, queue: str, timeout: float) -> dict:
    """Poll until no lane of ``queue`` holds a ready job (or ``timeout``)."""
    started = time.monotonic()
    while True:
        left = sum(lane["ready"] for lane in backlog(conn, queue).values())
        if not left or time.monotonic() - started >= timeout:
            return {"seconds": round(time.monotonic() - started, 2), "drained": not left, "left": left}
        time.sleep(DRAIN_POLL_SECONDS)


# ---------------------------------------------------------------------------
# Static evidence: what the live 0.6.9 definitions say (one read per server)

DEFINITION_SQL = """
SELECT string_agg(pg_get_functiondef(p.oid), E'\n') FROM pg_proc AS p
WHERE p.pronamespace = 'awa'::regnamespace AND p.proname = %s
"""
DEFINITION_CHECKS = (
    ("the lane reservation lock is a transaction advisory lock, held until commit",
     "reserve_enqueue_seq", r"pg_advisory_xact_lock\(hashtextextended\(v_lock_key, 0\)\)"),
    ("the SQL path picks the shard from the backend pid when a job has no ordering key",
     "insert_job_compat", r"MOD\(pg_backend_pid\(\)::bigint, v_enqueue_shards\)"),
    ("the SQL path routes an ordering key by its hash mod S",
     "insert_job_compat", r"MOD\(v_hash, v_enqueue_shards\)"),
    ("the SQL path sends a NOTIFY for every available job",
     "insert_job_compat", r"pg_notify\('awa:' \|\| v_queue, ''\)"),
    ("a claim locks one claim head (one lane) with SKIP LOCKED",
     "claim_ready_runtime", r"LIMIT 1\s+FOR UPDATE OF claims SKIP LOCKED"),
    ("a claim considers every lane of the queue: no shard predicate, both sequences read per lane",
     "claim_ready_runtime", r"awa\.sequence_next_value\(claims\.seq_name\) AS claim_seq,\s+"
     r"awa\.sequence_next_value\(enqueues\.seq_name\) AS next_seq[\s\S]*?"
     r"(WHERE claims\.queue = p_queue\s+AND NOT EXISTS)"),
)


def definition_evidence(conn) -> list[dict]:
    """Each check with the matching text of the live definition (its last group when the pattern has one;
    None when the definition differs)."""
    found = []
    for claim, function, pattern in DEFINITION_CHECKS:
        body = conn.execute(DEFINITION_SQL, (function,)).fetchone()[0] or ""
        match = re.search(pattern, body)
        shown = match.group(match.lastindex or 0) if match else None
        found.append({"claim": claim, "function": f"awa.{function}", "pattern": pattern,
                      "match": " ".join(shown.split()) if shown else None})
    return found


# ---------------------------------------------------------------------------
# One episode


@dataclass
class Episode:
    """One (path, N, repeat): its programs, its queues (one per S, provisioned at exactly that S, and one
    to warm up on) and where they write."""

    db: AwaDatabase
    path: str
    producers: int
    repeat: int
    matrix: Matrix
    log_dir: Path

    @property
    def name(self) -> str:
        return f"sc_{self.path}_n{self.producers}_r{self.repeat}"

    def queue(self, shards: int) -> str:
        return f"{self.name}_s{shards}"

    @property
    def warmup_queue(self) -> str:
        return f"{self.name}_warmup"

    @property
    def gate(self) -> Path:
        return self.log_dir / f"{self.name}.gate"

    def producer_summary(self, index: int) -> Path:
        return self.log_dir / f"{self.name}-p{index}.json"

    def worker_summary(self, index: int) -> Path:
        return self.log_dir / f"{self.name}-w{index}.json"

    def url(self, application: str) -> str:
        return f"{self.db.url()}?application_name={application}"

    def programs(self) -> tuple[list[ManagedProcess], list[ManagedProcess]]:
        path, slots = PATHS[self.path], self.matrix.worker_slots
        queues = [f"{queue}={slots}" for queue in (self.warmup_queue, *map(self.queue, self.matrix.shards))]
        workers = [processes.worker(f"{self.name}-w{index}", self.url(WORKER_APP), queues, record_dsn=self.db.dsn(),
                                    log_dir=self.log_dir, extra=["--latency-summary", str(self.worker_summary(index))])
                   for index in range(self.matrix.worker_runtimes)]
        producers = [processes.producer(f"{self.name}-p{index}", self.url(PRODUCER_APP), self.warmup_queue,
                                        mode=path.mode, rate=0, batch=self.matrix.batch(self.path), keyed=path.keyed,
                                        concurrency=1, connections=1, record_dsn=self.db.dsn(),
                                        summary=self.producer_summary(index), log_dir=self.log_dir, gate=self.gate,
                                        record_enqueued=False)
                     for index in range(self.producers)]
        return workers, producers

    def open_gate(self, queue: str) -> None:
        """Let the producers call, into ``queue`` (the file appears whole: they read the queue from it)."""
        pending = self.gate.with_suffix(".pending")
        pending.write_text(queue, encoding="utf-8")
        os.replace(pending, self.gate)

    def close_gate(self) -> None:
        self.gate.unlink(missing_ok=True)


def set_shards(conn, queue: str, shards: int) -> None:
    """The collection's own change (lanes provisioned, then queue_meta)."""
    change_queues(conn, validate_request(queue, shards, new_queue=True))


def measure_window(episode: Episode, conn, shards: int, position: int, wal_syncs_sql: str) -> dict:
    """Open the gate on the queue of S, warm up, measure one window, close the gate, drain."""
    matrix, queue = episode.matrix, episode.queue(shards)
    lane_keys = fetch_lane_keys(conn, queue)
    pids = [pid for (pid,) in conn.execute(PRODUCER_PIDS_SQL, (PRODUCER_APP,)).fetchall()]
    episode.open_gate(queue)
    time.sleep(matrix.warmup_seconds)
    functions_before, syncs_before = read_functions(conn), conn.execute(wal_syncs_sql).fetchone()[0]
    cursors_before = read_cursors(conn, queue)
    sampler = WaitSampler(episode.db.dsn(), ROLES, lane_keys, matrix.sample_interval)
    started = time.time()
    sampler.start()
    time.sleep(matrix.window_seconds)
    waits = sampler.stop()
    ended = time.time()
    cursors_after = read_cursors(conn, queue)
    functions_after, syncs_after = read_functions(conn), conn.execute(wal_syncs_sql).fetchone()[0]
    episode.close_gate()
    at_end = backlog(conn, queue)
    drain = wait_drained(conn, queue, matrix.drain_timeout)
    # What the claims did while the workers drained the backlog with no producer left.
    drain["functions"] = shard_choice_report.function_deltas(functions_after, read_functions(conn))
    drain["lanes"] = shard_choice_report.lane_deltas(cursors_after, read_cursors(conn, queue))
    return {
        "path": episode.path, "producers": episode.producers, "shards": shards, "repeat": episode.repeat,
        "position": position, "queue": queue, "lanes_provisioned": len(cursors_after),
        "started_at": started, "ended_at": ended, "seconds": round(ended - started, 3), "producer_pids": pids,
        "lanes": shard_choice_report.lane_deltas(cursors_before, cursors_after),
        "cursors": {"before": cursors_before, "after": cursors_after},
        "backlog_end": at_end, "waits": waits,
        "functions": shard_choice_report.function_deltas(functions_before, functions_after),
        "wal_syncs": syncs_after - syncs_before, "drain": drain,
    }


def run_episode(episode: Episode, wal_syncs_sql: str) -> tuple[list[dict], dict]:
    """Every S of one (path, N, repeat), then the calls and completions of each window from the summaries.

    Also returns where the episode's time went (seconds), to size a run.
    """
    matrix = episode.matrix
    episode.close_gate()
    workers, producers = episode.programs()
    windows: list[dict] = []
    clock = PhaseClock()
    # The change needs a transaction of its own (autocommit off); the reads must see fresh statistics (autocommit).
    with environment.connect(episode.db) as change_conn:
        set_shards(change_conn, episode.warmup_queue, 1)
        for shards in matrix.shards:
            set_shards(change_conn, episode.queue(shards), shards)
    with episode.db.connect() as conn:
        try:
            start_all(workers)
            start_all(producers)
            clock.lap("start")
            episode.open_gate(episode.warmup_queue)  # connections, prepared statements and caches
            time.sleep(matrix.episode_warmup_seconds)
            episode.close_gate()
            wait_drained(conn, episode.warmup_queue, matrix.drain_timeout)
            clock.lap("warmup")
            windows = [measure_window(episode, conn, shards, position, wal_syncs_sql)
                       for position, shards in enumerate(shard_order(matrix.shards, episode.repeat))]
            clock.lap("windows")
        finally:
            episode.close_gate()
            stop_all(producers)
            stop_all(workers)
            clock.lap("stop")
    producer_files = [episode.producer_summary(index) for index in range(episode.producers)]
    worker_files = [episode.worker_summary(index) for index in range(matrix.worker_runtimes)]
    calls = [load_json(path)["calls"] for path in producer_files]
    completions = [load_json(path) for path in worker_files]
    created = [at for completion in completions for at in completion["created_at"]]
    handled = [at for completion in completions for at in completion["handled_at"]]
    for window in windows:
        started, ended = window["started_at"], window["ended_at"]
        window["enqueue"] = shard_choice_report.enqueue_stats(calls, matrix.batch(episode.path), started, ended)
        window["completion"] = shard_choice_report.completion_stats(created, handled, started, ended)
        window["errors_by_type"] = errors_by_type(episode.db, episode.name, started, ended)
    for path in producer_files + worker_files:
        path.unlink(missing_ok=True)
    return windows, clock.phases


class PhaseClock:
    """Seconds between successive laps, by name."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._last = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(now - self._last, 2)
        self._last = now


def load_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def run(bench: BenchServer, matrix: Matrix, log_dir: Path) -> dict:
    """Every episode of the matrix on one fresh database: repeat by repeat, path by path, N by N."""
    db = bench.fresh_database()
    try:
        with bench.server.connect() as conn:
            conn.execute(sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'").format(sql.Identifier(db.name)))
        with environment.connect(db) as conn:
            evidence = definition_evidence(conn)
        wal_syncs_sql = WAL_SYNCS_SQL[bench.major]
        windows, episodes = [], []
        for repeat in range(matrix.repeats):
            for path in matrix.paths:
                for producers in matrix.producers:
                    measured, phases = run_episode(Episode(db, path, producers, repeat, matrix, log_dir),
                                                   wal_syncs_sql)
                    episodes.append({"path": path, "producers": producers, "repeat": repeat, "phases_s": phases})
                    windows += measured
                    print(f"  {shard_choice_report.episode_line(measured)} ({sum(phases.values()):.0f} s: "
                          f"{', '.join(f'{name} {seconds:.1f}' for name, seconds in phases.items())})", flush=True)
    finally:
        db.drop()
    return {"matrix": asdict(matrix), "definitions": evidence, "episodes": episodes, "windows": windows}


def table(major: int, result: dict) -> str:
    return shard_choice_report.tables_markdown(major, result)
