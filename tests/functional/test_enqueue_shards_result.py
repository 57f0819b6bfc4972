"""Live results of awa_enqueue_shards, held against their declaration (module_utils/change/result.py).

Two runs of the module's core on PostgreSQL 17 and 18 in diff mode: one
queue (``queue``), and a list (``queues``) with a striped queue, both
recorded in the ledger with grants for a runtime role, with a runtime live
through them (a straggler in the read after the change, ``observed``). Every
key and every value's type must be as declared: a key renamed in
``change.operation`` or a column that comes back as another type fails here.

With ``AWA_RECORD_FIXTURES=1`` the results are also written to
tests/unit/plugins/module_utils/fixtures/change-live-pg<major>.json, which the
unit test of the declaration holds against the RETURN documentation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from awa_testbed.environment import wait_for_live_runtimes

from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_and_read
from ansible_collections.awa.operations.plugins.module_utils.change.result import EnqueueShardsResult
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_requests

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.declared import value_problems

FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "plugins" / "module_utils" / "fixtures"


def test_live_changes_of_one_queue_and_of_a_list_are_the_declared_result(awa_db, fleet, pg_major):
    awa_db.setup_least_privilege(runtime_count=1)
    runtime = awa_db.roles["runtime1"].name
    worker = fleet.worker("w", ["orders"], role="runtime1")
    wait_for_live_runtimes(awa_db, [worker.pid], 30)
    login = awa_db.login_args("migrator")
    results = {}
    with open_connection(login, writes=True) as conn:
        for form, entries, reason in (("queue", [{"queue": "orders", "shards": 4}], "CHG-1"),
                                      ("queues", [{"queue": "orders", "shards": 2},
                                                  {"queue": "events", "shards": 4, "stripes": 2, "new_queue": True}],
                                       "CHG-2")):
            requests = validate_requests(entries, [runtime])
            results[form], dummy = change_and_read(
                conn, requests if form == "queues" else requests[0], diff=True,
                reconnect=lambda: connect(login, writes=True), check_mode=False, lock_timeout=5.0,
                ledger_schema="awa_operations", reason=reason)

    assert results["queue"]["ledger"]["change_id"] == results["queue"]["change_id"]
    assert results["queue"]["grants_added"] and results["queue"]["diff"]["after"]["orders"]["lanes"] == 16
    assert set(results["queues"]["queues"]) == {"orders", "events"}
    assert results["queues"]["queues"]["events"]["physical_queues"] == ["events#0", "events#1"]
    assert [s["pid"] for s in results["queue"]["observed"]["queues"]["orders"]["stragglers"]] == [worker.pid]
    for form, result in results.items():
        assert value_problems(result, EnqueueShardsResult, form) == []
    if os.environ.get("AWA_RECORD_FIXTURES"):
        (FIXTURES / f"change-live-pg{pg_major}.json").write_text(json.dumps(results, indent=1) + "\n",
                                                                 encoding="utf-8")
