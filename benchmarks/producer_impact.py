"""2. What live producers see while the shard count is raised.

Three arms in the same run, each on a fresh queue of one database, S 1 -> 8:

* baseline: the producers run, nothing changes;
* raw upsert: the documented one-statement upsert, no lane provisioning;
* awa_enqueue_shards: the module's code (module_utils), lanes provisioned and
  the count switched in one transaction.

Producers are real awa-pg programs (tests/awa_testbed/producer.py), each its
own OS process: SQL-path ``insert`` producers firing bursts of concurrent
calls over a pool of connections (the SQL path picks the shard from the
backend pid, so many connections write many shards), plus one keyed
``enqueue_many_copy`` producer (direct COPY, key hash % S spreads every batch
over all shards). Right after the switch, several connections write their
first job into each new lane at the same moment: the race of docs/awa-internals.md §3.

Per arm: latency p50/p99/max and errors of the calls that started inside the
window (from ``window_before`` s before the switch started to
``window_after`` s after it ended), errors by type, and how many new shards
(>= 1) received jobs after the switch.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from awa_testbed.awadb import AwaDatabase
from awa_testbed import processes
from awa_testbed.processes import ManagedProcess

from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request

from . import environment, stats, tables
from .change_cost import RAW_UPSERT_SQL
from .environment import BenchServer

TARGET_SHARDS = 8
ARMS = ("baseline", "raw upsert", "awa_enqueue_shards")
TIMELINE_BUCKET = 0.25


@dataclass(frozen=True)
class Traffic:
    """The producer load and the timing of one arm."""

    insert_producers: int = 3
    burst: int = 8  # concurrent insert calls started together, per producer
    bursts_per_second: float = 5.0
    copy_batch: int = 20
    copy_batches_per_second: float = 5.0
    warmup_seconds: float = 4.0
    after_seconds: float = 5.0
    window_before: float = 1.0
    window_after: float = 3.0


def summary_path(program_name: str, log_dir: Path) -> Path:
    """Where a producer writes its JSON summary (every call: finish time, latency, ok)."""
    return log_dir / f"{program_name}.json"


def start_producers(db: AwaDatabase, queue: str, traffic: Traffic, log_dir: Path) -> list[ManagedProcess]:
    """The insert producers and the keyed COPY producer of one arm, started and ready."""
    common = {"record_dsn": db.dsn(), "log_dir": log_dir}
    inserts = [f"{queue}-insert{index}" for index in range(traffic.insert_producers)]
    programs = [processes.producer(name, db.url(), queue, mode="insert", rate=traffic.bursts_per_second,
                                   burst=traffic.burst, concurrency=traffic.burst, connections=traffic.burst,
                                   summary=summary_path(name, log_dir), **common)
                for name in inserts]
    copy = f"{queue}-copy"
    programs.append(processes.producer(copy, db.url(), queue, mode="enqueue_many_copy", keyed=True,
                                       batch=traffic.copy_batch, rate=traffic.copy_batches_per_second,
                                       concurrency=2, connections=2, summary=summary_path(copy, log_dir), **common))
    for program in programs:
        program.start()
    return programs


def switch(arm: str, conn, queue: str) -> None:
    """What happens at the switch in ``arm``."""
    if arm == "raw upsert":
        conn.execute(RAW_UPSERT_SQL, (queue, TARGET_SHARDS))
    elif arm == "awa_enqueue_shards":
        change_queues(conn, validate_request(queue, TARGET_SHARDS, new_queue=True))


def load_calls(program: ManagedProcess) -> list[tuple[float, float, bool]]:
    """(start unix time, latency ms, ok) of every call the producer made."""
    summary = json.loads(summary_path(program.name, program.log_dir).read_text(encoding="utf-8"))
    return [(finished - latency / 1000, latency, ok) for finished, latency, ok in summary["calls"]]


def errors_by_type(db: AwaDatabase, queue: str, since: float, until: float) -> dict[str, int]:
    rows = db.query(
        "SELECT error_type || CASE WHEN retried THEN ' (deadlock, retried)' ELSE '' END, count(*) "
        "FROM testbed.producer_errors WHERE producer LIKE %(prefix)s "
        "AND at BETWEEN to_timestamp(%(since)s) AND to_timestamp(%(until)s) GROUP BY 1 ORDER BY 1",
        {"prefix": f"{queue}-%", "since": since, "until": until})
    return dict(rows)


def new_shards_written(db: AwaDatabase, queue: str) -> int:
    return db.scalar("SELECT count(DISTINCT enqueue_shard) FROM awa.ready_entries "
                     "WHERE queue = %s AND enqueue_shard > 0", (queue,))


def timeline(calls: list[tuple[float, float, bool]], switch_at: float) -> list[dict]:
    """Calls grouped by start time, in TIMELINE_BUCKET-second steps relative to the switch."""
    buckets: dict[int, list[tuple[float, float, bool]]] = {}
    for call in calls:
        buckets.setdefault(int((call[0] - switch_at) // TIMELINE_BUCKET), []).append(call)
    return [{"from_s": round(index * TIMELINE_BUCKET, 3), "calls": len(group),
             "p50": stats.percentile([latency for dummy, latency, ok in group], 0.5),
             "max": max(latency for dummy, latency, ok in group),
             "errors": sum(1 for dummy, latency, ok in group if not ok)}
            for index, group in sorted(buckets.items())]


def run_arm(db: AwaDatabase, arm: str, queue: str, traffic: Traffic, log_dir: Path) -> dict:
    # Connected beforehand: connecting is not part of the switch.
    with environment.connect(db) as conn:
        conn.autocommit = arm == "raw upsert"
        programs = start_producers(db, queue, traffic, log_dir)
        try:
            time.sleep(traffic.warmup_seconds)
            started = time.time()
            switch(arm, conn, queue)
            ended = time.time()
            time.sleep(traffic.after_seconds)
        finally:
            for program in programs:
                program.stop()
    since, until = started - traffic.window_before, ended + traffic.window_after
    calls = [call for program in programs for call in load_calls(program)]
    in_window = [call for call in calls if since <= call[0] <= until]
    return {
        "arm": arm, "queue": queue, "switch_ms": round((ended - started) * 1000, 2),
        "window": stats.latency_summary([latency for dummy, latency, dummy_ok in in_window]),
        "window_latencies_ms": [round(latency, 2) for dummy, latency, dummy_ok in in_window],
        "window_errors": sum(1 for call in in_window if not call[2]),
        "errors_by_type": errors_by_type(db, queue, since, until),
        "all_calls": len(calls), "all_errors": sum(1 for call in calls if not call[2]),
        "new_shards_written": new_shards_written(db, queue),
        "timeline": timeline(in_window, started),
    }


def run(bench: BenchServer, traffic: Traffic, rounds: int, log_dir: Path) -> dict:
    """``rounds`` x (baseline, raw upsert, module), interleaved, each arm on a fresh queue."""
    db = bench.fresh_database()
    try:
        arms = [run_arm(db, arm, f"impact_r{round_index}_a{arm_index}", traffic, log_dir)
                for round_index in range(rounds) for arm_index, arm in enumerate(ARMS)]
    finally:
        db.drop()
    return {"traffic": traffic.__dict__, "target_shards": TARGET_SHARDS, "arms": arms}


def summary(result: dict) -> dict:
    """What the table and the chart read of a result: the rounds without their calls' latencies and timeline, and
    each arm's latencies pooled over the windows of all its rounds (a summary: itself)."""
    arms = [{key: value for key, value in run.items() if key not in ("window_latencies_ms", "timeline")}
            for run in result["arms"]]
    return result if "pooled" in result else {**result, "arms": arms, "pooled": {arm: stats.latency_summary(
        [ms for run in result["arms"] if run["arm"] == arm for ms in run["window_latencies_ms"]]) for arm in ARMS}}


def _arm_row(arm: str, runs: list[dict], pooled: dict) -> list:
    """One arm over its rounds: latencies pooled over every round's window, errors summed."""
    errors: dict[str, int] = {}
    for run_result in runs:
        for kind, count in run_result["errors_by_type"].items():
            errors[kind] = errors.get(kind, 0) + count
    window_errors = sum(run_result["window_errors"] for run_result in runs)
    calls = pooled["calls"]
    return [arm, len(runs), calls, pooled["p50"], pooled["p99"], pooled["max"],
            stats.median([r["window"]["p99"] for r in runs]), window_errors,
            f"{100 * window_errors / calls:.1f}%" if calls else "-",
            ", ".join(f"{kind} {count}" for kind, count in sorted(errors.items())) or "none",
            stats.median([r["new_shards_written"] for r in runs]), stats.median([r["switch_ms"] for r in runs])]


def table(major: int, result: dict) -> str:
    rows = [_arm_row(arm, [r for r in result["arms"] if r["arm"] == arm], result["pooled"][arm]) for arm in ARMS]
    traffic = result["traffic"]
    return tables.render(
        f"Producer impact, PostgreSQL {major}: S 1 -> {result['target_shards']} under load "
        "(enqueue latency ms over the windows of all rounds; errors summed)",
        ["arm", "rounds", "calls in window", "p50", "p99", "max", "p99 (median of rounds)", "errors", "error rate",
         "errors by type", "new shards written", "switch ms"],
        rows,
        f"Load per arm: {traffic['insert_producers']} insert producers x {traffic['burst']} concurrent calls "
        f"{traffic['bursts_per_second']:g} times a second, 1 keyed enqueue_many_copy producer "
        f"({traffic['copy_batch']} jobs x {traffic['copy_batches_per_second']:g}/s). Window: calls started from "
        f"{traffic['window_before']:g} s before the switch to {traffic['window_after']:g} s after it.")
