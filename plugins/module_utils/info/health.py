# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a bad change shows on the database side, for the rollout's health gates: its reads, and the ``health`` view.

Two statements in one READ ONLY transaction, whatever the number of queues
(only a wait with ``health`` reads them, so they live here rather than in
``schema``, which holds the reads more than one step makes):

* ``deadlocks``: the database's cumulative deadlock count
  (``pg_stat_database.deadlocks``) and when those statistics were last reset.
  A count change can make Awa 0.6.9 producers deadlock with each other
  (docs/awa-internals.md §6); a caller compares two readings.
* per physical queue, since its last recorded change (``since``):
  ``failed_jobs``, jobs that failed for good (``done_entries`` in state
  ``failed``, which Awa keeps for its failed retention, 72 hours by
  default, plus ``dlq_entries`` moved to the dead-letter queue), and
  ``retried_jobs``, jobs whose attempt failed since and that wait for their
  retry (``deferred_jobs`` in state ``retryable``) or were re-enqueued for it
  (``ready_entries`` with ``attempt`` above 0). Awa prunes a retried job's
  ready row once it is done, so ``retried_jobs`` counts the retries still
  visible: those in flight, not a total since the change.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict

from ansible_collections.awa.operations.plugins.module_utils.db.connection import one_row, sql, transaction
from ansible_collections.awa.operations.plugins.module_utils.info.result import (
    HealthView,
    PolledRead,
    QueueHealth,
    QueueView,
    StateRead,
)

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection


DEADLOCKS_SQL = """
SELECT deadlocks, stats_reset, now(), awa.active_queue_storage_schema()
FROM pg_stat_database WHERE datname = current_database()
"""

QUEUE_HEALTH_SQL = """
SELECT q.queue,
       (SELECT count(*) FROM {done} AS d
        WHERE d.queue = q.queue AND d.state = 'failed' AND d.finalized_at >= q.since)
       + (SELECT count(*) FROM {dlq} AS x WHERE x.queue = q.queue AND x.dlq_at >= q.since),
       (SELECT count(DISTINCT r.job_id) FROM (
            SELECT job_id FROM {deferred}
            WHERE queue = q.queue AND state = 'retryable' AND finalized_at >= q.since
            UNION ALL
            SELECT job_id FROM {ready} WHERE queue = q.queue AND attempt > 0 AND attempted_at >= q.since
        ) AS r)
FROM unnest(%(queues)s::text[], %(since)s::timestamptz[]) AS q(queue, since)
WHERE q.since IS NOT NULL
"""


class DatabaseHealth(TypedDict):
    """What fetch_health read: the database's deadlocks, and each physical queue's failed and retried jobs."""

    read_at: str
    deadlocks: int
    stats_reset: str | None
    # physical queue -> (failed jobs, retried jobs) since its ``since``.
    queues: dict[str, tuple[int, int]]


def fetch_health(conn: Connection, since: Mapping[str, datetime.datetime | None]) -> DatabaseHealth:
    """Deadlocks of the database, and failed and retried jobs of each physical queue since its ``since``.

    Runs in the caller's transaction. Queues whose ``since`` is None (no
    recorded change) get no job counts.
    """
    deadlocks, stats_reset, read_at, schema = one_row(conn.execute(DEADLOCKS_SQL))
    counts: dict[str, tuple[int, int]] = {}
    if schema is not None and any(value is not None for value in since.values()):
        rows = conn.execute(sql.SQL(QUEUE_HEALTH_SQL).format(
            done=sql.Identifier(schema, "done_entries"), dlq=sql.Identifier(schema, "dlq_entries"),
            deferred=sql.Identifier(schema, "deferred_jobs"), ready=sql.Identifier(schema, "ready_entries"),
        ), {"queues": list(since), "since": list(since.values())}).fetchall()
        counts = {queue: (failed, retried) for queue, failed, retried in rows}
    return {
        "read_at": read_at.isoformat(),
        "deadlocks": deadlocks,
        "stats_reset": stats_reset.isoformat() if stats_reset else None,
        "queues": counts,
    }


def _since(view: QueueView) -> dict[str, datetime.datetime | None]:
    """Physical queue -> when its last recorded change committed (None: never changed by the module)."""
    changes = view["last_change"]
    return {physical: datetime.datetime.fromisoformat(changes[physical]["changed_at"]) if physical in changes else None
            for physical in view["physical_queues"]}


def health_view(info: StateRead, read: DatabaseHealth, since: dict[str, datetime.datetime | None]) -> HealthView:
    """The ``health`` result key: the database's deadlocks and, per logical queue, its failed and retried jobs."""
    queues: dict[str, QueueHealth] = {}
    for name, view in info["queues"].items():
        physical = view["physical_queues"]
        known = [read["queues"][queue] for queue in physical if queue in read["queues"]]
        changed = [moment for queue in physical if (moment := since.get(queue)) is not None]
        queues[name] = {
            "since": min(changed).isoformat() if changed else None,
            "failed_jobs": sum(failed for failed, dummy in known) if known else None,
            "retried_jobs": sum(retried for dummy, retried in known) if known else None,
        }
    return {"read_at": read["read_at"], "deadlocks": read["deadlocks"], "stats_reset": read["stats_reset"],
            "queues": queues}


def add_health(conn: Connection, info: PolledRead, lock_timeout: float) -> None:
    """Put ``health`` into a read's result, from a READ ONLY transaction of its own."""
    since = {physical: moment for view in info["queues"].values() for physical, moment in _since(view).items()}
    with transaction(conn, "reading what the change shows (deadlocks, failed and retried jobs)",
                     lock_timeout=lock_timeout, read_only=True):
        read = fetch_health(conn, since)
    info["health"] = health_view(info, read, since)
