"""7. One poll of the rollout's batch wait, at 1, 10 and 100 queues: the full read against the runtimes read.

Between the batches of a rolling restart the role waits with the info module
(``wait: restarted``, ``known_runtimes``, ``expected_new_runtimes``,
``health: true``): every poll is one read of its queues. Up to 0.2.0 that was
the full read - every queue's lanes, grants and exact depths - of which the
batch verdict uses only the runtimes and the health counters; ``lanes:
false`` reads the runtimes, each queue's count and last change, and health.

Method. On a fresh database, N queues at S=8 (32 lanes each, a ledger row
each) and two live awa-pg runtimes; then ``POLLS`` polls of the module's own
wait (``info.wait.wait_in_session`` with ``wait: none``: one read,
health included) on a ``TimedConnection`` under libpq's protocol trace, with
the role's options, first with ``lanes: true`` (the read before), then with
``lanes: false``. Reported per poll: statements and round trips on the wire,
and seconds (median over the polls, client side).
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
from awa_testbed import processes
from awa_testbed.environment import wait_for_live_runtimes

from ansible_collections.awa.operations.plugins.module_utils.info.wait import ReadSession
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request
from ansible_collections.awa.operations.plugins.module_utils.info.result import ShardsInfo
from ansible_collections.awa.operations.plugins.module_utils.info.wait import wait_in_session

from . import environment, stats, tables
from .environment import BenchServer
from .tracing import TimedConnection, protocol_trace

QUEUE_COUNTS = (1, 10, 100)
SHARDS = 8
RUNTIMES = 2
POLLS = 5
READY_TIMEOUT = 60.0


def poll(conn: psycopg.Connection, queues: list[str], known: list[str], *, lanes: bool) -> tuple[ShardsInfo, dict]:
    """One poll of the batch wait, as the role asks for it: the read and what it cost."""
    started = time.perf_counter()
    with protocol_trace(conn) as wire:
        read = wait_in_session(ReadSession(conn, None), "none", 0, 1, health=True, queues=queues,
                               known_runtimes=tuple(known), expected_new_runtimes=RUNTIMES, lanes=lanes)
    return read, {"seconds": time.perf_counter() - started, "statements": wire.statements,
                  "round_trips": wire.round_trips}


def measure(bench: BenchServer, count: int, log_dir: Path) -> dict:
    db = bench.fresh_database()
    queues = [f"batch_{count}_{index}" for index in range(count)]
    workers = [processes.worker(f"batch-{count}-w{index}", db.url(), [f"{queues[0]}=2"], record_dsn=db.dsn(),
                                log_dir=log_dir) for index in range(RUNTIMES)]
    try:
        with environment.connect(db, TimedConnection) as conn:
            change_queues(conn, [validate_request(queue, SHARDS, new_queue=True) for queue in queues])
            for worker in workers:
                worker.start()
            wait_for_live_runtimes(db, [worker.pid for worker in workers], READY_TIMEOUT)
            cells = {}
            for lanes in (True, False):
                polls = [poll(conn, queues, [], lanes=lanes) for dummy in range(POLLS)]
                read = polls[-1][0]
                costs = [cost for dummy, cost in polls]
                cells["full" if lanes else "runtimes"] = {
                    "statements": max(cost["statements"] for cost in costs),
                    "round_trips": max(cost["round_trips"] for cost in costs),
                    "ms": stats.summary([round(cost["seconds"] * 1000, 2) for cost in costs]),
                    "new_runtimes": len(read["new_runtimes"]), "has_health": "health" in read,
                    "has_lanes": all("lanes" in view for view in read["queues"].values())}
    finally:
        for worker in workers:
            worker.stop()
        db.drop()
    return {"queues": count, "lanes": count * 4 * SHARDS, **cells}


def run(bench: BenchServer, log_dir: Path, queue_counts: tuple[int, ...] = QUEUE_COUNTS) -> dict:
    return {"runs": [measure(bench, count, log_dir) for count in queue_counts]}


def table(major: int, result: dict) -> str:
    rows = [[run["queues"], run["lanes"], run["full"]["statements"], run["full"]["round_trips"],
             run["full"]["ms"]["median"], run["runtimes"]["statements"], run["runtimes"]["round_trips"],
             run["runtimes"]["ms"]["median"]] for run in result["runs"]]
    return tables.render(
        f"Batch wait, one poll, PostgreSQL {major} (S={SHARDS}, {RUNTIMES} live runtimes, health read with it)",
        ["queues", "lanes", "full read: statements", "round trips", "ms (median)",
         "lanes: false: statements", "round trips", "ms (median)"],
        rows,
        f"Median of {POLLS} polls, client side; statements and round trips as libpq's protocol trace counts them.")
