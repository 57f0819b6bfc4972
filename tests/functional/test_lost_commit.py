"""A COMMIT whose connection is lost is looked up, not guessed (issue 18).

A proxy between the module and PostgreSQL (awa_testbed.commit_cutter) cuts
the connection right after forwarding COMMIT (the change commits; the module
never hears back) or right before (nothing commits). The module reconnects,
waits until the old transaction has ended, looks the change up, and reports
it committed (with its ledger row) or "not applied, nothing was written;
re-run". The outcome stays unknown only when it cannot look: the database
unreachable, or the old transaction still open after lock_timeout; then the
message gives the query that tells.

The first test runs the module through real Ansible (``ansible -m``); the
others call its Python core the way the module does (with ``reconnect``),
which keeps them at about a second each.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from awa_testbed.commit_cutter import CommitCutter

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.declared import value_problems

from ansible_collections.awa.operations.plugins.module_utils.info import wait as reopening
from ansible_collections.awa.operations.plugins.module_utils.schema import sessions
from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.change.result import EnqueueShardsResult
from ansible_collections.awa.operations.plugins.module_utils.errors import CommitNotApplied, CommitOutcomeUnknown
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_requests

from enqueue_shards_support import (
    ansible_adhoc,
    change,
    complete_lanes,
    lanes_below,
    ledger_rows,
    shard_counts,
    snapshot,
)

# The ledger as awa.operations 0.1.0 created it: no change_id column.
LEDGER_0_1_0 = (Path(__file__).with_name("fixtures") / "ledger-0.1.0.sql").read_text(encoding="utf-8")


@pytest.fixture
def proxy(awa_db):
    with CommitCutter(awa_db.server.host, awa_db.server.port) as cutter:
        yield cutter


def through(proxy: CommitCutter, login: dict) -> dict:
    return {**login, "login_port": proxy.port}


def row_of(db, change_id: str) -> dict | None:
    rows = [row for row in ledger_rows(db) if row.get("change_id") == change_id]
    return rows[0] if rows else None


def test_a_commit_cut_after_it_was_sent_is_found_committed_through_ansible(awa_db, proxy):
    args = {**through(proxy, awa_db.login_args()), "queue": "orders", "shards": 4, "new_queue": True}
    proxy.arm("after")
    process, result = ansible_adhoc(args)

    assert process.returncode == 0, process.stdout
    assert result["changed"] and result["lost_commit"] == {
        "outcome": "committed", "resolved_by": "change id in the ledger", "reconnect_attempts": 1}
    recorded = row_of(awa_db, result["change_id"])
    assert recorded and recorded["id"] == result["ledger"]["id"] == 1 and recorded["to_shards"] == 4
    assert result["ledger"]["change_id"] == result["change_id"]
    # The read after the change is made on a new connection: the cut one is gone.
    assert result["observed"]["queues"]["orders"]["enqueue_shards"] == {"orders": 4}
    assert value_problems({key: value for key, value in result.items() if key != "warnings"}, EnqueueShardsResult) == []
    assert "The connection was lost while committing the change of queue 'orders'" in process.stdout + process.stderr
    assert shard_counts(awa_db) == {"orders": 4} and complete_lanes(awa_db, "orders") == lanes_below(4)

    process, again = ansible_adhoc(args)
    assert process.returncode == 0 and again["changed"] is False and "lost_commit" not in again


def test_a_commit_cut_before_it_was_sent_is_not_applied_and_nothing_is_written(awa_db, proxy):
    login = through(proxy, awa_db.login_args())
    change(awa_db, "orders", 2)
    before = snapshot(awa_db)
    proxy.arm("before")
    with pytest.raises(CommitNotApplied) as failure:
        change(awa_db, "orders", 8, login=login)

    assert snapshot(awa_db) == before, "a commit that never reached the server left something behind"
    message = failure.value.message
    assert f"no ledger row has its change id {failure.value.details['change_id']}" in message
    assert message.endswith("so it was not applied and nothing was written; re-run to apply it.")
    assert failure.value.details["lost_commit"] == {
        "outcome": "not applied", "resolved_by": "change id in the ledger", "reconnect_attempts": 1}
    rerun = change(awa_db, "orders", 8, login=login)
    assert rerun["changed"] and "lost_commit" not in rerun and shard_counts(awa_db) == {"orders": 8}


def change_list(login: dict, shards: int) -> dict:
    """The module's list form (``queues``) on three queues, reconnecting as the module does."""
    entries = [{"queue": name, "shards": shards, "new_queue": True} for name in ("first", "second", "third")]
    with open_connection(login) as conn:
        return change_queues(conn, validate_requests(entries), reconnect=lambda: connect(login))


def test_the_list_form_goes_on_after_a_commit_found_committed_and_stops_at_one_not_applied(awa_db, proxy):
    login = through(proxy, awa_db.login_args())
    proxy.arm("after", nth=2)
    raised = change_list(login, 4)
    assert raised["queues"]["second"]["lost_commit"]["outcome"] == "committed"
    assert [raised["queues"][name]["changed"] for name in ("first", "second", "third")] == [True, True, True]
    assert shard_counts(awa_db) == {"first": 4, "second": 4, "third": 4}

    proxy.arm("before", nth=2)
    with pytest.raises(CommitNotApplied) as lowered:
        change_list(login, 2)
    assert lowered.value.message.startswith(
        "Queue 'second': changing enqueue_shards of queue 'second': the connection was lost while committing")
    assert ("not applied and nothing was written; re-run to apply it. Queues 'first' before it were changed and "
            "committed; re-run to finish the list.") in lowered.value.message
    assert lowered.value.details["lost_commit"]["outcome"] == "not applied"
    assert list(lowered.value.details["queues"]) == ["first"]
    assert shard_counts(awa_db) == {"first": 2, "second": 4, "third": 4}


def test_without_the_ledger_a_lost_commit_is_looked_up_by_its_transaction(awa_db, proxy):
    login = through(proxy, awa_db.login_args())
    proxy.arm("after")
    found = change(awa_db, "orders", 4, login=login, ledger=False)
    assert found["changed"] and found["lost_commit"]["resolved_by"] == "transaction status"
    assert found["lost_commit"]["outcome"] == "committed" and "ledger" not in found

    proxy.arm("before")
    before = snapshot(awa_db)
    with pytest.raises(CommitNotApplied) as failure:
        change(awa_db, "orders", 8, login=login, ledger=False)
    assert snapshot(awa_db) == before and ledger_rows(awa_db) == []
    assert "its transaction" in failure.value.message and "rolled back, so it was not applied" in failure.value.message


def test_a_ledger_from_0_1_0_gets_the_change_id_from_its_owner_and_other_roles_are_told(awa_db, proxy):
    awa_db.setup_least_privilege()
    migrator = awa_db.roles["migrator"].name
    # An administrator created the ledger (0.1.0) and let the migrator write to it, as the docs say.
    awa_db.query(sql.SQL(LEDGER_0_1_0) + sql.SQL(
        "GRANT USAGE ON SCHEMA awa_operations TO {role}; "
        "GRANT INSERT, SELECT ON awa_operations.enqueue_shards_changes TO {role};").format(role=sql.Identifier(migrator)))
    as_migrator = through(proxy, awa_db.login_args("migrator"))

    proxy.arm("after")
    told = change(awa_db, "orders", 4, login=as_migrator)
    assert any("predates change ids" in warning and "only its owner 'postgres' can" in warning
               and "ALTER TABLE awa_operations.enqueue_shards_changes ADD COLUMN change_id uuid" in warning
               for warning in told["warnings"])
    assert told["lost_commit"] == {"outcome": "committed", "resolved_by": "transaction status",
                                   "reconnect_attempts": 1}
    assert told["ledger"]["id"] == ledger_rows(awa_db)[-1]["id"] and "change_id" not in ledger_rows(awa_db)[-1]

    upgraded = change(awa_db, "orders", 8)  # its owner
    assert row_of(awa_db, upgraded["change_id"]) and not any("predates" in w for w in upgraded["warnings"])
    proxy.arm("after")
    recorded = change(awa_db, "orders", 2, login=as_migrator)
    assert recorded["lost_commit"]["resolved_by"] == "change id in the ledger"
    assert row_of(awa_db, recorded["change_id"])["changed_by"] == migrator


def run_lookup(db, message: str) -> list[tuple]:
    """The statement the message tells the operator to run, as the operator would."""
    query = message.split("look it up: ", 1)[1].split(". A row means", 1)[0]
    with psycopg.connect(db.dsn(), autocommit=True) as conn:
        return conn.execute(query).fetchall()


def test_when_it_cannot_look_the_outcome_is_unknown_and_the_message_says_how_to_look(awa_db, proxy, monkeypatch):
    login = through(proxy, awa_db.login_args())
    change(awa_db, "orders", 2)

    # The server never hears that the client went: the old transaction stays open past lock_timeout.
    proxy.arm("hold")
    with pytest.raises(CommitOutcomeUnknown) as still_open:
        change(awa_db, "orders", 4, login=login, lock_timeout=1)
    assert "was still open after lock_timeout (1s)" in still_open.value.message
    assert "idle in transaction" in still_open.value.message
    proxy.release()
    assert run_lookup(awa_db, still_open.value.message) == []

    # The database cannot be reached again (the waits between attempts shortened for the test, not their number).
    monkeypatch.setattr(reopening, "RECONNECT_DELAYS", (0.1,) * len(reopening.RECONNECT_DELAYS))
    proxy.arm("after", refuse=True)
    with pytest.raises(CommitOutcomeUnknown) as unreachable:
        change(awa_db, "orders", 8, login=login)
    assert f"could not be reached again ({len(reopening.RECONNECT_DELAYS) + 1} attempts" in unreachable.value.message
    assert unreachable.value.details == {"change_id": unreachable.value.details["change_id"],
                                         "lost_commit": {"outcome": "unknown"}}
    assert [row[2] for row in run_lookup(awa_db, unreachable.value.message)] == [8]
    assert shard_counts(awa_db) == {"orders": 8}


def test_a_transaction_status_is_read_only_on_the_server_history_it_belongs_to(awa_db):
    with psycopg.connect(awa_db.dsn()) as conn:
        identity = sessions.fetch_transaction_identity(conn)
        conn.commit()
        assert sessions.fetch_transaction_status(conn, identity) == "committed"
        conn.commit()
        rolled_back = sessions.fetch_transaction_identity(conn)
        conn.rollback()
        assert sessions.fetch_transaction_status(conn, rolled_back) == "aborted"
        # A promoted standby runs a new timeline and hands out the same ids again; an id not assigned yet raises in
        # pg_xact_status: neither is an answer.
        assert sessions.fetch_transaction_status(conn, dataclasses.replace(identity, timeline="00000002")) is None
        future = dataclasses.replace(identity, transaction_id=str(int(identity.transaction_id) + 1_000_000))
        assert sessions.fetch_transaction_status(conn, future) is None
