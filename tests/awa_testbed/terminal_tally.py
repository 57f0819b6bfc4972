"""Awa's own tally of a queue's finished jobs, computed the way Awa computes it, in one snapshot.

Awa 0.6.9's exact count (``QueueStorage::queue_counts_exact`` in its Rust
source, reading tables the installed schema has; docs/awa-internals.md
"Counting finished jobs") adds:

* the pruned rollups: per (queue, priority), the larger of
  ``queue_lanes.pruned_completed_count`` (a legacy column) and
  ``queue_terminal_rollups.pruned_completed_count``, plus
  ``queue_terminal_rollups.pruned_failed_count``;
* the live terminal rows: with the terminal counter trusted
  (``queue_ring_state.terminal_counter_trusted_at`` set, as on every fresh
  0.6.9 database) the folded ``queue_terminal_live_counts``, the unfolded
  ``queue_terminal_count_deltas`` and the ``completed_count`` of retained
  ``receipt_completion_batches``, minus ``receipt_completion_tombstones``
  (never below 0); without it, a count of ``awa.terminal_jobs``.

Awa's maintenance folds a slot into the rollups (or deltas into the live
counts) and TRUNCATEs the slot's partitions in one transaction. TRUNCATE is
not MVCC-safe: a reader whose snapshot predates that commit but who locks a
partition after it sees the partition empty and the fold not yet made, and
misses those jobs. REPEATABLE READ does not prevent it (the snapshot is taken
at the first query, the partitions are locked when each is first read). So
the read takes ACCESS SHARE on every table it reads first (LOCK TABLE takes
no snapshot), in the order Awa's prune locks them, and only then reads: no
TRUNCATE can land inside it, and a fold that committed before is seen whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

# The tables the tally reads, in the order Awa's prune locks a slot's partitions (ready, done, receipt batches,
# receipt tombstones, deltas), then the unpartitioned ones: a prune waiting for us never holds what we wait for.
READ_TABLES = ("awa.ready_entries", "awa.done_entries", "awa.receipt_completion_batches",
               "awa.receipt_completion_tombstones", "awa.queue_terminal_count_deltas", "awa.queue_terminal_live_counts",
               "awa.queue_terminal_rollups", "awa.queue_lanes", "awa.queue_ring_state", "awa.dlq_entries")
LOCK_SQL = f"LOCK TABLE {', '.join(READ_TABLES)} IN ACCESS SHARE MODE"

TALLY_SQL = """
WITH pruned AS (
    SELECT coalesce(sum(greatest(coalesce(lanes.pruned_completed_count, 0),
                                 coalesce(rollups.pruned_completed_count, 0))), 0)::bigint AS completed,
           coalesce(sum(coalesce(rollups.pruned_failed_count, 0)), 0)::bigint AS failed
    FROM (SELECT queue, priority, pruned_completed_count FROM awa.queue_lanes WHERE queue = ANY(%(queues)s)) AS lanes
    FULL JOIN (SELECT queue, priority, pruned_completed_count, pruned_failed_count FROM awa.queue_terminal_rollups
               WHERE queue = ANY(%(queues)s)) AS rollups USING (queue, priority)
), counted AS (
    SELECT greatest(0,
        coalesce((SELECT sum(live_terminal_count) FROM awa.queue_terminal_live_counts WHERE queue = ANY(%(queues)s)), 0)
        + coalesce((SELECT sum(terminal_delta) FROM awa.queue_terminal_count_deltas WHERE queue = ANY(%(queues)s)), 0)
        + coalesce((SELECT sum(completed_count) FROM awa.receipt_completion_batches WHERE queue = ANY(%(queues)s)), 0)
        - (SELECT count(*) FROM awa.receipt_completion_tombstones WHERE queue = ANY(%(queues)s)))::bigint AS terminal
)
SELECT pruned.completed, pruned.failed,
       CASE WHEN (SELECT terminal_counter_trusted_at IS NOT NULL FROM awa.queue_ring_state WHERE singleton)
            THEN (SELECT terminal FROM counted)
            ELSE (SELECT count(*) FROM awa.terminal_jobs WHERE queue = ANY(%(queues)s)) END,
       (SELECT count(*) FROM awa.done_entries WHERE queue = ANY(%(queues)s) AND state <> 'completed'),
       (SELECT count(*) FROM awa.dlq_entries WHERE queue = ANY(%(queues)s))
FROM pruned
"""


PHYSICAL_QUEUES_SQL = """
SELECT coalesce(array_agg(DISTINCT queue), '{}') FROM awa.queue_lanes
WHERE queue = %(queue)s OR left(queue, length(%(queue)s) + 1) = %(queue)s || '#'
"""


@dataclass(frozen=True)
class TerminalTally:
    """Finished jobs of a queue (all its physical queues), by Awa's exact count."""

    pruned_completed: int
    pruned_failed: int
    # Terminal rows not yet pruned: completed, failed and cancelled alike (Awa's counters do not tell them apart).
    live_terminal: int
    # Of those, the rows that did not complete (failed or cancelled).
    live_not_completed: int
    dead_lettered: int

    @property
    def terminal(self) -> int:
        """Awa's exact terminal count (queue_counts_exact): pruned and live, completed or not."""
        return self.pruned_completed + self.pruned_failed + self.live_terminal

    @property
    def completed(self) -> int:
        return self.pruned_completed + self.live_terminal - self.live_not_completed

    @property
    def failed(self) -> int:
        """Failed or cancelled, pruned or not, and dead-lettered."""
        return self.pruned_failed + self.live_not_completed + self.dead_lettered


def read_tally(dsn: str, queue: str) -> TerminalTally:
    """Awa's tally of logical ``queue``, read in one snapshot that no partition TRUNCATE can split."""
    with psycopg.connect(dsn) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with conn.transaction():
            # Before any query: the snapshot is taken by the first query, once these locks are held.
            conn.execute(LOCK_SQL)
            physical = conn.execute(PHYSICAL_QUEUES_SQL, {"queue": queue}).fetchone()[0]
            row = conn.execute(TALLY_SQL, {"queues": physical}).fetchone()
    return TerminalTally(*(int(value) for value in row))
