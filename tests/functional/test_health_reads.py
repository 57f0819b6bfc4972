"""awa_enqueue_shards_info's health readings on the real schema, PostgreSQL 17 and 18.

What the rollout's gates compare: the database's deadlock count, driven by
two sessions that deadlock on purpose, and the jobs of a queue that failed
for good or are being retried since its last recorded change, driven by a
real Awa worker failing real jobs (awa-pg 0.6.9).
"""

from __future__ import annotations

import json
import sys

from awa_testbed.deadlock import deadlock_once
from awa_testbed.waiting import poll, wait_until

from ansible_collections.awa.operations.plugins.module_utils.db.connection import open_connection
from ansible_collections.awa.operations.plugins.module_utils.info.health import add_health
from ansible_collections.awa.operations.plugins.module_utils.info.read import read_shards_info

from enqueue_shards_support import ansible_command, change

# Jobs of a queue Awa marked failed (read directly, not through the module under test).
FAILED_SQL = "SELECT count(*) FROM awa.done_entries WHERE queue = %s AND state = 'failed'"


def health(db, queues: list[str]) -> dict:
    with open_connection(db.login_args()) as conn:
        info = read_shards_info(conn, queues=queues)
        add_health(conn, info, 5.0)
    return info["health"]


def read_until(db, queues: list[str], done, timeout: float = 60.0) -> dict:
    """Read the health until ``done(health)`` (the workers and the statistics need a moment)."""
    return poll(lambda: health(db, queues), done, timeout, interval=0.5)[1]


def test_deadlocks_failed_and_retried_jobs_since_the_change_are_read(awa_db, fleet):
    # Jobs that failed before the change do not count: one fails for good first.
    fleet.producer("fail-before", "healthq", count=1, max_attempts=1, rate=0).wait(60)
    worker = fleet.worker("w", ["healthq"])
    assert health(awa_db, ["healthq"])["queues"]["healthq"] == {"since": None, "failed_jobs": None,
                                                                "retried_jobs": None}, "no change recorded yet"
    wait_until(lambda: awa_db.scalar(FAILED_SQL, ("healthq",)) >= 1, 60, "the job that fails for good", interval=0.2)
    change(awa_db, "healthq", 2)
    baseline = health(awa_db, ["healthq"])
    assert baseline["queues"]["healthq"]["since"] is not None

    deadlock_once(awa_db.dsn())
    fleet.producer("fail-once", "healthq", count=3, max_attempts=1, rate=0).wait(60)
    fleet.producer("fail-retry", "healthq", count=2, max_attempts=9, rate=0).wait(60)
    fleet.producer("ok", "healthq", count=4, rate=0).wait(60)

    reading = read_until(awa_db, ["healthq"], lambda r: r["deadlocks"] > baseline["deadlocks"]
                         and r["queues"]["healthq"]["failed_jobs"] >= 3 and r["queues"]["healthq"]["retried_jobs"] >= 2)
    assert reading["deadlocks"] - baseline["deadlocks"] == 1
    assert reading["queues"]["healthq"]["failed_jobs"] == 3, "only the jobs that failed since the change count"
    assert reading["queues"]["healthq"]["retried_jobs"] == 2
    assert worker.running()


def test_the_module_returns_health_when_asked(awa_db):
    change(awa_db, "healthm", 2)
    args = {**awa_db.login_args(), "queue": "healthm", "health": True}
    process = ansible_command("ansible", "localhost", "-m", "awa.operations.awa_enqueue_shards_info",
                              "-a", json.dumps(args), env_extra={"ANSIBLE_PYTHON_INTERPRETER": sys.executable})
    assert process.returncode == 0, process.stdout
    result = json.loads(process.stdout[process.stdout.index("{"):])
    assert set(result["health"]) == {"read_at", "deadlocks", "stats_reset", "queues"}
    assert result["health"]["queues"]["healthm"]["failed_jobs"] == 0
    assert result["health"]["queues"]["healthm"]["retried_jobs"] == 0
