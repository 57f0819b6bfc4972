# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which shard count a queue should have, from one window of its load and a measured gains table, and why in
words: the advice (``advise``) - its verdict, its message, its ordering consequence, its findings. Pure.

    advised = advise(queue_load(queue, physical, shards, sampled), sampled.tally, measured)

The rule (docs/performance.md, "Choosing the shard count"), whose branches
``advise`` takes in this order:

1. No enqueue and no lane wait in the window: keep (nothing to judge).
2. The enqueues went to one shard of several: keep, and a finding; those
   producers send everything to one shard whatever the count is.
3. Enqueuers wait on this queue's lane locks (at least ``CONTENDED`` of them
   per sample): raise to the smallest count that reaches the best measured
   gain for this load and path, if that gain is at least ``MIN_GAIN`` over
   the current count; otherwise sharding will not help and the limit is what
   the benchmark saw take over (or what the window saw: NOTIFY, WAL flush).
4. No lane contention, but commits wait (NOTIFY lock, WAL), the enqueuers
   run on CPU, or the backlog grows while claims lag: sharding will not help,
   and the limit is named.
5. More than one shard, no contention, and the measured gain of the current
   count over a lower one is under ``MIN_GAIN`` for this load: lower (after a
   drain).
6. Otherwise keep.

"Load" is the number of backends seen in an enqueue statement at once (the
benchmark's N producers, each with one call in flight), rounded down to a row
of the table; counts between the table's columns are judged by the column below.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.advice.load_window import ContentionTally, LoadWindow
from ansible_collections.awa.operations.plugins.module_utils.advice.result import Advice, AdviceEvidence

MIN_GAIN = 1.3  # the least measured gain worth a change of count (and its ordering cost)
NEAR_BEST = 0.95  # a count within 5% of the best measured gain is as good as the best
CONTENDED = 0.5  # lane-lock waiters per sample: half an enqueuer waiting, on average, all the time
QUIET = 0.1  # lane-lock waiters per sample below which the lanes are not a bottleneck
COMMIT_BOUND = 0.5  # NOTIFY-lock and WAL waiters per sample
CPU_BOUND = 0.6  # share of the enqueuers' samples on CPU, waiting on nothing
ONE_SHARD = 0.95  # share of a window's enqueues on its busiest shard that means "one shard"
MIN_JOBS = 20  # enqueues in a window below which its spread over shards says nothing
BACKLOG_GROWTH = 0.1  # lag growth, as a share of the window's enqueues, that means the claimers fall behind

NOTIFY_LIMIT, WAL_LIMIT, CPU_LIMIT, CLAIMERS_LIMIT = "NOTIFY at commit", "WAL flush", "CPU", "the claimers"
COPY_LANES_LIMIT = "the copy path's lane locks"


@dataclass(frozen=True)
class QueueLoad:
    """One logical queue's share of a window."""

    queue: str
    shards: int
    seconds: float
    enqueued: dict[int, int]  # shard -> jobs enqueued in the window (all priorities and stripes)
    claimed: int
    lag_before: int | None  # enqueued but not yet claimed, all lanes; None if a lane is unreadable
    lag_after: int | None
    lane_waiters: float  # backends waiting on this queue's lane locks, per sample
    lane_statements: dict[str, int]  # what those waiting backends ran: insert, copy, hidden


def queue_load(queue: str, physical_queues: list[str], shards: int, window: LoadWindow) -> QueueLoad:
    """A logical queue's share of a window: its physical queues' lanes, summed over priorities and stripes."""
    enqueued: Counter[int] = Counter()
    claimed, lag_before, lag_after, unreadable = 0, 0, 0, False
    for lane, (enqueue_after, claim_after) in window.cursors_after.items():
        if lane[0] not in physical_queues:
            continue
        # A lane created during the window counts from its first value.
        enqueue_before, claim_before = window.cursors_before.get(lane, (1, 1))
        if enqueue_before is None or claim_before is None or enqueue_after is None or claim_after is None:
            unreadable = True  # the backlog is unknown; the other lanes still count
            continue
        enqueued[lane[2]] += enqueue_after - enqueue_before
        claimed += claim_after - claim_before
        lag_before += enqueue_before - claim_before
        lag_after += enqueue_after - claim_after
    tally = window.tally
    statements = sum((tally.lane_statements.get(physical, Counter()) for physical in physical_queues), Counter())
    return QueueLoad(queue, shards, window.seconds, dict(enqueued), claimed, None if unreadable else lag_before,
                     None if unreadable else lag_after,
                     tally.per_sample(sum(tally.lane_waiters[physical] for physical in physical_queues)),
                     dict(statements))


def measured_row(table: Mapping[Any, Mapping[Any, Any]], load: int) -> tuple[int, dict[int, float]] | None:
    """The table's row for a load: the largest measured N at or below it (the smallest row if below all)."""
    # Keys are strings in the shipped table and may be integers in a table given as YAML (advise_gains).
    rows = {int(n): {int(s): float(gain) for s, gain in row.items()} for n, row in table.items()}
    if not rows:
        return None
    n = max([row for row in rows if row <= load] or [min(rows)])
    return n, rows[n]


def gain_at(gains: dict[int, float], shards: int) -> float:
    """The measured gain of ``shards``: its column's, or the column's below it."""
    return gains[max([s for s in gains if s <= shards] or [min(gains)])]


def raise_target(gains: dict[int, float], shards: int) -> int | None:
    """The smallest count within NEAR_BEST of the best measured gain, if that is MIN_GAIN over ``shards``."""
    current = gain_at(gains, shards)
    higher = {s: gain for s, gain in gains.items() if s > shards}
    best = max(higher.values(), default=0.0)
    if not current or best / current < MIN_GAIN:
        return None
    return min(s for s, gain in higher.items() if gain >= NEAR_BEST * best)


def lower_target(gains: dict[int, float], shards: int) -> int | None:
    """The smallest measured count that loses less than MIN_GAIN against ``shards``, if lower than it."""
    current = gain_at(gains, shards)
    return min((s for s, gain in gains.items() if s < shards and gain and current / gain < MIN_GAIN), default=None)


def commit_limit(tally: ContentionTally) -> str | None:
    notify, wal = tally.per_sample(tally.notify_waiters), tally.per_sample(tally.wal_waiters)
    return None if notify + wal < COMMIT_BOUND else NOTIFY_LIMIT if notify >= wal else WAL_LIMIT


def on_cpu(tally: ContentionTally) -> float:
    return tally.enqueuers_on_cpu / tally.enqueuers_active if tally.enqueuers_active else 0.0


# Why lane contention outlasts more shards, by what the benchmark saw take over at the largest count.
PAST_THE_LANE_LOCK = {
    COPY_LANES_LIMIT: "each enqueue_many_copy call reserves and locks every lane it writes and holds the locks until "
                      "it commits: without an ordering_key every call writes shard 0, and with keys a call writes up "
                      "to S lanes, so more shards add work to every call while the calls still queue on the lane "
                      "locks",
    CPU_LIMIT: "past the lane lock, the enqueuers run on CPU",
}

# What each limit other than the lanes means, when the lanes were not contended.
OTHER_LIMITS = {
    NOTIFY_LIMIT: "commits waited on the NOTIFY lock, which every shard shares",
    WAL_LIMIT: "commits waited on the WAL flush, which every shard shares",
    CPU_LIMIT: "the enqueuers ran on CPU, not waiting on a lock that shards would split",
    CLAIMERS_LIMIT: "the backlog grew by {lag_growth} while claims lagged: add workers or slots; more shards make each "
                    "claim scan more lanes",
}
HIDDEN_BACKENDS = ("Some backends' wait events and statements were hidden from this role: grant it pg_monitor "
                   "(pg_read_all_stats) so the advice sees what every enqueuer waits on.")


def ordering_consequence(shards: int, to: int) -> str:
    if to == shards:
        return f"Nothing changes: jobs keep their order per shard over {shards} shard(s)."
    if to > shards:
        return (f"Raising {shards} -> {to}: ordering_key routing moves from hash mod {shards} to hash mod {to}, so "
                "per-key FIFO does not hold between jobs enqueued before and after the change while the older ones "
                f"remain; jobs without a key are ordered per shard only; every claim scans {to} lanes per priority.")
    return (f"Lowering {shards} -> {to}: new jobs go to {to} shard(s) and keys remap (hash mod {to}); wait until the "
            f"shards {to} and above have drained (wait: drained) before relying on their order again.")


def advise(load: QueueLoad, tally: ContentionTally, measured: Mapping[str, Any]) -> Advice:
    """The advice for one queue, by the rule's branches in their order: verdict, target count, limit, why, the
    evidence used, the ordering consequence and the findings."""
    total, busiest = sum(load.enqueued.values()), max(load.enqueued.values(), default=0)
    shards, waiters = load.shards, load.lane_waiters
    # Which measured path the enqueuers take: the SQL insert, or the copy (keyed when it spreads over shards).
    statements = Counter(tally.enqueue_statements)
    statements.update({kind: count for kind, count in load.lane_statements.items() if kind in ("insert", "copy")})
    path = ("insert" if not statements or statements["insert"] >= statements["copy"] else
            "copy_keyed" if shards == 1 or len([s for s, n in load.enqueued.items() if n]) > 1 else "copy")
    # Backends enqueuing at once: the peak seen, or (statements hidden) the waiters plus the one holding the lock.
    concurrency = tally.peak_enqueuers or max(1, round(waiters) + 1)
    row = measured_row(measured.get("gains", {}).get(path, {}), concurrency)
    # What the window showed, as the advice used it.
    seen: AdviceEvidence = {
        "window_seconds": load.seconds, "samples": tally.samples,
        "enqueued_per_s": round(total / load.seconds, 1) if load.seconds else 0.0,
        "claimed_per_s": round(load.claimed / load.seconds, 1) if load.seconds else 0.0,
        "enqueued_by_shard": {str(s): n for s, n in sorted(load.enqueued.items())},
        "busiest_shard_share": round(busiest / total, 3) if total else None,
        "lag_growth": None if load.lag_before is None or load.lag_after is None else load.lag_after - load.lag_before,
        "lane_lock_waiters": load.lane_waiters, "notify_lock_waiters": tally.per_sample(tally.notify_waiters),
        "wal_waiters": tally.per_sample(tally.wal_waiters), "enqueuers_on_cpu_share": round(on_cpu(tally), 3),
        "concurrent_enqueuers": concurrency, "path": path, "hidden_backend_samples": tally.hidden,
        "measured_row": {"producers": row[0], "gains": {str(s): g for s, g in sorted(row[1].items())}} if row else None,
    }
    findings = [HIDDEN_BACKENDS] if tally.hidden else []

    def advice(verdict: str, to: int, why: str, limit: str | None = None) -> Advice:
        said = {"raise": f"raise enqueue_shards {shards} -> {to}", "keep": f"keep enqueue_shards {shards}",
                "lower": f"lower enqueue_shards {shards} -> {to} (after a drain)",
                "will_not_help": f"sharding will not help: the limit is {limit}"}[verdict]
        return {"verdict": verdict, "shards": shards, "to": to, "limit": limit, "evidence": seen,
                "message": f"{load.queue}: {said}. {why}", "ordering": ordering_consequence(shards, to),
                "findings": findings}

    if total == 0 and waiters == 0:
        return advice("keep", shards, "No job was enqueued in the window: nothing to judge; advise again under the "
                                      "load that matters.")
    if shards > 1 and total >= MIN_JOBS and busiest / total >= ONE_SHARD:
        findings.append(
            f"{load.queue}: {busiest} of {total} jobs in the window went to shard "
            f"{max(load.enqueued, key=lambda shard: load.enqueued[shard])} of {shards}. Producers that send everything "
            "to one shard do so whatever the count is: Awa's Python enqueue_many_copy without an ordering_key always "
            "writes shard 0 (a new store per call), and the SQL path picks pg_backend_pid() % S, one shard per "
            "connection. Give those jobs an ordering_key, or insert them one at a time, to spread them.")
        return advice("keep", shards, "More shards would not spread these producers; see the finding.")
    if waiters >= CONTENDED:
        if row is None:
            return advice("keep", shards, f"The lanes are contended, but the gains table has no measurement of the "
                                          f"{path} path to judge a change by.")
        producers, gains = row
        target = raise_target(gains, shards)
        if target is not None:
            keyed_only = (" The copy producers spread over shards only with an ordering_key on their jobs."
                          if path == "copy_keyed" else "")
            gain = gains[target] / gain_at(gains, shards)
            return advice("raise", target, f"{waiters} enqueuers per sample waited on its lane locks; with {producers} "
                          f"producer(s) on the {path} path the benchmark measured x{gain:.2f} at {target} shards over "
                          f"{shards}.{keyed_only}")
        limits = {int(n): limit for n, limit in measured.get("limits", {}).get(path, {}).items()}
        limit = commit_limit(tally) or limits.get(producers) or NOTIFY_LIMIT
        past = PAST_THE_LANE_LOCK.get(limit, "past the lane lock, commits serialize")
        return advice("will_not_help", shards, f"{waiters} enqueuers per sample waited on its lane locks, but with "
                      f"{producers} producer(s) on the {path} path no count measured x{MIN_GAIN} over {shards}: "
                      f"{past}.", limit)
    # Another limit: commits, the enqueuers' CPU, or claimers falling behind (on_cpu is 0 without enqueuers).
    lag = seen["lag_growth"]
    other = (commit_limit(tally) or (CPU_LIMIT if on_cpu(tally) >= CPU_BOUND else None)
             or (CLAIMERS_LIMIT if lag is not None and lag > max(MIN_JOBS, BACKLOG_GROWTH * total) else None))
    if other is not None:
        return advice("will_not_help", shards, f"The lanes were not contended ({waiters} waiters per sample); "
                      f"{OTHER_LIMITS[other].format(lag_growth=lag)}.", other)
    if shards > 1 and waiters < QUIET and row is not None:
        target = lower_target(row[1], shards)
        if target is not None:
            return advice("lower", target, f"Its lanes were quiet ({waiters} waiters per sample) and with {row[0]} "
                          f"producer(s) on the {path} path the benchmark measured less than x{MIN_GAIN} for "
                          f"{shards} shards over {target}.")
    return advice("keep", shards, f"The lanes were not contended ({waiters} waiters per sample) and nothing else "
                                  "limited the enqueues in the window.")
