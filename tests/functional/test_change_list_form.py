"""awa_enqueue_shards with ``queues``: many queues in one module run, through real Ansible.

Each queue is changed in its own transaction, exactly as a run with ``queue``
would; the run stops at the first queue that fails and says which queues
before it were changed.
"""

from __future__ import annotations

from enqueue_shards_support import (
    ansible_adhoc,
    complete_lanes,
    lanes_below,
    ledger_rows,
    shard_counts,
    snapshot,
)

QUEUES = [{"queue": "orders", "shards": 8}, {"queue": "events", "shards": 4, "stripes": 2}, {"queue": "mail", "shards": 1}]


def test_a_list_is_planned_then_applied_queue_by_queue_then_left_alone(awa_db):
    # The ledger exists already: a check run plans each queue on its own, so each plan would create it.
    ansible_adhoc({**awa_db.login_args(), "queue": "earlier", "shards": 2})
    args = {**awa_db.login_args(), "queues": QUEUES}
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
    args = {**awa_db.login_args(), "queues": [{"queue": f"bulk_{index}", "shards": 4} for index in range(1, 4)]}
    process, applied = ansible_adhoc(args)
    assert process.returncode == 0 and applied["changed"], process.stdout
    restart_warnings = [line for line in process.stderr.splitlines() if "Running Awa 0.6 runtimes keep" in line]
    assert restart_warnings == [
        "[WARNING]: Running Awa 0.6 runtimes keep enqueue_shards=1 for promotion and re-enqueue of 3 queues "
        "(bulk_1, bulk_2, bulk_3) until they restart: restart them, then wait with "
        "awa.operations.awa_enqueue_shards_info (wait: converged)."], process.stderr


def test_the_first_failing_queue_stops_the_list_and_names_what_was_changed(awa_db):
    ansible_adhoc({**awa_db.login_args(), "queue": "striped", "shards": 2, "stripes": 2})
    args = {**awa_db.login_args(), "queues": [
        {"queue": "first", "shards": 4}, {"queue": "striped", "shards": 4, "stripes": 3}, {"queue": "last", "shards": 4}]}
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
