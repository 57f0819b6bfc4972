"""awa_enqueue_shards with ``queues``: many queues in one module run, through real Ansible.

Each queue is changed in its own transaction, exactly as a run with ``queue``
would; the run stops at the first queue that fails and says which queues
before it were changed.
"""

from __future__ import annotations

import contextlib
import threading
import time

from ansible_collections.awa.operations.plugins.module_utils.change.lost_commit import queue_lock
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_requests
from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect

from benchmarks.tracing import protocol_trace
from enqueue_shards_support import (
    ansible_adhoc,
    complete_lanes,
    lanes_below,
    ledger_rows,
    shard_counts,
    snapshot,
)

# New queues, each prepared before its first producer (new_queue).
QUEUES = [{"queue": "orders", "shards": 8, "new_queue": True}, {"queue": "events", "shards": 4, "stripes": 2, "new_queue": True},
          {"queue": "mail", "shards": 1, "new_queue": True}]


def test_a_list_is_planned_then_applied_queue_by_queue_then_left_alone(awa_db):
    # The ledger exists already: a check run plans each queue on its own, so each plan would create it.
    ansible_adhoc({**awa_db.login_args(), "queue": "earlier", "shards": 2, "new_queue": True})
    # detail: the statements, compared below.
    args = {**awa_db.login_args(), "queues": QUEUES, "detail": True}
    before = snapshot(awa_db)
    process, planned = ansible_adhoc(args, "--check")
    assert process.returncode == 0, process.stdout
    assert planned["changed"] and snapshot(awa_db) == before, "check mode wrote to the database"

    process, applied = ansible_adhoc(args)
    assert process.returncode == 0, process.stdout
    assert applied["changed"] and applied["queries"] == planned["queries"]
    assert shard_counts(awa_db) == {"earlier": 2, "orders": 8, "events#0": 4, "events#1": 4}
    assert complete_lanes(awa_db, "events#1") == lanes_below(4)
    assert sorted(applied["queues"]) == ["events", "mail", "orders"]
    assert applied["physical_queues"] == ["orders", "events#0", "events#1", "mail"]
    assert applied["lanes_created"] == sum(result["lanes_created"] for result in applied["queues"].values())
    assert applied["queues"]["mail"]["lanes_created"] == 4, "S stays 1, its four lanes are provisioned"
    assert [row["queue"] for row in ledger_rows(awa_db)] == ["earlier", "orders", "events", "mail"]

    process, again = ansible_adhoc(args)
    assert process.returncode == 0 and again["changed"] is False and again["queries"] == []


def test_queues_switched_alike_are_warned_about_once_by_name(awa_db):
    bulk = [{"queue": f"bulk_{index}", "shards": 4, "new_queue": True} for index in range(1, 4)]
    args = {**awa_db.login_args(), "queues": bulk}
    process, applied = ansible_adhoc(args)
    assert process.returncode == 0 and applied["changed"], process.stdout
    restart_warnings = [line for line in process.stderr.splitlines() if "Running Awa 0.6 runtimes keep" in line]
    assert restart_warnings == [
        "[WARNING]: Running Awa 0.6 runtimes keep enqueue_shards=1 for promotion and re-enqueue of 3 queues "
        "(bulk_1, bulk_2, bulk_3) until they restart: restart them, then wait with "
        "awa.operations.awa_enqueue_shards_info (wait: converged)."], process.stderr


def test_the_first_failing_queue_stops_the_list_and_names_what_was_changed(awa_db):
    ansible_adhoc({**awa_db.login_args(), "queue": "striped", "shards": 2, "stripes": 2, "new_queue": True})
    args = {**awa_db.login_args(), "queues": [
        {"queue": "first", "shards": 4, "new_queue": True}, {"queue": "striped", "shards": 4, "stripes": 3},
        {"queue": "last", "shards": 4, "new_queue": True}]}
    process, failed = ansible_adhoc(args)
    assert process.returncode != 0, process.stdout
    assert failed["msg"].startswith("Queue 'striped': ") and "Queues 'first' before it were changed" in failed["msg"]
    assert list(failed["queues"]) == ["first"]
    assert shard_counts(awa_db) == {"first": 4, "striped#0": 2, "striped#1": 2}


def test_queue_and_queues_are_exclusive(awa_db):
    process, refused = ansible_adhoc({**awa_db.login_args(), "queue": "orders", "shards": 2,
                                      "queues": [{"queue": "other", "shards": 2}]})
    assert process.returncode != 0 and "mutually exclusive" in refused["msg"]
    process, refused = ansible_adhoc({**awa_db.login_args(), "queues": [{"queue": "twice", "shards": 2},
                                                                        {"queue": "twice", "shards": 4}]})
    assert process.returncode != 0 and "more than once: 'twice'" in refused["msg"]
    assert shard_counts(awa_db) == {}


def _change_in_process(conn, entries: list[dict]) -> dict:
    """The list form in this process, its queues new or not (new_queue)."""
    return change_queues(conn, validate_requests([{**entry, "new_queue": True} for entry in entries]),
                         lock_timeout=10.0, ledger_schema="awa_operations", reason=None)


def test_a_queue_changed_by_another_run_after_the_lists_read_is_planned_again_from_what_that_run_committed(awa_db):
    with contextlib.closing(connect(awa_db.login_args(), writes=True)) as conn:
        _change_in_process(conn, [{"queue": "q1", "shards": 2}, {"queue": "q2", "shards": 2}])
        with contextlib.closing(connect(awa_db.login_args(), writes=True)) as other:
            # Another run holds q2's lock and moves it to 3: the list reads 2, then waits on the lock for q2's turn.
            other.execute(queue_lock("q2").query, queue_lock("q2").params)
            other.execute("UPDATE awa.queue_meta SET enqueue_shards = 3 WHERE queue = 'q2'")
            waiting = threading.Thread(target=_commit_when_waiting, args=(awa_db, other, conn.info.backend_pid))
            waiting.start()
            try:
                result = _change_in_process(conn, [{"queue": "q1", "shards": 4}, {"queue": "q2", "shards": 4}])
            finally:
                waiting.join()
    assert result["previous_shards"] == {"q1": 2, "q2": 3}
    assert shard_counts(awa_db) == {"q1": 4, "q2": 4} and complete_lanes(awa_db, "q2") == lanes_below(4)
    assert [(row["queue"], row["from_shards"]) for row in ledger_rows(awa_db)][-2:] == [("q1", {"q1": 2}), ("q2", {"q2": 3})]


def _commit_when_waiting(awa_db, other, pid: int) -> None:
    with contextlib.closing(connect(awa_db.login_args())) as watcher:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not watcher.execute(
                "SELECT EXISTS (SELECT FROM pg_locks WHERE pid = %s AND locktype = 'advisory' AND NOT granted)",
                (pid,)).fetchone()[0]:
            time.sleep(0.05)
    other.commit()


def test_a_list_costs_the_same_round_trips_for_each_queue_it_adds(awa_db):
    counted = {}
    with contextlib.closing(connect(awa_db.login_args(), writes=True)) as conn:
        _change_in_process(conn, [{"queue": "earlier", "shards": 2}])  # the ledger exists: no queue creates it
        for size in (1, 2, 4):
            with protocol_trace(conn) as trace:
                _change_in_process(conn, [{"queue": f"r{size}-{n}", "shards": 4} for n in range(size)])
            counted[size] = trace.round_trips
    per_queue = counted[2] - counted[1]
    # One read for the whole list, then each queue's transaction sent as a pipeline: BEGIN, the pipeline, COMMIT.
    assert counted[4] - counted[2] == 2 * per_queue and per_queue <= 4, counted
