# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a bad change shows on the database side, for the rollout's health gates: the reads.

Part of the introspect package, the only SQL that reads (installation.py says how its reads behave).
shards_info_health.py says what the numbers mean and puts them into the info module's result.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from ansible_collections.awa.operations.plugins.module_utils.db.connection import sql


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


def fetch_health(conn, since: Mapping[str, datetime.datetime | None]) -> dict:
    """Deadlocks of the database, and failed and retried jobs of each physical queue since its ``since``.

    Runs in the caller's transaction. Queues whose ``since`` is None (no
    recorded change) get no job counts.
    """
    deadlocks, stats_reset, read_at, schema = conn.execute(DEADLOCKS_SQL).fetchone()
    counts = {}
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
