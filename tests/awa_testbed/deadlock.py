"""Two sessions that deadlock on purpose: PostgreSQL aborts one of them and counts it.

    python -m awa_testbed deadlock --state DIR

For the rollout's deadlock gate (``pg_stat_database.deadlocks``): each call
adds one deadlock to the database's count. Session A locks row 1 then row 2,
session B row 2 then row 1; the deadlock detector (after ``deadlock_timeout``)
aborts one with SQLSTATE 40P01. Both sessions end before it returns, so the
aborted backend has reported the deadlock to the cumulative statistics.
"""

from __future__ import annotations

import threading

import psycopg

SETUP_SQL = """
CREATE TABLE IF NOT EXISTS testbed.deadlock_pair (id int PRIMARY KEY);
INSERT INTO testbed.deadlock_pair VALUES (1), (2) ON CONFLICT DO NOTHING;
"""
LOCK_SQL = "UPDATE testbed.deadlock_pair SET id = id WHERE id = %s"


def deadlock_once(dsn: str) -> int:
    """Make two sessions deadlock; returns how many of them PostgreSQL aborted (1)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SETUP_SQL)
    first_locks_held = threading.Barrier(2, timeout=30)
    aborted: list[str] = []

    def session(first: int, second: int) -> None:
        with psycopg.connect(dsn) as conn:
            try:
                with conn.transaction():
                    conn.execute(LOCK_SQL, (first,))
                    first_locks_held.wait()
                    conn.execute(LOCK_SQL, (second,))
            except psycopg.errors.DeadlockDetected as exc:
                aborted.append(str(exc))

    sessions = [threading.Thread(target=session, args=pair) for pair in ((1, 2), (2, 1))]
    for thread in sessions:
        thread.start()
    for thread in sessions:
        thread.join(timeout=60)
    if len(aborted) != 1:
        raise RuntimeError(f"expected one session aborted by the deadlock detector, got {aborted}")
    return len(aborted)
