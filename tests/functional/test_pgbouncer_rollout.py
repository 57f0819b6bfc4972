"""The change-window playbook (role awa.operations.enqueue_shards) through a real PgBouncer, on 17 and 18.

The demo's test bed (two Awa applications under supervisord, connected
directly to PostgreSQL: Awa's runtimes hold session state a transaction pooler
cannot carry) with PgBouncer in front of its server. The playbook's
connection goes through PgBouncer in transaction pooling, as the migrator with
``session_role`` the Awa owner, while other clients share the same pool of two
server connections. One run per major: a lowering, with restarts in batches,
the wait until every runtime runs the new count and the wait until the old
shards have drained.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from awa_testbed import environment
from awa_testbed.awadb import AwaDatabase
from awa_testbed.binaries import SUPPORTED_MAJORS
from awa_testbed.pgbouncer import DEFAULT_POOL_SIZE, PgBouncer, PoolClients, client
from awa_testbed.pgserver import PgServer

from enqueue_shards_support import change, database_log, ledger_rows
from test_rollout_role import program_pids, set_enqueue_shards, summary_row


@pytest.fixture(scope="module", params=SUPPORTED_MAJORS, ids=lambda major: f"pg{major}")
def pooled_testbed(request) -> Iterator[tuple[Path, PgBouncer]]:
    """The demo's test bed on PostgreSQL ``major`` and PgBouncer in front of its server, letting the migrator in."""
    # A job a second per application, as the testbed fixture (conftest.py).
    with environment.temporary(major=request.param, apps=2, queue="demo", produce_rate=1.0) as state_dir:
        state = environment.load_state(state_dir)
        pooler = PgBouncer(PgServer.from_description(state["server"]))
        try:
            pooler.start()
            pooler.allow_roles([state["migrator"]])
            yield state_dir, pooler
        finally:
            pooler.destroy()


def test_the_change_window_playbook_lowers_restarts_and_waits_through_pgbouncer(pooled_testbed):
    state_dir, pooler = pooled_testbed
    state = environment.load_state(state_dir)
    db = AwaDatabase(PgServer.from_description(state["server"]), state["database"], "0.6.9")
    owner = f"{state['database']}_owner"  # awa_testbed.awadb.setup_least_privilege's name
    # Before the window the count was raised, directly; the applications still run the count they started with.
    change(db, "demo", 4, login={**state["login"], "session_role": owner}, runtime_roles=state["runtime_roles"])
    pooled = {**state["login"], "login_host": pooler.host, "login_port": pooler.port}
    pids = program_pids(state_dir)

    with PoolClients(pooled, count=2) as others:
        process = set_enqueue_shards(state_dir, 2, connection={**pooled, "session_role": owner})

    assert process.returncode == 0, process.stdout
    assert "Restarting 2 producer service(s) on 1 host(s) in 1 batch(es) of at most 1 host(s)" in process.stdout
    assert summary_row(process.stdout)[1:3] == ["4 -> 2", "2 of 2"]
    assert summary_row(process.stdout)[4:] == ["0", "yes / yes"]
    assert all(pid != pids[name] for name, pid in program_pids(state_dir).items())
    last = ledger_rows(db)[-1]
    assert (last["from_shards"], last["to_shards"]) == ({"demo": 4}, 2)
    assert (last["changed_by"], last["login_user"]) == (owner, state["migrator"])
    assert others.errors == [] and len(others.server_pids) == DEFAULT_POOL_SIZE
    assert not [message for pid, message in database_log(db.server, db.name) if "prepared statement" in message]
    # Every server connection of the pool, held at once by one client each, runs as the login role.
    clients = [client(pooled, autocommit=False) for dummy in range(DEFAULT_POOL_SIZE)]
    try:
        seen = {conn.execute("SELECT pg_backend_pid(), current_user").fetchone() for conn in clients}
    finally:
        for conn in clients:
            conn.close()
    assert {user for pid, user in seen} == {state["migrator"]} and len(seen) == DEFAULT_POOL_SIZE
