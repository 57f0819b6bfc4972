"""What a running test bed is doing, in a few lines a newcomer can read (``python -m awa_testbed status``).

    programs  supervisord's view: each Awa application, its pid and uptime
    runtimes  awa.runtime_instances: the live runtimes, their pid and instance id
    queue     awa.queue_meta: the queue's enqueue_shards
    jobs      what the producers recorded as enqueued and the workers as completed;
              with --settled N, whether every job enqueued more than N seconds ago
              was completed exactly once (--wait M: give a backlog up to M seconds)
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from .environment import load_state
from .supervisor import Supervisor
from .waiting import poll

LIVE_RUNTIMES_SQL = """
SELECT pid, left(instance_id::text, 8), round(extract(epoch FROM now() - started_at))::int
FROM awa.runtime_instances
WHERE NOT shutting_down
  AND last_seen_at + make_interval(secs => GREATEST(((GREATEST(snapshot_interval_ms, 1000) / 1000) * 3)::int, 30))
      >= now()
ORDER BY pid
"""

JOBS_SQL = """
SELECT (SELECT count(*) FROM testbed.enqueued WHERE queue = %(q)s),
       (SELECT count(DISTINCT tag) FROM testbed.completions WHERE queue = %(q)s),
       (SELECT count(*) FROM testbed.producer_errors WHERE NOT retried)
"""

# Jobs enqueued more than %(settled)s seconds ago: how many, how many never completed, how many completed twice.
# Jobs the workers fail on purpose (tags fail-..., awa_testbed.jobs) are not expected to complete.
SETTLED_SQL = """
WITH old AS (SELECT tag FROM testbed.enqueued WHERE queue = %(q)s AND at < now() - make_interval(secs => %(settled)s)
               AND NOT starts_with(tag, 'fail-')),
     done AS (SELECT tag, count(*) AS times FROM testbed.completions WHERE tag IN (SELECT tag FROM old) GROUP BY tag)
SELECT (SELECT count(*) FROM old),
       (SELECT count(*) FROM old WHERE tag NOT IN (SELECT tag FROM done)),
       (SELECT count(*) FROM done WHERE times > 1)
"""


def program_lines(state_dir: Path) -> list[str]:
    output = Supervisor(state_dir).run("status").stdout
    return [" ".join(line.split()) for line in output.splitlines() if line.strip()]


def settled_line(conn, queue: str, settled: float, wait: float) -> str:
    """Whether the jobs enqueued more than ``settled`` s ago completed once; polls up to ``wait`` s for a backlog."""
    old, missing, twice = poll(lambda: conn.execute(SETTLED_SQL, {"q": queue, "settled": settled}).fetchone(),
                               lambda row: row[1] == 0, wait, interval=1)[1]
    verdict = ("every one completed exactly once" if missing == twice == 0
               else f"{missing} not completed, {twice} completed more than once")
    return f"jobs enqueued more than {settled:g}s ago: {old}; {verdict}"


def database_lines(state: dict, settled: float | None, wait: float = 0) -> list[str]:
    queue = state["queue"]
    with psycopg.connect(state["superuser_dsn"], autocommit=True) as conn:
        runtimes = conn.execute(LIVE_RUNTIMES_SQL).fetchall()
        shards = conn.execute("SELECT enqueue_shards FROM awa.queue_meta WHERE queue = %s", (queue,)).fetchone()
        settled_text = [] if settled is None else [settled_line(conn, queue, settled, wait)]
        enqueued, completed, errors = conn.execute(JOBS_SQL, {"q": queue}).fetchone()
    return [
        f"runtimes: {len(runtimes)} live - "
        + ", ".join(f"pid {pid} (instance {instance}..., up {age}s)" for pid, instance, age in runtimes),
        f"queue {queue}: enqueue_shards {shards[0] if shards else '1 (no awa.queue_meta row: the default)'}",
        f"jobs: {enqueued} enqueued, {completed} completed, {errors} producer errors",
        *settled_text,
    ]


def status(state_dir: Path, settled: float | None = None, wait: float = 0) -> list[str]:
    """The lines ``python -m awa_testbed status`` prints."""
    state = load_state(state_dir)
    return [f"programs: {'; '.join(program_lines(state_dir)) or 'none'}", *database_lines(state, settled, wait)]
