"""A real Awa producer (awa-pg) as its own OS process.

    python -m awa_testbed.producer --url URL --queue orders --mode insert
        [--batch 1] [--rate 50] [--burst 1] [--count 0] [--keyed] [--scheduled-every 0]
        [--stripes 1] [--name p1] [--summary PATH] [--gate PATH] [--no-record-enqueued]
        [--max-attempts 25]

Modes are the three enqueue paths of awa-pg 0.6.9 (docs/awa-internals.md §6):
``insert`` and ``insert_many_copy`` go through SQL ``insert_job_compat``,
``enqueue_many_copy`` through direct COPY into queue storage.

Every job carries a unique tag. Tags of successful calls go to
``testbed.enqueued`` (unless ``--no-record-enqueued``: that is one more
commit per call, which a benchmark must not pay); failures to
``testbed.producer_errors``. A call PostgreSQL aborted to break a deadlock
wrote nothing and is sent again, as PostgreSQL asks applications to do, up to
``DEADLOCK_ATTEMPTS`` times in all; each retried one is recorded there too,
with ``retried``. ``--summary`` writes counts and per-call latencies as JSON
when the producer stops (after ``--count`` jobs, or on SIGTERM/SIGINT). With
``--gate PATH`` it starts calls only while PATH exists, each into the queue
the file names when the call starts (``--queue`` when it is empty), so one
process can produce in several measured windows, each on its own queue.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import signal
import sys
import time
from pathlib import Path

import awa
import psycopg

from .jobs import KIND, TestJob

GATE_POLL_SECONDS = 0.01
# Right after a count change Awa 0.6.9 producers can deadlock with each other: a call in flight writes
# to lanes of both counts (docs/awa-internals.md §6). PostgreSQL aborts one call whole; applications retry it.
DEADLOCK_ATTEMPTS = 3
DEADLOCK_MESSAGE = "deadlock detected"


class Producer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.client = awa.AsyncClient(args.url, max_connections=args.connections)
        self.queue = args.queue
        self.sequence = 0
        self.enqueued = 0
        self.errors: dict[str, int] = {}
        self.deadlocks_retried = 0
        self.latencies: list[tuple[float, float, bool]] = []  # (unix time, ms, ok)

    def next_jobs(self) -> list[tuple[TestJob, dict]]:
        jobs = []
        for dummy in range(self.args.batch):
            self.sequence += 1
            tag = f"{self.args.name}-{self.sequence}"
            opts: dict = {}
            if self.args.keyed:
                opts["ordering_key"] = f"key-{self.sequence % 97}"
            if self.args.scheduled_every and self.sequence % self.args.scheduled_every == 0:
                opts["run_at"] = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
                    seconds=1 + self.sequence % 3)
            jobs.append((TestJob(tag=tag, n=self.sequence), opts))
        return jobs

    async def enqueue(self, jobs: list[tuple[TestJob, dict]]) -> None:
        queue = self.queue
        if self.args.mode == "insert":
            for job, opts in jobs:
                await self.client.insert(job, kind=KIND, queue=queue, max_attempts=self.args.max_attempts, **opts)
        else:
            # The batch APIs take run_at per batch; schedule the whole batch
            # when any of its jobs is scheduled.
            run_at = next((opts["run_at"] for dummy, opts in jobs if "run_at" in opts), None)
            per_job = [{"ordering_key": opts["ordering_key"]} if "ordering_key" in opts else None
                       for dummy, opts in jobs]
            call = self.client.insert_many_copy if self.args.mode == "insert_many_copy" else self.client.enqueue_many_copy
            extra = {"queue_storage_queue_stripe_count": self.args.stripes} if self.args.mode == "enqueue_many_copy" else {}
            await call([job for job, dummy in jobs], kind=KIND, queue=queue, run_at=run_at, opts=per_job, **extra)

    async def record_error(self, recorder: psycopg.AsyncConnection, lock: asyncio.Lock, exc: Exception,
                           retried: bool) -> None:
        kind = type(exc).__name__
        if not retried:
            self.errors[kind] = self.errors.get(kind, 0) + 1
        async with lock:
            await recorder.execute(
                "INSERT INTO testbed.producer_errors (producer, error_type, message, retried) VALUES (%s, %s, %s, %s)",
                (self.args.name, kind, str(exc)[:2000], retried))

    async def one_call(self, recorder: psycopg.AsyncConnection, lock: asyncio.Lock) -> None:
        jobs = self.next_jobs()
        started = time.perf_counter()
        for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
            try:
                await self.enqueue(jobs)
                break
            except Exception as exc:  # pylint: disable=broad-exception-caught
                retry = DEADLOCK_MESSAGE in str(exc) and attempt < DEADLOCK_ATTEMPTS
                await self.record_error(recorder, lock, exc, retried=retry)
                if retry:
                    self.deadlocks_retried += 1
                    continue
                elapsed = (time.perf_counter() - started) * 1000
                self.latencies.append((time.time(), elapsed, False))
                return
        elapsed = (time.perf_counter() - started) * 1000
        self.latencies.append((time.time(), elapsed, True))
        self.enqueued += len(jobs)
        if not self.args.record_enqueued:
            return
        async with lock:
            async with recorder.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO testbed.enqueued (tag, producer, queue) VALUES (%s, %s, %s)",
                    [(job.tag, self.args.name, self.queue) for job, dummy in jobs])

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Produce until ``--count`` is reached or ``stop`` is set (default: on SIGTERM/SIGINT)."""
        if stop is None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        recorder = await psycopg.AsyncConnection.connect(self.args.record_dsn or self.args.url, autocommit=True)
        lock = asyncio.Lock()
        interval = 1.0 / self.args.rate if self.args.rate else 0.0
        print(f"producer {self.args.name} pid={os.getpid()} mode={self.args.mode} queue={self.args.queue}", flush=True)
        if self.args.ready_file:
            Path(self.args.ready_file).write_text(str(os.getpid()), encoding="utf-8")
        next_at = time.monotonic()
        pending: set[asyncio.Task] = set()
        while not stop.is_set():
            if self.args.count and self.sequence >= self.args.count:
                break
            if self.args.gate:
                named = self.gate_queue()
                if named is None:
                    await self.wait_for_gate(stop)
                    next_at = time.monotonic()
                    continue
                self.queue = named or self.args.queue
            # Keep up to --concurrency calls in flight; start --burst of them at each tick of --rate.
            for dummy_call in range(self.args.burst):
                while len(pending) >= self.args.concurrency:
                    dummy, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                pending.add(asyncio.create_task(self.one_call(recorder, lock)))
            if interval:
                next_at += interval
                try:
                    await asyncio.wait_for(stop.wait(), timeout=max(0.0, next_at - time.monotonic()))
                except asyncio.TimeoutError:
                    pass
            else:
                await asyncio.sleep(0)
        if pending:
            await asyncio.wait(pending)
        await self.client.close()
        await recorder.close()
        self.write_summary()
        print(f"producer {self.args.name} done enqueued={self.enqueued} errors={self.errors} "
              f"deadlocks_retried={self.deadlocks_retried}", flush=True)

    async def wait_for_gate(self, stop: asyncio.Event) -> None:
        """Until --gate exists again (or the producer is stopped)."""
        print(f"producer {self.args.name} waits for the gate", flush=True)  # what a test synchronises on
        while not stop.is_set() and not os.path.exists(self.args.gate):
            try:
                await asyncio.wait_for(stop.wait(), timeout=GATE_POLL_SECONDS)
            except asyncio.TimeoutError:
                pass

    def gate_queue(self) -> str | None:
        """What the gate file says now (None: closed). Read before every call, so a call always goes to the
        queue named when it starts; write the file whole (e.g. with os.replace)."""
        try:
            return Path(self.args.gate).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None

    def write_summary(self) -> None:
        if not self.args.summary:
            return
        Path(self.args.summary).write_text(json.dumps({
            "name": self.args.name, "mode": self.args.mode, "queue": self.args.queue,
            "enqueued": self.enqueued, "errors": self.errors,
            "deadlocks_retried": self.deadlocks_retried, "calls": self.latencies,
        }), encoding="utf-8")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--record-dsn", help="where tags and errors are recorded (default: --url)")
    parser.add_argument("--queue", required=True)
    parser.add_argument("--mode", choices=("insert", "insert_many_copy", "enqueue_many_copy"), default="insert")
    parser.add_argument("--batch", type=int, default=1, help="jobs per call")
    parser.add_argument("--rate", type=float, default=50.0, help="calls per second (0: as fast as possible)")
    parser.add_argument("--concurrency", type=int, default=1, help="calls in flight at once")
    parser.add_argument("--burst", type=int, default=1,
                        help="calls started together at each tick (bursty traffic; raise --concurrency to match)")
    parser.add_argument("--connections", type=int, default=10, help="client pool size")
    parser.add_argument("--count", type=int, default=0, help="stop after this many jobs (0: run until signalled)")
    parser.add_argument("--keyed", action="store_true", help="give every job an ordering key")
    parser.add_argument("--scheduled-every", type=int, default=0, help="schedule every Nth job 1-3 s ahead")
    parser.add_argument("--stripes", type=int, default=1, help="queue stripe count for enqueue_many_copy")
    parser.add_argument("--name", default=f"producer-{os.getpid()}")
    parser.add_argument("--summary", help="write a JSON summary here on exit")
    parser.add_argument("--gate", help="start calls only while this file exists, into the queue it names")
    parser.add_argument("--record-enqueued", action=argparse.BooleanOptionalAction, default=True,
                        help="record every job's tag in testbed.enqueued (one more commit per call)")
    parser.add_argument("--max-attempts", type=int, default=25, help="attempts Awa makes per job (insert mode)")
    parser.add_argument("--ready-file")
    return parser


def main(argv: list[str] | None = None) -> int:
    asyncio.run(Producer(build_parser().parse_args(argv)).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
