"""awa_enqueue_shards returns the read after its change (``observed``), on PostgreSQL 17 and 18.

The rollout's restart plan needs, right after the change, which runtimes are
live and on the count, each queue's stragglers and last recorded change, and
the database's clock. The change returns exactly what the info module reads
for its queues, in the same run and on the same connection: here it is held
against a read of the info module's core made right after, and its cost is
counted (one read per run, whatever the number of queues).
"""

from __future__ import annotations

import contextlib
import datetime

from awa_testbed.environment import wait_for_live_runtimes

from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_and_read, change_queues
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_requests
from ansible_collections.awa.operations.plugins.module_utils.info.result import ObservedRead

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.declared import value_problems

from benchmarks.tracing import protocol_trace
from enqueue_shards_support import info, shard_counts, snapshot

OPTIONS = {"lock_timeout": 5.0, "ledger_schema": "awa_operations", "reason": None}


def run(login: dict, entries: list[dict], *, check_mode: bool = False, conn=None) -> tuple[dict, list[str]]:
    """The module's run (change, then the read after it), as ``main`` calls it; its queues new or not (new_queue)."""
    requests = validate_requests([{**entry, "new_queue": True} for entry in entries])
    if conn is not None:
        return change_and_read(conn, requests, diff=False, reconnect=None, check_mode=check_mode,
                               **OPTIONS)
    with open_connection(login, writes=True) as opened:
        return change_and_read(opened, requests, diff=False,
                               reconnect=lambda: connect(login, writes=True), check_mode=check_mode, **OPTIONS)


def shape(value: object) -> object:
    """The keys of a value at every level (lists by their first item), without the values."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def test_observed_is_what_the_info_module_reads_for_the_changed_queues_right_after(awa_db, fleet):
    worker = fleet.worker("w", ["orders", "events"])
    wait_for_live_runtimes(awa_db, [worker.pid], 30)
    result, dummy = run(awa_db.login_args(), [{"queue": "orders", "shards": 4}, {"queue": "events", "shards": 2}])
    observed = result["observed"]
    fresh = info(awa_db, queues=["orders", "events"])

    assert value_problems(observed, ObservedRead, "observed") == []
    assert shape(observed["queues"]) == shape(fresh["queues"]) and shape(observed["runtimes"]) == shape(fresh["runtimes"])
    assert {name: view["enqueue_shards"] for name, view in observed["queues"].items()} == {
        "orders": {"orders": 4}, "events": {"events": 2}}
    # The runtime live through the change is a straggler of both queues, by the change the ledger recorded.
    assert observed["queues"]["orders"]["last_change"]["orders"]["id"] == result["queues"]["orders"]["ledger"]["id"]
    assert [s["pid"] for s in observed["queues"]["orders"]["stragglers"]] == [worker.pid]
    assert [r["pending_queues"] for r in observed["runtimes"] if r["pid"] == worker.pid] == [["orders", "events"]]
    # What does not move between two reads a moment apart is the same as the info module's.
    stable = ("enqueue_shards", "ordering", "paused", "converged", "runtimes_live", "runtimes_converged",
              "last_change", "lanes_complete", "lanes_missing", "grants", "findings")
    assert ({name: {key: view[key] for key in stable} for name, view in observed["queues"].items()}
            == {name: {key: view[key] for key in stable} for name, view in fresh["queues"].items()})
    assert [r["instance_id"] for r in observed["runtimes"]] == [r["instance_id"] for r in fresh["runtimes"]]
    changed_at = datetime.datetime.fromisoformat(result["queues"]["events"]["ledger"]["changed_at"])
    read_at = datetime.datetime.fromisoformat(observed["read_at"])
    assert changed_at <= read_at <= datetime.datetime.fromisoformat(fresh["read_at"])
    assert observed["server"] == f"{awa_db.server.host}:{awa_db.server.port}"


def test_in_check_mode_observed_is_the_state_now_and_nothing_is_written(awa_db):
    run(awa_db.login_args(), [{"queue": "orders", "shards": 2}])
    before = snapshot(awa_db)
    result, dummy = run(awa_db.login_args(), [{"queue": "orders", "shards": 8}], check_mode=True)
    assert result["changed"] and snapshot(awa_db) == before
    assert result["observed"]["queues"]["orders"]["enqueue_shards"] == {"orders": 2} == shard_counts(awa_db)


def test_the_read_after_the_change_costs_the_same_for_one_queue_and_for_a_list(awa_db):
    one, three = [{"queue": "q1", "shards": 2}], [{"queue": f"q{n}", "shards": 2} for n in (1, 2, 3)]
    run(awa_db.login_args(), three)  # the queues and the ledger exist: the check-mode runs below only read
    counted = {}
    with contextlib.closing(connect(awa_db.login_args(), writes=True)) as conn:
        for name, entries in (("one", one), ("three", three)):
            with protocol_trace(conn) as whole:
                run(awa_db.login_args(), entries, check_mode=True, conn=conn)
            with protocol_trace(conn) as change_alone:
                change_queues(conn, validate_requests([{**entry, "new_queue": True} for entry in entries]),
                              check_mode=True, **OPTIONS)
            counted[name] = (whole.statements - change_alone.statements, whole.round_trips - change_alone.round_trips)
    assert counted["one"] == counted["three"], counted
    assert counted["one"][0] > 0
