"""awa_enqueue_shards and awa_enqueue_shards_info through a real PgBouncer in transaction pooling, on 17 and 18.

Managed PostgreSQL is usually reached through a transaction pooler: each
transaction of a client may run on another server connection of a small pool,
and a server connection goes to the pool's next client as soon as a
transaction ends. What a user would notice if the collection got that wrong:
a role or setting left on the connection for the next client (a superuser
session handed to whoever connects next), a statement of the change run
without ``session_role``, a wait that fails with "prepared statement ... does
not exist", a lock that outlives its transaction. The operator role of these
tests is a member of the Awa owner role WITHOUT inheriting its privileges: by
itself it may read and write nothing of Awa, so every statement that works
proves it ran as ``session_role``.
"""

from __future__ import annotations

import re
import secrets

import psutil
import pytest
from psycopg import sql

from awa_testbed.awadb import AwaDatabase, DbRole
from awa_testbed.environment import wait_for_live_runtimes
from awa_testbed.pgbouncer import DEFAULT_POOL_SIZE, PgBouncer, PoolClients, client, pgbouncer_version

from ansible_collections.awa.operations.plugins.module_utils.change.lost_commit import QUEUE_LOCK_PREFIX
from ansible_collections.awa.operations.plugins.module_utils.db.connection import open_connection
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    ConnectionFailed,
    PreconditionFailed,
    WaitTimeout,
)
from ansible_collections.awa.operations.plugins.module_utils.info.wait import wait_for_shards_info

from enqueue_shards_support import (
    Run,
    ansible_adhoc,
    change,
    comparable,
    database_log,
    info,
    ledger_rows,
    run_together,
    sequence_owners,
    session_holding,
    shard_counts,
    snapshot,
    wait_until,
)

# Every transaction of the collection starts with this statement (connection.py): one per poll of a wait.
FIRST_STATEMENT = ("SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', '0', true), "
                   "set_config('role', $2, true)")


def add_login_role(db: AwaDatabase, key: str, member_of: str) -> DbRole:
    """A login role that is a member of ``member_of`` without its privileges (INHERIT FALSE): only
    SET ROLE gives them. Dropped with the database."""
    role = DbRole(f"{db.name}_{key}", secrets.token_urlsafe(12))
    db.query(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role.name), sql.Literal(role.password)))
    db.query(sql.SQL("GRANT {} TO {} WITH INHERIT FALSE").format(sql.Identifier(member_of), sql.Identifier(role.name)))
    db.roles[key] = role
    return role


def pooled_operator(db: AwaDatabase, pooler: PgBouncer, dbname: str | None = None) -> dict:
    """The least-privilege Awa roles, and an operator that acts only through ``session_role`` (the owner):
    its connection options through the pooler."""
    db.setup_least_privilege(runtime_count=1)
    add_login_role(db, "operator", db.roles["owner"].name)
    pooler.allow(db)
    return {**pooler.login_args(db, "operator", dbname), "session_role": db.roles["owner"].name}


def log_statements(db: AwaDatabase, role: str) -> None:
    """The server logs every statement of ``role``'s new sessions in ``db`` (with the backend's pid)."""
    db.query(sql.SQL("ALTER ROLE {} IN DATABASE {} SET log_statement = 'all'").format(
        sql.Identifier(db.roles[role].name), sql.Identifier(db.name)))


def test_the_pooler_is_debians_pgbouncer_1_18_in_transaction_pooling_run_unprivileged(pgbouncer):
    assert pgbouncer_version(pgbouncer.binary).startswith("PgBouncer 1.18.")
    config = {row["key"]: row["value"] for row in pgbouncer.show("CONFIG")}
    assert (config["pool_mode"], config["default_pool_size"], config["auth_type"]) == (
        "transaction", str(DEFAULT_POOL_SIZE), "scram-sha-256")
    assert psutil.Process(pgbouncer.pid).username() == pgbouncer.identity.name != "root"


def test_a_change_window_through_the_pool_runs_every_statement_as_session_role(awa_db, pgbouncer, fleet):
    """Check mode, the change, its re-run, a lowering and its drain wait, as an operator that can act only
    through session_role."""
    operator = pooled_operator(awa_db, pgbouncer)
    owner, operator_name = awa_db.roles["owner"].name, operator["login_user"]
    before = snapshot(awa_db)

    planned = change(awa_db, "pooled", 4, login=operator, check_mode=True)
    assert planned["changed"] and snapshot(awa_db) == before, "check mode wrote nothing"

    raised = change(awa_db, "pooled", 4, login=operator)
    assert comparable(raised) == comparable(planned)
    assert (raised["lanes_created"], shard_counts(awa_db)) == (16, {"pooled": 4})
    assert sequence_owners(awa_db, "pooled") == {owner}
    [row] = ledger_rows(awa_db)
    assert (row["changed_by"], row["login_user"], row["application_name"]) == (owner, operator_name, "awa.operations")
    assert change(awa_db, "pooled", 4, login=operator)["changed"] is False
    assert len(ledger_rows(awa_db)) == 1

    fleet.producer("p", "pooled", mode="enqueue_many_copy", keyed=True, batch=50, count=200, rate=0).wait(60)
    lowered = change(awa_db, "pooled", 1, login=operator)
    assert lowered["changed"] and lowered["previous_shards"] == {"pooled": 4}
    with pytest.raises(WaitTimeout) as timeout:
        info(awa_db, login=operator, queue="pooled", wait="drained", timeout=1)
    assert "ready jobs remain on shards at or above the count" in timeout.value.message
    fleet.worker("w", ["pooled=8"])
    drained = info(awa_db, login=operator, queue="pooled", wait="drained", timeout=60)
    assert drained["drained"] and drained["queues"]["pooled"]["depth_beyond_count"] == 0
    assert [row["changed_by"] for row in ledger_rows(awa_db)] == [owner, owner]


def test_a_long_wait_shares_the_pool_and_never_uses_a_prepared_statement(awa_db, pgbouncer, fleet):
    """Dozens of polls on one client connection while three other clients share its pool of two: every poll
    runs as session_role, on whichever server connection is free, with no server-side prepared statement."""
    operator = pooled_operator(awa_db, pgbouncer)
    log_statements(awa_db, "operator")
    worker = fleet.worker("w1", ["waited=2"])
    wait_for_live_runtimes(awa_db, [worker.pid], 30)
    change(awa_db, "waited", 2, login=operator)
    with pytest.raises(PreconditionFailed, match="permission denied"):
        info(awa_db, login={**operator, "session_role": None}, queue="waited")

    polls, successor = [0], []

    def replace_the_runtime_from_poll_30(state: dict, elapsed: float) -> None:  # pylint: disable=unused-argument
        # A rolling restart, one runtime live throughout: the successor starts at poll 30, and the old runtime
        # stops once a poll has seen the successor live. Both happen here, on the main thread: a child started
        # from a thread is stopped by the kernel when that thread ends (lifecycle.die_with_parent).
        polls[0] += 1
        if polls[0] == 30:
            successor.append(fleet.worker("w2", ["waited=2"]))
        elif successor and worker.running() and any(
                runtime["pid"] == successor[0].pid and runtime["live"] for runtime in state["runtimes"]):
            worker.stop()

    with PoolClients(operator) as others, open_connection(operator) as conn:
        done = wait_for_shards_info(conn, "converged", 120, 0.1, on_poll=replace_the_runtime_from_poll_30,
                                    queue="waited")

    assert done["converged"] and done["polls"] > 30
    assert done["queues"]["waited"]["runtimes_converged"] == 1
    assert others.errors == [] and others.transactions > done["polls"]
    assert len(others.server_pids) == DEFAULT_POOL_SIZE, "the other clients used the whole pool"
    lines = database_log(awa_db.server, awa_db.name)
    first_statements = [pid for pid, message in lines if message == f"execute <unnamed>: {FIRST_STATEMENT}"]
    assert len(first_statements) > done["polls"], "every poll is a transaction that set the role first"
    assert set(first_statements) == others.server_pids, "the wait's transactions ran on every server connection"
    assert not [message for pid, message in lines if re.match(r"execute (?!<unnamed>)", message)], \
        "a named (server-side) prepared statement ran"
    assert not [message for pid, message in lines if "prepared statement" in message]


def test_two_operators_at_once_through_the_pool_one_waits_for_the_other(awa_db, pgbouncer):
    operator = pooled_operator(awa_db, pgbouncer)

    results = run_together(awa_db, "race", [8, 8], login=operator)

    assert sorted(result["changed"] for result in results) == [False, True]
    assert shard_counts(awa_db) == {"race": 8}
    assert [row["changed_by"] for row in ledger_rows(awa_db)] == [awa_db.roles["owner"].name]


# A session waiting for an advisory lock in a statement that started more than 200 ms ago.
WAITING_PAST_200_MS = ("SELECT count(*) > 0 FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid) WHERE "
                       "l.locktype = 'advisory' AND NOT l.granted AND clock_timestamp() - a.query_start > '200 ms'")


def test_a_statement_timeout_on_the_role_cannot_cancel_the_change_midway(awa_db, pgbouncer):
    """A statement cancelled inside Awa's lane trigger keeps the session advisory lock of awa.set_sequence_next after
    the rollback, and a pooler hands that server connection on (producers of the lane would then wait on it): the
    collection's transactions run with statement_timeout off, their waits bounded by lock_timeout."""
    operator = pooled_operator(awa_db, pgbouncer)
    awa_db.query(sql.SQL("ALTER ROLE {} SET statement_timeout = '200ms'").format(
        sql.Identifier(operator["login_user"])))

    with session_holding(awa_db, "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", QUEUE_LOCK_PREFIX + "slow"):
        run = Run(awa_db, "slow", 64, login=operator, stripes=2)
        run.start()
        wait_until(lambda: awa_db.scalar(WAITING_PAST_200_MS), 10, "the change to wait for its lock past the role's "
                   "statement_timeout")

    assert run.outcome()["lanes_created"] == 512
    assert awa_db.scalar("SELECT count(*) FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid) "
                         "WHERE l.locktype = 'advisory' AND a.usename = %s", (operator["login_user"],)) == 0


def test_session_role_never_reaches_the_next_client_of_a_pool_of_one(awa_db, pgbouncer):
    """The issue's leak: a plain login role with session_role set to a superuser makes a change; the pool's next
    client, the same plain role, must run as itself, on the same server connection, with nothing left on it."""
    plain = add_login_role(awa_db, "plain", "postgres").name
    pgbouncer.allow(awa_db)
    pool_of_one = pgbouncer.pool(awa_db.name, size=1)
    with pgbouncer.connect(awa_db, "plain", pool_of_one, autocommit=True) as client:
        server_pid = client.execute("SELECT pg_backend_pid()").fetchone()[0]

    process, result = ansible_adhoc({**pgbouncer.login_args(awa_db, "plain", pool_of_one), "session_role": "postgres",
                                     "queue": "leak", "shards": 2, "new_queue": True})

    assert result["changed"] and process.returncode == 0, process.stdout
    assert [(row["changed_by"], row["login_user"]) for row in ledger_rows(awa_db)] == [("postgres", plain)]
    with pgbouncer.connect(awa_db, "plain", pool_of_one, autocommit=True) as next_client:
        seen = next_client.execute(
            "SELECT pg_backend_pid(), current_user, session_user, rolsuper, current_setting('lock_timeout'), "
            "(SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory') "
            "FROM pg_roles WHERE rolname = current_user").fetchone()
    assert seen == (server_pid, plain, plain, False, "0", 0)
    [pool] = [row for row in pgbouncer.show("POOLS") if row["database"] == pool_of_one]
    assert pool["sv_idle"] + pool["sv_used"] + pool["sv_active"] == 1


def test_a_session_pool_works_and_a_statement_pool_is_refused_with_what_to_do(awa_db, pgbouncer):
    operator = pooled_operator(awa_db, pgbouncer)
    session_pool, statement_pool = (pgbouncer.pool(awa_db.name, mode=mode) for mode in ("session", "statement"))

    assert change(awa_db, "modes", 2, login={**operator, "login_db": session_pool})["changed"]
    before = snapshot(awa_db)
    # With session_role the refusal comes at connect (the role is checked there); without, at the first read.
    for login in ({**operator, "login_db": statement_pool}, pgbouncer.login_args(awa_db, "migrator", statement_pool)):
        for run in (lambda: change(awa_db, "modes", 4, login=login), lambda: info(awa_db, login=login, queue="modes")):
            with pytest.raises(ConnectionFailed) as refused:
                run()
            message = refused.value.message
            assert "the pooler refused the transaction (transaction blocks not allowed in statement pooling mode): " \
                   "the connection goes through a pooler in statement pooling mode" in message
            assert "(PgBouncer: pool_mode = transaction)" in message and message.endswith("Nothing was changed.")
    assert snapshot(awa_db) == before


def test_a_pool_that_stays_busy_is_reported_with_what_to_do_and_the_rerun_works(awa_db, pg):
    pooler = PgBouncer(pg, pool_size=1, query_wait_timeout=1)
    try:
        pooler.start()
        operator = pooled_operator(awa_db, pooler)
        before = snapshot(awa_db)
        with client(operator) as other:
            other.execute("SELECT 1")  # an open transaction holds the pool's only server connection
            for login in (operator, {**operator, "session_role": None}):
                with pytest.raises(ConnectionFailed) as refused:
                    change(awa_db, "busy", 2, login=login)
                assert "the pooler refused the transaction (query_wait_timeout): the pooler had no free server " \
                       "connection for this database and user within its query_wait_timeout" in refused.value.message
                assert refused.value.message.endswith("Nothing was changed.")
        assert snapshot(awa_db) == before
        assert change(awa_db, "busy", 2, login=operator)["changed"]
    finally:
        pooler.destroy()
