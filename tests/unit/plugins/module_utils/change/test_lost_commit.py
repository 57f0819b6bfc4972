# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A lost COMMIT without a database: how often it reconnects, and what each outcome tells the operator.

The lookup itself (the queue lock, the ledger row, pg_xact_status) runs on
PostgreSQL 17 and 18 in tests/functional/test_lost_commit.py.
"""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.change import lost_commit
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    CommitNotApplied,
    CommitOutcomeUnknown,
)
from ansible_collections.awa.operations.plugins.module_utils.schema.sessions import TransactionIdentity

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.info.test_wait import Unreachable

CHANGE_ID = "5f0e6a4c-3b1d-4e1a-9c11-0d6b3f1b2a77"
REASON = ("changing enqueue_shards of queue 'orders': the connection was lost while committing (consuming input "
          "failed: server closed the connection unexpectedly).")
XID = TransactionIdentity("1234", "7714315657794815573", "00000001")


def pending(ledger_schema: str | None = "awa_operations", records_change_id: bool = True) -> lost_commit.PendingChange:
    return lost_commit.PendingChange(
        queue="orders", change_id=CHANGE_ID, result={"changed": True, "warnings": []}, ledger_schema=ledger_schema,
        transaction=None if records_change_id else XID, lock_timeout=5)


def test_it_reconnects_six_times_within_about_fifteen_seconds_then_says_how_to_look_it_up():
    reconnect = Unreachable()
    with pytest.raises(CommitOutcomeUnknown) as unknown:
        lost_commit.settle(pending(), REASON, reconnect, sleep=reconnect.slept.append)
    assert reconnect.calls == 6 and reconnect.slept == [0.5, 1.0, 2.0, 4.0, 8.0]
    message = unknown.value.message
    assert message.startswith(REASON + " The database could not be reached again (6 attempts within 15.5 s; last: "
                              "could not connect to database 'app' on db1:5432 as 'awa_migrator': refused #6).")
    assert (f"The outcome is unknown: the change committed whole or not at all (change id {CHANGE_ID}). To find out, "
            "look it up: SELECT id, changed_at, to_shards FROM awa_operations.enqueue_shards_changes WHERE "
            f"change_id = '{CHANGE_ID}'. A row means it was applied") in message
    assert unknown.value.details == {"change_id": CHANGE_ID, "lost_commit": {"outcome": "unknown"}}


@pytest.mark.parametrize("ledger_schema", ["awa_operations", None], ids=["old-ledger", "ledger-false"])
def test_without_a_change_id_the_lookup_it_gives_is_the_transaction_status(ledger_schema):
    with pytest.raises(CommitOutcomeUnknown) as unknown:
        lost_commit.settle(pending(ledger_schema, records_change_id=False), REASON, None)
    assert "the Python API without reconnect=" in unknown.value.message
    assert "SELECT pg_xact_status('1234'::xid8); 'committed' means it was applied" in unknown.value.message
    assert "run the module in check mode" in unknown.value.message


def test_a_schema_name_that_needs_quotes_is_quoted_in_the_lookup_it_gives():
    with pytest.raises(CommitOutcomeUnknown) as unknown:
        lost_commit.settle(pending('Ops "ledger"'), REASON, None)
    assert 'FROM "Ops ""ledger""".enqueue_shards_changes WHERE' in unknown.value.message


def test_a_change_found_committed_is_the_changes_result_with_how_it_was_found():
    row = {"schema": "awa_operations", "table": "enqueue_shards_changes", "id": 7, "change_id": CHANGE_ID}
    result = lost_commit._outcome(pending(), REASON, 2, True, "change id in the ledger", row)  # pylint: disable=protected-access
    assert result["changed"] and result["ledger"] == row
    assert result["lost_commit"] == {"outcome": "committed", "resolved_by": "change id in the ledger",
                                     "reconnect_attempts": 2}
    assert result["warnings"] == [
        "The connection was lost while committing the change of queue 'orders'. Reconnected (attempt 2) and looked "
        f"it up once its transaction had ended: ledger row 7 has its change id {CHANGE_ID}. The change is applied: "
        "nothing to re-run."]


@pytest.mark.parametrize("records_change_id, evidence", [
    (True, f"no ledger row has its change id {CHANGE_ID}"),
    (False, "its transaction 1234 rolled back"),
])
def test_a_change_found_not_applied_fails_saying_nothing_was_written_and_to_re_run(records_change_id, evidence):
    with pytest.raises(CommitNotApplied) as failure:
        lost_commit._outcome(pending(records_change_id=records_change_id), REASON, 1, False,  # pylint: disable=protected-access
                             "transaction status", None)
    assert failure.value.message == (
        f"{REASON} Reconnected (attempt 1) and looked it up once its transaction had ended: {evidence}, so it was "
        "not applied and nothing was written; re-run to apply it.")
    assert failure.value.details["lost_commit"]["outcome"] == "not applied"
