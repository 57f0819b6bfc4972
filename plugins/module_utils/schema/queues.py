# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The queues the database knows: the stored names of some logical queues (their stripe layout is read from
them), whether Awa has ever seen a queue, every stored name, and every name it knows in any way.

Part of the schema package, the reads of Awa's schema that the change and the read both make (installation.py says how they behave).
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection, schema_sql, sql
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import STRIPE_DELIMITER


@dataclass(frozen=True)
class QueueNames:
    """What the database holds of some logical queues: each one's stored names (lanes, head rows, queue_meta rows:
    the stripe layout is read from them), and those of them with none that Awa still knows - it holds jobs of them
    that wait outside any lane, or a runtime serves them."""

    stored: dict[str, list[str]]
    in_use: frozenset[str]

    def known(self, logical: str) -> bool:
        """Whether the database has ever seen ``logical``: a stored name, jobs, or a runtime serving it."""
        return bool(self.stored.get(logical)) or logical in self.in_use


# A logical name holds no STRIPE_DELIMITER, so a stored name belongs to the logical queue before its first one.
# Jobs in a lane (ready, leased, done, dead-lettered) come with its head rows, which Awa never deletes; scheduled and
# retryable jobs wait in deferred_jobs with no lane until they are promoted, and jobs of the canonical engine (before
# queue storage was activated) live in jobs_hot and scheduled_jobs. A runtime names the logical queues it serves in
# its snapshot (runtime_instances.queues, kept a day after it was last seen), whether it stripes them or not, even
# before any job or lane exists. The jobs and the runtimes are read only for the asked queues with no stored name
# (a one-time filter skips the scans otherwise): deferred_jobs has no index on its queue.
QUEUE_NAMES_SQL = """
WITH stored AS (
    SELECT DISTINCT queue FROM (
        SELECT queue FROM {queue_lanes} UNION ALL SELECT queue FROM {queue_enqueue_heads}
        UNION ALL SELECT queue FROM awa.queue_meta
    ) AS known
    WHERE split_part(queue, %(delimiter)s, 1) = ANY(%(logical)s::text[])
), unseen AS (
    SELECT array_agg(logical) AS logical FROM unnest(%(logical)s::text[]) AS logical
    WHERE logical NOT IN (SELECT split_part(queue, %(delimiter)s, 1) FROM stored)
)
SELECT queue, true FROM stored
UNION ALL
SELECT DISTINCT split_part(queue, %(delimiter)s, 1), false FROM (
    SELECT queue FROM {deferred_jobs}
        WHERE split_part(queue, %(delimiter)s, 1) = ANY((SELECT logical FROM unseen)::text[])
    UNION ALL SELECT queue FROM awa.jobs_hot WHERE queue = ANY((SELECT logical FROM unseen)::text[])
    UNION ALL SELECT queue FROM awa.scheduled_jobs WHERE queue = ANY((SELECT logical FROM unseen)::text[])
    UNION ALL SELECT entry ->> 'queue' FROM awa.runtime_instances AS r,
        jsonb_array_elements(CASE jsonb_typeof(r.queues) WHEN 'array' THEN r.queues ELSE '[]' END) AS entry
) AS used
WHERE (SELECT logical FROM unseen) IS NOT NULL
  AND split_part(queue, %(delimiter)s, 1) = ANY((SELECT logical FROM unseen)::text[])
"""


def fetch_queue_names(conn: Connection, schema: str, logicals: list[str]) -> QueueNames:
    """The stored names of each of ``logicals`` (``logical`` itself, ``logical#n``), and which of those with none
    Awa holds jobs of or a runtime serves. One statement, whatever the number of queues."""
    rows = conn.execute(schema_sql(schema, QUEUE_NAMES_SQL),
                        {"logical": list(logicals), "delimiter": STRIPE_DELIMITER}).fetchall()
    stored: dict[str, list[str]] = {logical: [] for logical in logicals}
    for name, dummy in sorted(row for row in rows if row[1]):
        stored[name.split(STRIPE_DELIMITER, 1)[0]].append(name)
    return QueueNames(stored, frozenset(name for name, is_stored in rows if not is_stored))


# Every stored name (lanes or a queue_meta row), and with ``used`` (USED_QUEUE_NAMES_SQL) every name QueueNames.known
# accepts: those jobs name (in a lane's head rows, or waiting outside any lane) and those runtimes serve (their
# snapshots, kept a day after they were last seen) - a queue whose count was never changed has no queue_meta row, and
# before its first job no lane. The used names are read only to refuse a queue the database has never seen, so the
# scans of the job tables (deferred_jobs has no index on its queue) are paid only then.
QUEUE_NAME_LIST_SQL = """
SELECT DISTINCT queue FROM (
    SELECT queue FROM {queue_enqueue_heads} UNION ALL SELECT queue FROM awa.queue_meta{used}
) AS known WHERE queue IS NOT NULL ORDER BY queue
"""
USED_QUEUE_NAMES_SQL = """
    UNION ALL SELECT queue FROM {deferred_jobs} UNION ALL SELECT queue FROM awa.jobs_hot
    UNION ALL SELECT queue FROM awa.scheduled_jobs
    UNION ALL SELECT entry ->> 'queue' FROM awa.runtime_instances AS r,
        jsonb_array_elements(CASE jsonb_typeof(r.queues) WHEN 'array' THEN r.queues ELSE '[]' END) AS entry"""


def fetch_all_queue_names(conn: Connection, schema: str, *, used: bool = False) -> list[str]:
    """Every stored queue name (physical names, q#n included): every queue a read of all queues shows; with
    ``used``, every name the database knows, which a queue it has never seen is compared with
    (queue_rules.never_seen). One statement."""
    rows = conn.execute(schema_sql(schema, QUEUE_NAME_LIST_SQL,
                                   used=schema_sql(schema, USED_QUEUE_NAMES_SQL) if used else sql.SQL("")))
    return [row[0] for row in rows.fetchall()]
