# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Across a failover, without a server: what ``committed`` accepts, how a count the server read does not hold
is reported, and what the operator is told when a wait reconnected or gave up."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.info.wait.failover import (
    RECONNECT_ATTEMPTS,
    Committed,
    gave_up_message,
    missing_changes,
    reconnected_warning,
    validate_committed,
)
from ansible_collections.awa.operations.plugins.module_utils.info.wait.loop import Interruption, ReconnectGaveUp

SERVER = "db2.example.com:5432"
# What awa_enqueue_shards returns per queue (with queues), trimmed to a few keys.
CHANGE_RESULT = {"changed": True, "check_mode": False, "queue": "orders", "shards": 8, "previous_shards": {"orders": 4},
                 "ledger": {"schema": "awa_operations", "table": "enqueue_shards_changes", "id": 12,
                            "changed_at": "2026-12-01T10:00:00+00:00", "live_runtimes": []}}


def change_row(change_id: int, from_shards: int, to_shards: int) -> dict:
    return {"id": change_id, "changed_at": "2026-12-01T09:00:00+00:00", "from_shards": from_shards,
            "to_shards": to_shards, "changed_by": "awa_migrator", "reason": None}


def read(counts: dict[str, int], *changes: dict, queue: str = "orders") -> dict:
    """A read's result, reduced to what the check looks at."""
    return {"queues": {queue: {"enqueue_shards": counts,
                               "last_change": dict(zip(counts, changes))}}}


def test_the_change_result_is_accepted_as_is_and_check_mode_results_are_left_out():
    assert validate_committed({"orders": CHANGE_RESULT, "events": {"shards": 2},
                               "dry": dict(CHANGE_RESULT, check_mode=True)}) == {
        "orders": Committed("orders", 8, 12), "events": Committed("events", 2, None)}
    assert validate_committed(None) == {} and validate_committed({}) == {}


@pytest.mark.parametrize("value", [
    [{"queue": "orders", "shards": 8}],
    {"orders": 8},
    {"orders": {"shards": "8"}},
    {"orders": {"shards": True}},
    {"orders": {"shards": 8, "ledger": {"id": "12"}}},
], ids=["list", "bare-count", "text-count", "bool-count", "text-id"])
def test_anything_else_is_refused_with_the_shape_it_takes(value):
    with pytest.raises(InvalidRequest) as refused:
        validate_committed(value)
    assert refused.value.message.startswith(
        "committed must map each queue to what the change committed, as awa_enqueue_shards returns it in queues "
        "(for example {orders: {shards: 8, ledger: {id: 12}}})")


def test_a_count_the_server_holds_is_no_problem_and_queues_not_read_are_not_judged():
    committed = validate_committed({"orders": CHANGE_RESULT, "elsewhere": {"shards": 3}})
    assert missing_changes(committed, read({"orders": 8}, change_row(12, 4, 8)), SERVER) == []


def test_a_change_the_server_never_received_is_named_with_the_count_found_and_what_to_re_run():
    committed = validate_committed({"orders": CHANGE_RESULT})
    [problem] = missing_changes(committed, read({"orders": 4}, change_row(9, 1, 4)), SERVER)
    assert problem == (
        "orders: the change committed enqueue_shards 8 (ledger change #12), but db2.example.com:5432 holds "
        "enqueue_shards 4 and its latest recorded change is change #9 (1 -> 4, by awa_migrator at "
        "2026-12-01T09:00:00+00:00): the change is not on this server. This happens after a failover to a standby "
        "that had not received it (asynchronous replication): the commit was lost with the old primary. Nothing "
        "will converge on 8 here. Re-run the change against the new primary (awa.operations.awa_enqueue_shards with "
        "queue orders and shards 8, or the playbook awa.operations.set_enqueue_shards), then the wait.")


def test_without_a_recorded_change_or_a_ledger_row_it_still_names_the_count():
    [problem] = missing_changes({"orders": Committed("orders", 8, None)}, read({"orders#0": 4, "orders#1": 8}),
                                SERVER)
    assert problem.startswith("orders: the change committed enqueue_shards 8, but db2.example.com:5432 holds "
                              "enqueue_shards orders#0: 4, orders#1: 8 and it has no recorded change: the change is "
                              "not on this server.")


def test_a_later_change_is_named_as_such_not_as_a_lost_one():
    [problem] = missing_changes(validate_committed({"orders": CHANGE_RESULT}),
                                read({"orders": 2}, change_row(44, 8, 2)), SERVER)
    assert problem == (
        "orders: the change committed enqueue_shards 8 (ledger change #12), but db2.example.com:5432 now holds "
        "enqueue_shards 2: it was changed again since, by change #44 (8 -> 2, by awa_migrator at "
        "2026-12-01T09:00:00+00:00). Nothing will converge on 8 here; if enqueue_shards 2 is not what you want, run "
        "the change again.")


def test_a_reconnected_wait_says_when_it_lost_the_connection_and_where_it_reads_now():
    warning = reconnected_warning(Interruption(14.2, "server closed the connection unexpectedly", 3), SERVER)
    assert warning == ("The connection to the database was lost 14s into the wait (server closed the connection "
                       "unexpectedly); the wait reconnected after 3 attempt(s) and read db2.example.com:5432 from "
                       "then on (the primary now, if it was a failover). The state reported was read there.")


@pytest.mark.parametrize("deadline_reached, ended", [
    (False, f"all {RECONNECT_ATTEMPTS} reconnection attempts failed"),
    (True, "the wait's deadline came after 5 reconnection attempt(s)"),
], ids=["attempts", "deadline"])
def test_a_wait_that_gave_up_says_why_that_nothing_changed_and_what_to_run_again(deadline_reached, ended):
    gave_up = ReconnectGaveUp(Interruption(30, "terminating connection due to administrator command", 5),
                              "connection refused", 155, 12, None, deadline_reached)
    message = gave_up_message(gave_up, "converged", RECONNECT_ATTEMPTS)
    assert message.startswith("The connection to the database was lost 30s into the wait until converged "
                              f"(terminating connection due to administrator command), and {ended} (the last at "
                              "155s: connection refused). Nothing was changed: the wait only reads.")
    assert "run the wait again (in the role: the entry point wait, or --tags enqueue_shards_wait)" in message
