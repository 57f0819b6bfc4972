"""Soak: change S up and down on a live queue, with producers and workers running.

Real producers on every enqueue path of awa-pg 0.6.9 (SQL insert, SQL COPY,
direct COPY with and without ordering keys, scheduled jobs so promotion runs)
and two worker runtimes, while the module walks S through 1 -> 4 -> 8 -> 2 -> 1,
restarting the runtimes after each change and waiting for convergence (and
drain after a lowering) with the info module. At the end every enqueued job
ran, Awa counted each completion once, no producer call failed and no ready
job is left on a shard at or above the count. A call PostgreSQL aborted to
break a deadlock between Awa's own producers is retried, as applications must
(docs/awa-internals.md §6); the report counts those.

The short run is part of every test run; ``hack/test.sh --long`` adds the long one.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from awa_testbed.environment import wait_for_live_runtimes
from awa_testbed.fleet import Fleet
from awa_testbed.terminal_tally import TerminalTally

from enqueue_shards_support import change, enqueued_per_producer, info

QUEUE = "soak"
WALK = (4, 8, 2, 1)
PRODUCERS = {
    "sql-insert": {"mode": "insert", "rate": 20, "concurrency": 2, "scheduled_every": 7},
    "sql-copy": {"mode": "insert_many_copy", "batch": 5, "rate": 4},
    "copy": {"mode": "enqueue_many_copy", "batch": 8, "rate": 4, "scheduled_every": 5},
    "keyed-copy": {"mode": "enqueue_many_copy", "batch": 8, "rate": 4, "keyed": True},
}
RESULTS_DIR = Path(os.environ.get("AWA_SOAK_RESULTS", Path(__file__).resolve().parents[1] / "output"))


@dataclass
class Step:
    from_shards: int
    to_shards: int
    apply_seconds: float
    converge_seconds: float
    drain_seconds: float | None


def rolling_restart(db, workers) -> None:
    for worker in workers:
        worker.restart()
        wait_for_live_runtimes(db, [worker.pid], 30)


def walk(db, fleet: Fleet, dwell: float) -> list[Step]:
    workers = [fleet.worker(name, [f"{QUEUE}=8"]) for name in ("w1", "w2")]
    for name, options in PRODUCERS.items():
        fleet.producer(name, QUEUE, **options)
    time.sleep(dwell)
    steps, current = [], 1
    for target in WALK:
        started = time.monotonic()
        applied = change(db, QUEUE, target)
        assert applied["changed"]
        committed = time.monotonic()
        rolling_restart(db, workers)
        info(db, wait="converged", timeout=120, queue=QUEUE)
        converged = time.monotonic()
        drained = None
        if target < current:
            info(db, wait="drained", timeout=120, queue=QUEUE)
            drained = time.monotonic() - converged
        steps.append(Step(current, target, round(committed - started, 3), round(converged - committed, 2),
                          None if drained is None else round(drained, 2)))
        current = target
        time.sleep(dwell)
    return steps


def report(db, fleet: Fleet, pg_major: int, steps: list[Step], label: str, tally: TerminalTally,
           tally_wait: float) -> dict:
    enqueued = enqueued_per_producer(db)
    handled = dict(db.query("SELECT tag, count(*) FROM testbed.completions GROUP BY 1"))
    summary = {
        "postgresql": pg_major, "run": label, "steps": [asdict(step) for step in steps],
        "enqueued": enqueued, "enqueued_total": sum(enqueued.values()),
        "handled_total": len(handled), "handled_twice": sum(1 for count in handled.values() if count > 1),
        "awa_completed": tally.completed, "awa_failed": tally.failed, "awa_tally": asdict(tally),
        "awa_tally_wait_seconds": tally_wait,
        "producer_errors": len(fleet.producer_errors()),
        "deadlocks_retried": fleet.retried_deadlocks(),
    }
    lines = [f"soak ({label}) on PostgreSQL {pg_major}",
             f"{'step':>8} {'apply s':>8} {'converge s':>11} {'drain s':>8}"]
    lines += [f"{step.from_shards:>3} -> {step.to_shards:<2} {step.apply_seconds:>8} {step.converge_seconds:>11} "
              f"{'-' if step.drain_seconds is None else step.drain_seconds:>8}" for step in steps]
    lines += [f"enqueued {summary['enqueued_total']} ({', '.join(f'{k} {v}' for k, v in enqueued.items())}); "
              f"completed {summary['awa_completed']} (Awa's tally, {tally_wait} s after the last handler), "
              f"handled twice {summary['handled_twice']}, "
              f"failed {tally.failed}, producer errors {summary['producer_errors']}, "
              f"deadlocks retried {summary['deadlocks_retried'] or 0}"]
    print("\n".join(lines))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"soak-{label}-pg{pg_major}.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary


@pytest.mark.parametrize("label, dwell", [
    pytest.param("short", 2.0, id="short"),
    pytest.param("long", 60.0, id="long", marks=pytest.mark.slow),
])
def test_walking_the_shard_count_loses_nothing(awa_db, fleet, pg_major, capsys, label, dwell):
    steps = walk(awa_db, fleet, dwell)
    for name in PRODUCERS:
        fleet.members[name].stop()
    tags = fleet.enqueued_tags(QUEUE)
    fleet.wait_all_completed(tags, timeout=120)
    # Awa commits a completion after the handler has recorded it: its tally may trail the handlers briefly.
    handlers_done = time.monotonic()
    tally = fleet.awa_tally_when_finished(QUEUE, len(tags), timeout=120)
    tally_wait = round(time.monotonic() - handlers_done, 2)
    final = info(awa_db, wait="drained", timeout=120, queue=QUEUE)["queues"][QUEUE]
    with capsys.disabled():
        summary = report(awa_db, fleet, pg_major, steps, label, tally, tally_wait)

    assert summary["producer_errors"] == 0, fleet.producer_errors()[:5]
    assert summary["handled_total"] == len(tags), "every enqueued job ran"
    assert summary["awa_completed"] == len(tags), "Awa counted each job's completion exactly once"
    assert summary["awa_failed"] == 0
    assert final["enqueue_shards"] == {QUEUE: 1} and final["depth_beyond_count"] == 0
    assert sum(summary["enqueued"].values()) == len(tags) > 100
