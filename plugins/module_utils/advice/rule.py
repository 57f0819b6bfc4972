# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the advice decides by: a queue's share of one window of load, the measured gains table, the thresholds. Pure.

The rule (docs/performance.md, "Choosing the shard count"), which explained.py
applies and says in words (``explained.advise``):

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

from ansible_collections.awa.operations.plugins.module_utils.advice.contention import ContentionTally
from ansible_collections.awa.operations.plugins.module_utils.advice.load_window import LoadWindow
from ansible_collections.awa.operations.plugins.module_utils.advice.result import AdviceEvidence

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
    lower = sorted(s for s, gain in gains.items() if s < shards and gain and current / gain < MIN_GAIN)
    return lower[0] if lower else None


def enqueue_path(tally: ContentionTally, load: QueueLoad) -> str:
    """Which measured path the enqueuers take: the SQL insert, or the copy (keyed when it spreads over shards)."""
    statements = Counter(tally.enqueue_statements)
    statements.update({kind: count for kind, count in load.lane_statements.items() if kind in ("insert", "copy")})
    if not statements or statements["insert"] >= statements["copy"]:
        return "insert"
    return "copy_keyed" if load.shards == 1 or len([s for s, n in load.enqueued.items() if n]) > 1 else "copy"


def observed_load(tally: ContentionTally, load: QueueLoad) -> int:
    """Backends enqueuing at once: the peak seen, or (statements hidden) the waiters plus the one holding the lock."""
    return tally.peak_enqueuers or max(1, round(load.lane_waiters) + 1)


def commit_limit(tally: ContentionTally) -> str | None:
    notify, wal = tally.per_sample(tally.notify_waiters), tally.per_sample(tally.wal_waiters)
    if notify + wal < COMMIT_BOUND:
        return None
    return NOTIFY_LIMIT if notify >= wal else WAL_LIMIT


def evidence(load: QueueLoad, tally: ContentionTally, path: str, concurrency: int,
             row: tuple[int, dict[int, float]] | None) -> AdviceEvidence:
    """What the window showed, as the advice used it."""
    total = sum(load.enqueued.values())
    busiest = max(load.enqueued.values(), default=0)
    return {
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


def on_cpu(tally: ContentionTally) -> float:
    return tally.enqueuers_on_cpu / tally.enqueuers_active if tally.enqueuers_active else 0.0
