"""What the database says about a queue after a rollout, read independently of the collection.

The fleet scenario's molecule verify steps check the role's work with these
queries rather than with the info module they are testing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg

# Ready jobs per shard (summed over priorities), exactly as Awa counts them (docs/awa-internals.md §9).
READY_DEPTH_BY_SHARD_SQL = """
SELECT h.enqueue_shard, sum((
    SELECT count(*) FROM awa.ready_entries AS r
    WHERE r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
      AND r.lane_seq >= awa.sequence_next_value(c.seq_name)
      AND NOT EXISTS (SELECT 1 FROM awa.ready_tombstones AS t
                      WHERE t.queue = r.queue AND t.priority = r.priority AND t.enqueue_shard = r.enqueue_shard
                        AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot
                        AND t.ready_generation = r.ready_generation)))::int
FROM awa.queue_enqueue_heads AS h JOIN awa.queue_claim_heads AS c USING (queue, priority, enqueue_shard)
WHERE h.queue = %s
GROUP BY 1
"""

# Jobs reserved on every lane of a queue (lane sequences start at 1).
ENQUEUED_SQL = """
SELECT coalesce(sum(awa.sequence_next_value(seq_name) - 1), 0)::int8 FROM awa.queue_enqueue_heads WHERE queue = %s
"""

# Live runtimes: not shutting down and seen within Awa's own staleness window.
LIVE_RUNTIMES_SQL = """
SELECT instance_id::text, pid, started_at, healthy FROM awa.runtime_instances
WHERE NOT shutting_down
  AND last_seen_at + make_interval(secs => GREATEST(((GREATEST(snapshot_interval_ms, 1000) / 1000) * 3)::int, 30))
      >= now()
"""

# The ledger's last change that moved the count of a queue.
LAST_COUNT_CHANGE_SQL = """
SELECT id, changed_at, to_shards, live_runtime_ids::text[] FROM awa_operations.enqueue_shards_changes
WHERE %s = ANY(physical_queues) AND (from_shards ->> %s)::int IS DISTINCT FROM to_shards
ORDER BY id DESC LIMIT 1
"""


@dataclass(frozen=True)
class LiveRuntime:
    instance_id: str
    pid: int
    started_at: datetime
    healthy: bool


@dataclass(frozen=True)
class CountChange:
    change_id: int
    changed_at: datetime
    to_shards: int
    live_at_change: list[str]


def query(dsn: str, statement: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(statement, params).fetchall()


def ready_depth_by_shard(dsn: str, queue: str) -> dict[int, int]:
    """shard -> jobs ready to claim on it."""
    return dict(query(dsn, READY_DEPTH_BY_SHARD_SQL, (queue,)))


def ready_beyond(dsn: str, queue: str, shards: int) -> int:
    """Jobs ready to claim on the shards at or above ``shards``."""
    return sum(depth for shard, depth in ready_depth_by_shard(dsn, queue).items() if shard >= shards)


def enqueued(dsn: str, queue: str) -> int:
    """Jobs ever enqueued into ``queue`` (reserved on its lanes), whatever became of them."""
    return query(dsn, ENQUEUED_SQL, (queue,))[0][0]


def live_runtimes(dsn: str) -> list[LiveRuntime]:
    return [LiveRuntime(*row) for row in query(dsn, LIVE_RUNTIMES_SQL)]


def last_count_change(dsn: str, queue: str) -> CountChange:
    rows = query(dsn, LAST_COUNT_CHANGE_SQL, (queue, queue))
    assert rows, f"the ledger records no change of the count of {queue}"
    return CountChange(*rows[0])


def converged_on(change: CountChange, runtime: LiveRuntime, clock_margin: float) -> bool:
    """A runtime runs with the change's count: a new process, started after the commit (database clock)."""
    return (runtime.instance_id not in change.live_at_change
            and runtime.started_at.timestamp() >= change.changed_at.timestamp() - clock_margin)
