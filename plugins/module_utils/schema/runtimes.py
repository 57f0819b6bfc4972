# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Awa's worker runtimes, live or not, as ``awa.runtime_instances`` records them.

Part of the schema package, the reads of Awa's schema that the change and the read both make (installation.py says how they behave).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection, sql


# Awa's own liveness rule for runtime rows (docs/awa-internals.md §5), by the database clock.
LIVE_RUNTIME_PREDICATE = """NOT ri.shutting_down
  AND ri.last_seen_at + make_interval(secs => GREATEST(((GREATEST(ri.snapshot_interval_ms, 1000) / 1000) * 3)::int, 30))
      >= now()"""


@dataclass(frozen=True)
class Runtime:
    """One ``awa.runtime_instances`` row, with liveness judged by the database clock."""

    instance_id: str
    hostname: str | None
    pid: int
    version: str
    started_at: datetime.datetime
    last_seen_at: datetime.datetime
    live: bool
    shutting_down: bool
    healthy: bool
    leader: bool
    seconds_since_seen: float
    seconds_since_start: float
    # physical queue -> shard count, when the snapshot reports one (no released Awa does yet).
    reported_shards: dict[str, int] = field(default_factory=dict)


RUNTIMES_SQL = """
SELECT ri.instance_id::text, ri.hostname, ri.pid, ri.version, ri.started_at, ri.last_seen_at,
       {live} AS live, ri.shutting_down, ri.healthy, ri.leader,
       extract(epoch FROM now() - ri.last_seen_at)::float8,
       extract(epoch FROM now() - ri.started_at)::float8,
       ri.queues
FROM awa.runtime_instances AS ri
ORDER BY ri.started_at, ri.instance_id
"""


def reported_shard_counts(queues_snapshot: object) -> dict[str, int]:
    """Shard counts a runtime snapshot reports per queue, if its Awa version publishes them.

    Awa 0.6.9 snapshots carry none. A later version may add ``enqueue_shards``
    to a queue entry or to its ``config``; either is read.
    """
    entries = [entry for entry in (queues_snapshot if isinstance(queues_snapshot, list) else [])
               if isinstance(entry, dict) and isinstance(entry.get("queue"), str)]
    # In the snapshot's order: a later entry of a queue with a count wins.
    values = [(entry["queue"], entry.get("enqueue_shards", entry["config"].get("enqueue_shards")
                                         if isinstance(entry.get("config"), dict) else None)) for entry in entries]
    return {queue: value for queue, value in values if isinstance(value, int) and not isinstance(value, bool)}


def fetch_runtimes(conn: Connection) -> list[Runtime]:
    """Every runtime snapshot row, live or not."""
    rows = conn.execute(sql.SQL(RUNTIMES_SQL).format(live=sql.SQL(LIVE_RUNTIME_PREDICATE))).fetchall()
    # Runtime's fields in RUNTIMES_SQL's column order, its snapshot's queues last.
    return [Runtime(*(*row[:-1], reported_shard_counts(row[-1]))) for row in rows]
