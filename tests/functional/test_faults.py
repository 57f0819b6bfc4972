"""Faults around a shard-count change: the database restarts or is unreachable.

For each: the state is the old one or the new one, never a mix; the error is
clear; a re-run converges. (Other faults live next to the features they hit:
a backend terminated mid-apply, a lock held past lock_timeout and two
operators at once in test_enqueue_shards_*; a runtime SIGKILLed during the
convergence wait in test_enqueue_shards_info.)
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from awa_testbed.environment import wait_for_live_runtimes
from awa_testbed.pgserver import free_port

from ansible_collections.awa.operations.plugins.module_utils.change.lost_commit import QUEUE_LOCK_PREFIX
from ansible_collections.awa.operations.plugins.module_utils.db.connection import open_connection, transaction
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    AwaOperationsError,
    ConnectionFailed,
    ConnectionLost,
)

from enqueue_shards_support import (
    Run,
    backend_waiting_on_lock,
    change,
    complete_lanes,
    info,
    lanes_below,
    ledger_rows,
    shard_counts,
    snapshot,
    wait_until,
)


def hold_queue_lock(db, queue: str, release: threading.Event) -> threading.Thread:
    """Another session holds the module's per-queue lock until ``release`` is set."""
    ready = threading.Event()

    def hold() -> None:
        try:
            with psycopg.connect(db.dsn()) as conn:  # autocommit off: the lock lives until we leave
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                             (QUEUE_LOCK_PREFIX + queue,))
                ready.set()
                release.wait(60)
        except Exception:  # pylint: disable=broad-exception-caught
            ready.set()  # the server went away under us: that is the point of the test

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    ready.wait(10)
    return holder


def test_a_database_restart_mid_apply_leaves_the_old_state_and_a_rerun_converges(awa_db):
    change(awa_db, "restart_q", 2)
    before = snapshot(awa_db)
    release = threading.Event()
    holder = hold_queue_lock(awa_db, "restart_q", release)
    blocked = Run(awa_db, "restart_q", 8, lock_timeout=60)
    blocked.start()
    wait_until(lambda: backend_waiting_on_lock(awa_db), 10, "the module to wait")
    awa_db.server.restart()
    with pytest.raises(AwaOperationsError) as failure:
        blocked.outcome(30)
    release.set()
    holder.join(10)

    assert "connection" in failure.value.message and "nothing was changed" in failure.value.message
    assert snapshot(awa_db) == before, "a change cut short by a restart left something behind"
    rerun = change(awa_db, "restart_q", 8)
    assert rerun["changed"] and shard_counts(awa_db)["restart_q"] == 8
    assert complete_lanes(awa_db, "restart_q") == lanes_below(8)


def test_a_database_restart_between_the_change_and_the_wait(awa_db, fleet):
    workers = [fleet.worker(name, ["restarted=2"]) for name in ("w1", "w2")]
    wait_for_live_runtimes(awa_db, [worker.pid for worker in workers], 30)
    applied = change(awa_db, "restarted", 4)
    awa_db.server.restart()

    # The change survived the restart whole: count, lanes and ledger row.
    assert shard_counts(awa_db)["restarted"] == 4
    assert complete_lanes(awa_db, "restarted") == lanes_below(4)
    assert [row["id"] for row in ledger_rows(awa_db)] == [applied["ledger"]["id"]]
    # Runtimes reconnect on their own; they still run with the old count until restarted.
    for worker in workers:
        worker.restart()
    done = info(awa_db, wait="converged", timeout=60, queue="restarted")
    assert done["queues"]["restarted"]["runtimes_converged"] == 2
    assert not change(awa_db, "restarted", 4)["changed"]


def test_an_unreachable_database_fails_clearly_and_a_rerun_converges(awa_db):
    unreachable = {**awa_db.login_args(),
                   "login_port": free_port(), "login_password": "s3cret-never-shown"}
    started = time.monotonic()
    with pytest.raises(ConnectionFailed) as failure:
        with open_connection(unreachable):
            pass
    assert time.monotonic() - started < 15
    message = failure.value.message
    assert f"could not connect to database {awa_db.name!r} on 127.0.0.1:{unreachable['login_port']}" in message
    assert "refused" in message.lower() and "s3cret-never-shown" not in message
    assert change(awa_db, "reachable_again", 3)["changed"]


def test_a_session_ended_after_a_read_keeps_the_read_and_the_next_transaction_says_the_connection_is_lost(awa_db):
    # A failover ends sessions at any moment, also between a read's last statement and its rollback: the read
    # stands, and the connection's next transaction fails as a lost one (which a wait rides out on a new
    # connection), never with psycopg's own error (that ended a module's wait with a traceback and no result).
    with open_connection(awa_db.login_args()) as conn:
        with transaction(conn, "reading", lock_timeout=5, read_only=True):
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            assert awa_db.scalar("SELECT pg_terminate_backend(%s, 10000)", (backend,))
        assert conn.closed
        with pytest.raises(ConnectionLost) as lost:
            with transaction(conn, "reading again", lock_timeout=5, read_only=True):
                pass
    assert lost.value.message.startswith("reading again: the database connection was lost")
