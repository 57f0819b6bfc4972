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
from typing import TYPE_CHECKING

from ansible_collections.awa.operations.plugins.module_utils.db.connection import one_row, schema_sql, transaction
from ansible_collections.awa.operations.plugins.module_utils.info.result import PolledRead, QueueHealth, StateRead

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection


DEADLOCKS_SQL = """
SELECT deadlocks, stats_reset, now(), awa.active_queue_storage_schema()
FROM pg_stat_database WHERE datname = current_database()
"""

QUEUE_HEALTH_SQL = """
SELECT q.queue,
       (SELECT count(*) FROM {done_entries} AS d
        WHERE d.queue = q.queue AND d.state = 'failed' AND d.finalized_at >= q.since)
       + (SELECT count(*) FROM {dlq_entries} AS x WHERE x.queue = q.queue AND x.dlq_at >= q.since),
       (SELECT count(DISTINCT r.job_id) FROM (
            SELECT job_id FROM {deferred_jobs}
            WHERE queue = q.queue AND state = 'retryable' AND finalized_at >= q.since
            UNION ALL
            SELECT job_id FROM {ready_entries} WHERE queue = q.queue AND attempt > 0 AND attempted_at >= q.since
        ) AS r)
FROM unnest(%(queues)s::text[], %(since)s::timestamptz[]) AS q(queue, since)
WHERE q.since IS NOT NULL
"""


def queue_health(info: StateRead, counts: Mapping[str, tuple[int, int]],
                 since: Mapping[str, datetime.datetime | None]) -> dict[str, QueueHealth]:
    """Per logical queue of ``info``, its failed and retried jobs (``counts``: failed, retried per physical queue)
    since the earliest of its physical queues' last recorded changes (``since``; None: never changed)."""
    queues: dict[str, QueueHealth] = {}
    for name, view in info["queues"].items():
        known = [counts[queue] for queue in view["physical_queues"] if queue in counts]
        changed = [moment for queue in view["physical_queues"] if (moment := since.get(queue)) is not None]
        queues[name] = {"since": min(changed).isoformat() if changed else None,
                        "failed_jobs": sum(failed for failed, dummy in known) if known else None,
                        "retried_jobs": sum(retried for dummy, retried in known) if known else None}
    return queues


def add_health(conn: Connection, info: PolledRead, lock_timeout: float) -> None:
    """Put ``health`` into a read's result, from a READ ONLY transaction of its own: the database's deadlocks, and
    failed and retried jobs of each physical queue since its last recorded change (none for a queue never changed
    by the module), summed per logical queue."""
    since = {physical: datetime.datetime.fromisoformat(view["last_change"][physical]["changed_at"])
             if physical in view["last_change"] else None
             for view in info["queues"].values() for physical in view["physical_queues"]}
    counts: dict[str, tuple[int, int]] = {}
    with transaction(conn, "reading what the change shows (deadlocks, failed and retried jobs)",
                     lock_timeout=lock_timeout, read_only=True):
        deadlocks, stats_reset, read_at, schema = one_row(conn.execute(DEADLOCKS_SQL))
        if schema is not None and any(moment is not None for moment in since.values()):
            rows = conn.execute(schema_sql(schema, QUEUE_HEALTH_SQL),
                                {"queues": list(since), "since": list(since.values())}).fetchall()
            counts = {queue: (failed, retried) for queue, failed, retried in rows}
    info["health"] = {"read_at": read_at.isoformat(), "deadlocks": deadlocks,
                      "stats_reset": stats_reset.isoformat() if stats_reset else None,
                      "queues": queue_health(info, counts, since)}
