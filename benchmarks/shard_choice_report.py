"""From what the shard-choice suite records to its numbers and Markdown tables.

Pure functions (no database, no clock): per-window statistics from the
producers' and the worker's summaries and from two reads of the lane
sequences, cell summaries over the repeats (what a results file keeps), and
the tables for the terminal and docs/performance.md. ``bash benchmarks/run.sh --tables RESULT.json
--suites shard_choice`` prints them again from a recorded run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from . import stats, tables

Calls = Sequence[Sequence]  # (finish unix time, latency ms, ok) per call, as the test bed producer records them
TOP_WAITS = 3


# ---------------------------------------------------------------------------
# One window


# Both sequences of a lane start at 1 (docs/awa-internals.md §3), so a lane created between two reads started there.
NEW_LANE_CURSORS = (1, 1)


def lane_deltas(before: dict[str, Sequence[int]], after: dict[str, Sequence[int]]) -> dict[str, dict]:
    """Jobs enqueued and claimed per lane ('priority/shard') between two cursor reads; idle lanes left out."""
    deltas = {}
    for lane, (enqueue_after, claim_after) in after.items():
        enqueue_before, claim_before = before.get(lane, NEW_LANE_CURSORS)
        enqueued, claimed = enqueue_after - enqueue_before, claim_after - claim_before
        if enqueued or claimed:
            deltas[lane] = {"enqueued": enqueued, "claimed": claimed}
    return deltas


def function_deltas(before: dict[str, dict], after: dict[str, dict]) -> dict[str, dict]:
    """Calls and milliseconds of each tracked function between two reads of pg_stat_user_functions."""
    deltas = {}
    for name, now in after.items():
        then = before.get(name, {"calls": 0, "total_ms": 0.0, "self_ms": 0.0})
        deltas[name] = {"calls": now["calls"] - then["calls"],
                        "total_ms": round(now["total_ms"] - then["total_ms"], 3),
                        "self_ms": round(now["self_ms"] - then["self_ms"], 3)}
    return deltas


def _latencies(values: Sequence[float]) -> dict:
    return {"p50": _round(stats.percentile(values, 0.50)), "p99": _round(stats.percentile(values, 0.99)),
            "max": _round(max(values) if values else None)}


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def enqueue_stats(calls_per_producer: Iterable[Calls], batch: int, started: float, ended: float) -> dict:
    """Calls that started inside [started, ended] (so into the window's queue): throughput (``batch`` jobs an
    ok call) and latency."""
    window = [call for calls in calls_per_producer for call in calls
              if started <= call[0] - call[1] / 1000 <= ended]
    ok = [latency for dummy, latency, succeeded in window if succeeded]
    seconds = ended - started
    return {"calls": len(window), "errors": len(window) - len(ok), "jobs": len(ok) * batch,
            "jobs_per_s": round(len(ok) * batch / seconds, 1), "calls_per_s": round(len(ok) / seconds, 1),
            "latency_ms": _latencies(ok)}


def completion_stats(created_at: Sequence[float], handled_at: Sequence[float], started: float, ended: float) -> dict:
    """Jobs whose handler ended inside the window (rate), and enqueue-to-handler-end latency of the jobs
    created inside it (however late they ran)."""
    e2e = [1000 * (handled - created) for created, handled in zip(created_at, handled_at)
           if started <= created <= ended]
    done = sum(1 for handled in handled_at if started <= handled <= ended)
    return {"completed_per_s": round(done / (ended - started), 1), "created_in_window": len(e2e),
            "e2e_ms": _latencies(e2e)}


def shard_counts(lanes: dict[str, dict], key: str = "enqueued") -> dict[int, int]:
    """Jobs per shard, summed over priorities."""
    counts: Counter = Counter()
    for lane, delta in lanes.items():
        counts[int(lane.split("/")[1])] += delta[key]
    return {shard: count for shard, count in sorted(counts.items()) if count}


def mean_per_sample(histogram: dict[str, int]) -> float | None:
    """Mean of a {value: samples} histogram (keys are strings in JSON)."""
    samples = sum(histogram.values())
    return sum(int(value) * count for value, count in histogram.items()) / samples if samples else None


def episode_line(windows: list[dict]) -> str:
    """One progress line for an episode: jobs/s per S."""
    first = windows[0]
    per_s = ", ".join(f"S={w['shards']} {w['enqueue']['jobs_per_s']:.0f}/s"
                      for w in sorted(windows, key=lambda w: w["shards"]))
    return f"{first['path']} N={first['producers']} repeat {first['repeat'] + 1}: {per_s}"


# ---------------------------------------------------------------------------
# Cells over repeats


def _spread(values: Sequence[float]) -> dict:
    summary = stats.summary(values)
    return {key: _round(value) if isinstance(value, float) else value for key, value in summary.items()}


def _pooled_shares(counters: Iterable[dict[str, int]]) -> dict[str, float]:
    total: Counter = Counter()
    for counter in counters:
        total.update(counter)
    samples = sum(total.values())
    return {label: round(count / samples, 3) for label, count in total.most_common()} if samples else {}


def summarize_cells(windows: list[dict]) -> dict[tuple[str, int, int], dict]:
    """(path, producers, shards) -> the cell over its repeats; gains are paired with the lowest S of the
    same episode (same producer processes and backends)."""
    by_episode: dict[tuple[str, int, int], dict[int, dict]] = {}
    for window in windows:
        by_episode.setdefault((window["path"], window["producers"], window["repeat"]), {})[window["shards"]] = window
    cells: dict[tuple[str, int, int], list[tuple[dict, float | None]]] = {}
    for (path, producers, dummy_repeat), per_shards in by_episode.items():
        baseline = per_shards[min(per_shards)]["enqueue"]["jobs_per_s"]
        for shards, window in per_shards.items():
            gain = window["enqueue"]["jobs_per_s"] / baseline if baseline else None
            cells.setdefault((path, producers, shards), []).append((window, gain))
    return {key: _cell(key, entries) for key, entries in sorted(cells.items())}


def _cell(key: tuple[str, int, int], entries: list[tuple[dict, float | None]]) -> dict:
    path, producers, shards = key
    windows = [window for window, dummy in entries]
    gains = [gain for dummy, gain in entries if gain is not None]

    def median_of(get) -> float | None:
        return _round(stats.median([value for value in map(get, windows) if value is not None]))

    def share_of_largest(window: dict) -> float | None:
        counts = shard_counts(window["lanes"])
        return max(counts.values()) / sum(counts.values()) if counts else None

    def per_claim(window: dict) -> tuple[float | None, float | None]:
        claims = window["functions"].get("claim_ready_runtime", {"calls": 0, "total_ms": 0.0})
        claimed = sum(shard_counts(window["lanes"], "claimed").values())
        if not claims["calls"]:
            return None, None
        return claims["total_ms"] / claims["calls"], claimed / claims["calls"]

    return {
        "path": path, "producers": producers, "shards": shards, "repeats": len(windows),
        "jobs_per_s": _spread([w["enqueue"]["jobs_per_s"] for w in windows]),
        "gain": _spread(gains),
        "enqueue_p50_ms": median_of(lambda w: w["enqueue"]["latency_ms"]["p50"]),
        "enqueue_p99_ms": median_of(lambda w: w["enqueue"]["latency_ms"]["p99"]),
        "errors": sum(w["enqueue"]["errors"] for w in windows),
        "shards_hit": [len(shard_counts(w["lanes"])) for w in windows],
        "pid_shards": [len({pid % shards for pid in w["producer_pids"]}) for w in windows],
        "largest_shard_share": median_of(share_of_largest),
        "lane_lock_waiters": median_of(lambda w: mean_per_sample(w["waits"]["lane_waiters_per_sample"])),
        "notify_lock_waiters": median_of(lambda w: mean_per_sample(w["waits"]["notify_waiters_per_sample"])),
        "producer_waits": _pooled_shares(w["waits"]["waits"].get("producer", {}) for w in windows),
        "worker_waits": _pooled_shares(w["waits"]["waits"].get("worker", {}) for w in windows),
        "completed_per_s": median_of(lambda w: w["completion"]["completed_per_s"]),
        "e2e_p50_ms": median_of(lambda w: w["completion"]["e2e_ms"]["p50"]),
        "e2e_p99_ms": median_of(lambda w: w["completion"]["e2e_ms"]["p99"]),
        "backlog_end": median_of(lambda w: sum(lane["ready"] for lane in w["backlog_end"].values())),
        "drain_s": median_of(lambda w: w["drain"]["seconds"]),
        "undrained": sum(1 for w in windows if not w["drain"]["drained"]),
        "claim_ms": median_of(lambda w: per_claim(w)[0]),
        "jobs_per_claim": median_of(lambda w: per_claim(w)[1]),
        "drain_jobs_per_claim": median_of(lambda w: per_claim(w["drain"])[1] if "lanes" in w["drain"] else None),
        "wal_syncs_per_s": median_of(lambda w: w["wal_syncs"] / w["seconds"]),
        "calls_per_wal_sync": median_of(lambda w: w["enqueue"]["calls_per_s"] * w["seconds"] / w["wal_syncs"]
                                        if w["wal_syncs"] else None),
    }


def summary(result: dict) -> dict:
    """What the tables, the chart and benchmarks/shard_gains.py read of a result: the matrix, the definitions, the
    median sampling interval and the cells over their repeats, not the windows' samples (a summary: itself)."""
    if "windows" not in result:
        return result
    interval = stats.median([w["waits"]["interval_ms"] for w in result["windows"] if w["waits"]["interval_ms"]])
    return {"matrix": result["matrix"], "definitions": result["definitions"], "interval_ms": interval,
            "cells": list(summarize_cells(result["windows"]).values())}


def cells_of(result: dict) -> dict[tuple[str, int, int], dict]:
    """(path, producers, shards) -> the cell, of a result or its summary."""
    return {(cell["path"], cell["producers"], cell["shards"]): cell for cell in summary(result)["cells"]}


# ---------------------------------------------------------------------------
# Markdown


def _number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _top(shares: dict[str, float]) -> str:
    return ", ".join(f"{label} {share:.0%}" for label, share in list(shares.items())[:TOP_WAITS]) or "-"


def _gain(cell: dict, baseline: bool) -> str:
    gain = cell["gain"]
    if baseline or gain["median"] is None:
        return ""
    spread = f" [{gain['min']:.2f}-{gain['max']:.2f}]" if cell["repeats"] > 1 else ""
    return f" x{gain['median']:.2f}{spread}"


def _throughput(cell: dict) -> str:
    spread = cell["jobs_per_s"]
    text = _number(spread["median"])
    return f"{text} [{_number(spread['min'])}-{_number(spread['max'])}]" if cell["repeats"] > 1 else text


def matrix_table(major: int, result: dict, cells: dict) -> str:
    matrix, interval = result["matrix"], result["interval_ms"]
    shards, baseline = matrix["shards"], min(matrix["shards"])
    rows = []
    for path in matrix["paths"]:
        for producers in matrix["producers"]:
            row = [path, producers]
            for count in shards:
                cell = cells.get((path, producers, count))
                row.append("-" if cell is None
                           else _number(cell["jobs_per_s"]["median"]) + _gain(cell, count == baseline))
            rows.append(row)
    return tables.render(
        f"Shard choice, PostgreSQL {major}: enqueue throughput (jobs/s, median of {matrix['repeats']}) "
        f"and gain over S={baseline}",
        ["path", "producers", *[f"S={count}" for count in shards]], rows,
        f"Gain: median [min-max] of the per-repeat ratios to S={baseline} measured by the same producer processes. "
        f"Paths: insert = awa-pg insert (SQL awa.insert_job_compat, 1 job a call); copy = enqueue_many_copy "
        f"({matrix['copy_batch']} jobs a call, no ordering key); copy_keyed = the same with an ordering key per job. "
        f"Each producer is its own process with one connection and one call in flight; "
        f"{matrix['worker_runtimes']} worker runtimes ({matrix['worker_slots']} slots each) serve the queue. "
        f"Windows of {matrix['window_seconds']:g} s; "
        f"pg_stat_activity and pg_locks sampled every {_number(interval, 1)} ms (median).")


def producer_table(major: int, path: str, result: dict, cells: dict) -> str:
    rows = []
    for (cell_path, producers, shards), cell in cells.items():
        if cell_path != path:
            continue
        rows.append([producers, shards, _throughput(cell), _number(cell["enqueue_p50_ms"], 2),
                     _number(cell["enqueue_p99_ms"], 2), f"{'/'.join(map(str, cell['shards_hit']))} of {shards}",
                     "/".join(map(str, cell["pid_shards"])),
                     "-" if cell["largest_shard_share"] is None else f"{cell['largest_shard_share']:.0%}",
                     _number(cell["lane_lock_waiters"], 1), _number(cell["notify_lock_waiters"], 1),
                     _top(cell["producer_waits"]), cell["errors"]])
    window = result["matrix"]["window_seconds"]
    return tables.render(
        f"Shard choice, PostgreSQL {major}, {path}: producers",
        ["N", "S", "jobs/s [min-max]", "call p50 ms", "call p99 ms", "shards hit (per repeat)", "pid % S shards",
         "largest shard",
         "lane-lock waiters", "NOTIFY-lock waiters", "producer backends (top 3)", "errors"], rows,
        f"Each repeat is a {window:g} s window; calls count when they start in it. Call latency: median over "
        "repeats of each window's p50/p99. "
        "Shards hit and largest shard: from the lane sequences (jobs enqueued per shard); pid % S shards: "
        "how many shards the producers' backend pids map to (the SQL path's choice). Waiters: mean number "
        "of backends waiting on a lane's advisory locks (reservation or insert) / on the NOTIFY commit lock per "
        "pg_locks sample. "
        "Producer backends: share of the producers' backend samples (CPU = active, no wait event; idle = "
        "between calls, client side).")


def worker_table(major: int, path: str, cells: dict) -> str:
    rows = []
    for (cell_path, producers, shards), cell in cells.items():
        if cell_path != path:
            continue
        rows.append([producers, shards, _number(cell["completed_per_s"]), _number(cell["e2e_p50_ms"], 1),
                     _number(cell["e2e_p99_ms"], 1), _number(cell["backlog_end"]),
                     _number(cell["drain_s"], 1) + (f" ({cell['undrained']} undrained)" if cell["undrained"] else ""),
                     _number(cell["claim_ms"], 2), _number(cell["jobs_per_claim"], 1),
                     _number(cell["drain_jobs_per_claim"], 1),
                     _number(cell["wal_syncs_per_s"]), _number(cell["calls_per_wal_sync"], 2),
                     _top(cell["worker_waits"])])
    return tables.render(
        f"Shard choice, PostgreSQL {major}, {path}: workers and the server",
        ["N", "S", "completed/s", "e2e p50 ms", "e2e p99 ms", "backlog at end", "drain s", "claim ms",
         "jobs per claim", "jobs per claim (drain)", "WAL syncs/s", "enqueue calls per WAL sync",
         "worker backends (top 3)"], rows,
        "e2e: job created_at to its handler's end, jobs created in the window. Claim ms and "
        "jobs per claim: awa.claim_ready_runtime from pg_stat_user_functions (flushed by backends about once a "
        "second, so approximate), in the window and while the workers drained the backlog after it. "
        "WAL syncs: the whole server's, workers included.")


def definitions_table(major: int, result: dict) -> str:
    rows = [[check["claim"], check["function"], check["match"] or "NOT FOUND"] for check in result["definitions"]]
    return tables.render(f"Shard choice, PostgreSQL {major}: what the live Awa 0.6.9 definitions say",
                         ["claim", "function", "matching text (pg_get_functiondef)"], rows)


def tables_markdown(major: int, result: dict) -> str:
    """Every table of one server's result (or its summary), in the order docs/performance.md shows them."""
    result, cells = summary(result), cells_of(result)
    parts = [matrix_table(major, result, cells)]
    for path in result["matrix"]["paths"]:
        parts += [producer_table(major, path, result, cells), worker_table(major, path, cells)]
    parts.append(definitions_table(major, result))
    return "\n".join(parts)
