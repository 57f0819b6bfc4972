"""6. Lost commits: how often a cut COMMIT is resolved, how long it takes, and whether the answer is true.

Method. Each round raises a fresh queue from 1 to 4 shards through
``change_queues`` (the module's code, reconnecting as the module
does) on a connection through the test bed's proxy
(``awa_testbed.commit_cutter``), which cuts it at the COMMIT:

* after: right after forwarding COMMIT (the server commits; the client never
  hears back);
* before: right before (the server rolls back);
* after + restart: right after, then the server restarts (fast shutdown) while
  the proxy refuses connections until it is back, so the module's first
  reconnect attempts fail.

The answer (committed, not applied, unknown) is compared with the database
read directly afterwards: the queue's count is 4 exactly when the change
committed. Seconds are from the cut to the module's answer.
"""

from __future__ import annotations

import threading
import time

from awa_testbed.commit_cutter import CommitCutter

from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.change.result import QueueChangeRun
from ansible_collections.awa.operations.plugins.module_utils.errors import CommitNotApplied, CommitOutcomeUnknown
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request

from . import stats, tables
from .environment import BenchServer

# Round kind -> (proxy cut, restart the server at the cut).
KINDS = {"after": ("after", False), "before": ("before", False), "after + restart": ("after", True)}


def resolve(queue: str, login: dict) -> dict:
    """One change through the proxy, as the module runs it: its answer and the attempt that gave it."""
    with open_connection(login) as conn:
        try:
            result: QueueChangeRun = change_queues(conn, validate_request(queue, 4, new_queue=True),
                                                   reconnect=lambda: connect(login))
            return {"answer": "committed", "attempts": result["lost_commit"]["reconnect_attempts"]}
        except CommitNotApplied as exc:
            return {"answer": "not applied", "attempts": exc.details["lost_commit"]["reconnect_attempts"]}
        except CommitOutcomeUnknown:
            return {"answer": "unknown", "attempts": None}


def one_round(bench: BenchServer, db, proxy: CommitCutter, queue: str, kind: str) -> dict:
    mode, restart = KINDS[kind]
    login = {**db.login_args(), "login_port": proxy.port}
    cut = proxy.arm(mode, refuse=restart)
    outcome: dict = {}
    # The change runs in a thread: the server must be restarted from this one (its postmaster dies with the
    # thread that started it).
    change = threading.Thread(target=lambda: outcome.update(resolve(queue, login), answered=time.monotonic()))
    change.start()
    if restart:
        cut.done.wait(60)
        try:
            bench.server.restart()
        finally:
            proxy.listen()
    change.join()
    committed = db.scalar("SELECT enqueue_shards FROM awa.queue_meta WHERE queue = %s", (queue,)) == 4
    return {"kind": kind, "answer": outcome["answer"], "committed": committed, "attempts": outcome["attempts"],
            "seconds": round(outcome["answered"] - cut.cut_at, 3)}


def run(bench: BenchServer, rounds: int) -> dict:
    db = bench.fresh_database()
    # A small shutdown checkpoint: the restarts then take about as long as on a server in use.
    db.query("CHECKPOINT")
    try:
        with CommitCutter(bench.server.host, bench.server.port) as proxy:
            return {"rounds": [one_round(bench, db, proxy, f"lost_{index}_{number}", kind)
                               for index, kind in enumerate(KINDS) for number in range(rounds)]}
    finally:
        db.drop()


def table(major: int, result: dict) -> str:
    rows = []
    for kind in KINDS:
        done = [entry for entry in result["rounds"] if entry["kind"] == kind]
        seconds = [entry["seconds"] for entry in done if entry["seconds"] is not None]
        rows.append([kind, len(done), *(sum(entry["answer"] == answer for entry in done)
                                        for answer in ("committed", "not applied", "unknown")),
                     sum(entry["answer"] != "unknown" and (entry["answer"] == "committed") != entry["committed"]
                         for entry in done),
                     max((entry["attempts"] or 0 for entry in done), default=None),
                     stats.median(seconds), max(seconds, default=None)])
    return tables.render(
        f"Lost commits, PostgreSQL {major} (a raise 1 -> 4 per round, cut by the proxy)",
        ["cut", "rounds", "committed", "not applied", "unknown", "answer wrong", "max attempts", "median s",
         "max s"],
        rows,
        "answer wrong = the module's answer disagrees with the database read afterwards (the count is 4 exactly "
        "when the change committed); seconds from the cut to the answer; attempts = the reconnect attempt that "
        "looked it up (6 at most, within about 15 s).")
