"""4. From commit to "every runtime runs with the new count", with restart pickup.

N real awa-pg worker runtimes (separate processes) serve a queue. The count
is changed with the module's code; right after the commit every runtime is
restarted (all at once: graceful stop, then start, in parallel threads).
``read_shards_info`` (the info module's code) is polled every
``POLL_SECONDS`` until it reports ``converged``. Reported: commit ->
converged, last restart ready -> converged, and how long the restarts took.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from awa_testbed import processes
from awa_testbed.awadb import AwaDatabase
from awa_testbed.environment import wait_for_live_runtimes
from awa_testbed.processes import ManagedProcess

from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request
from ansible_collections.awa.operations.plugins.module_utils.info.read import read_shards_info
from ansible_collections.awa.operations.plugins.module_utils.info.result import ShardsInfo, ShardsRead
from ansible_collections.awa.operations.plugins.module_utils.info.wait import wait_for_shards_info

from . import environment, tables
from .environment import BenchServer

POLL_SECONDS = 0.1
TIMEOUT_SECONDS = 120.0
TARGET_SHARDS = 8
READY_TIMEOUT = 60.0


def start_all(workers: list[ManagedProcess]) -> float:
    """Start every runtime at once; returns when the last one is ready (perf_counter).

    Started from this thread: a child started from a worker thread would get
    its parent-death signal when that thread ends.
    """
    for worker in workers:
        worker.start(wait_ready=0)
    for worker in workers:
        worker.wait_ready(READY_TIMEOUT)
    return time.perf_counter()


def stop_all(programs: list[ManagedProcess]) -> None:
    """Stop every program gracefully, in parallel."""
    with ThreadPoolExecutor(max_workers=max(1, len(programs))) as pool:
        list(pool.map(lambda program: program.stop(), programs))


def restart_all(workers: list[ManagedProcess]) -> float:
    """Stop every runtime gracefully (in parallel), then start them all again."""
    stop_all(workers)
    return start_all(workers)


def measure(db: AwaDatabase, count: int, log_dir: Path) -> dict:
    queue = f"converge_{count}"
    workers = [processes.worker(f"{queue}-w{index}", db.url(), [f"{queue}=2"], record_dsn=db.dsn(),
                                log_dir=log_dir) for index in range(count)]
    try:
        start_all(workers)
        with environment.connect(db) as conn:
            wait_for_live_runtimes(db, [worker.pid for worker in workers], TIMEOUT_SECONDS)
            change_queues(conn, validate_request(queue, TARGET_SHARDS, new_queue=True))
            committed = time.perf_counter()
            before: ShardsRead = read_shards_info(conn, queue=queue)
            last_ready = restart_all(workers)
            waited: ShardsInfo = wait_for_shards_info(conn, "converged", TIMEOUT_SECONDS, POLL_SECONDS, queue=queue)
            converged_before_restart, polls = before["converged"], waited["polls"]
            converged = time.perf_counter()
    finally:
        for worker in workers:
            worker.stop()
    return {"runtimes": count, "converged_before_restart": converged_before_restart,
            "restart_s": round(last_ready - committed, 3), "commit_to_converged_s": round(converged - committed, 3),
            "last_restart_to_converged_s": round(converged - last_ready, 3), "polls": polls}


def run(bench: BenchServer, runtime_counts: tuple[int, ...], log_dir: Path) -> dict:
    db = bench.fresh_database()
    try:
        return {"runs": [measure(db, count, log_dir) for count in runtime_counts]}
    finally:
        db.drop()


def table(major: int, result: dict) -> str:
    rows = [[run["runtimes"], run["converged_before_restart"], run["restart_s"], run["commit_to_converged_s"],
             run["last_restart_to_converged_s"]] for run in result["runs"]]
    return tables.render(
        f"Convergence with restart pickup, PostgreSQL {major} (S 1 -> {TARGET_SHARDS}, seconds)",
        ["runtimes", "converged before restart", "restart (all, parallel)", "commit -> converged",
         "last restart ready -> converged"],
        rows,
        f"The info read polls every {POLL_SECONDS:g} s; a runtime is ready when its client.start() returned.")
