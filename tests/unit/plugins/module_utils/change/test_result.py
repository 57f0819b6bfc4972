# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The change module's result as declared (change/result.py) against everything that describes or holds one.

As test_shards_info_result does for the info module, four things must agree,
so that a key renamed or added in one place fails here: the declaration; the
module's RETURN documentation; the results the role's unit tests were
recorded with (plugin_utils fixtures change-check.json and change-real.json);
results of live changes on PostgreSQL 17 and 18 (module_utils fixtures
change-live-pg*.json, written and checked by
tests/functional/test_enqueue_shards_result.py); and a result built now from
plans, merged as a list run merges them and shaped as the module returns it.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.awa.operations.plugins.module_utils.change import lost_commit
from ansible_collections.awa.operations.plugins.module_utils.change.operation import (
    merge_results, module_outcome)
from ansible_collections.awa.operations.plugins.module_utils.change.writes import planned_result
from ansible_collections.awa.operations.plugins.module_utils.info import views
from ansible_collections.awa.operations.plugins.module_utils.change.result import (
    ChangesRun,
    EnqueueShardsResult,
    QueueChangeRun,
)
from ansible_collections.awa.operations.plugins.module_utils.info.result import ObservedRead
from ansible_collections.awa.operations.plugins.modules import awa_enqueue_shards, awa_enqueue_shards_info

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.declared import doc_problems, value_problems
from ansible_collections.awa.operations.tests.unit.plugins.module_utils.observed import grid, plan_for, runtime
from ansible_collections.awa.operations.tests.unit.plugins.module_utils.info.test_views import lowered_to_2
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.recorded import load

LIVE = Path(__file__).parents[1] / "fixtures"
MAJORS = (17, 18)
LEDGER_ROW = {"schema": "awa_operations", "table": "enqueue_shards_changes", "id": 7,
              "changed_at": "2026-11-29T10:24:32.632444+00:00", "live_runtimes": 2,
              "change_id": "3f6c2a8e-5d1b-4b7e-9a42-0c8e1f7d2b65"}


def documented() -> dict:
    """RETURN, with the entries of ``observed`` that say they are as the info module's filled in from its RETURN."""
    change = yaml.safe_load(awa_enqueue_shards.RETURN)
    read = yaml.safe_load(awa_enqueue_shards_info.RETURN)
    for key, entry in change["observed"]["contains"].items():
        if f"awa_enqueue_shards_info#module:{key})" in entry["description"] and "contains" in read[key]:
            entry["contains"] = read[key]["contains"]
    return change


def test_the_return_documentation_names_every_declared_key_with_its_type():
    assert doc_problems(EnqueueShardsResult, documented(), top_level=True) == []


@pytest.mark.parametrize("name", ["change-check", "change-real"])
def test_the_results_the_role_is_tested_with_are_results_as_declared(name):
    assert value_problems(load(name), ChangesRun, name) == []


@pytest.mark.parametrize("major", MAJORS)
@pytest.mark.parametrize("form", ["queue", "queues"])
def test_results_of_live_changes_are_results_as_declared(form, major):
    live = json.loads((LIVE / f"change-live-pg{major}.json").read_text(encoding="utf-8"))[form]
    assert value_problems(live, EnqueueShardsResult, f"change-live-pg{major}.{form}") == []
    assert live["diff"], "the live recording is made in diff mode, so the diff's keys are held too"
    assert live["observed"]["queues"]["orders"]["stragglers"], "a runtime was live through it, so stragglers are held"


def _run(queue: str, shards: int, *, stripes: int | None = None) -> QueueChangeRun:
    """What change_queues returns for a real run of ``queue`` 1 -> ``shards`` (its lanes at shard 0 exist)."""
    known = [f"{queue}#{stripe}" for stripe in range(stripes)] if stripes else [queue]
    lanes = [entry for name in known for entry in grid(name, shards, 1, missing=("awa_runtime",))]
    plan = plan_for(queue, shards, lanes, roles=("awa_runtime",), stripes=stripes, known=known)
    run = planned_result(plan, ["-- the statements"], check_mode=False, warnings=plan.warnings)
    run.update(ledger=LEDGER_ROW, change_id=LEDGER_ROW["change_id"], duration=0.05)
    return run


def test_a_result_built_now_is_a_result_as_declared_in_each_of_its_shapes():
    one = _run("orders", 8)
    assert one["changed"] and one["grants_added"] and one["diff"]["after"], "no key left empty"
    assert value_problems(one, QueueChangeRun) == []
    many = merge_results({"orders": one, "events": _run("events", 4, stripes=2)}, 0.1)
    assert value_problems(many, ChangesRun) == []
    for diff in (True, False):
        for detail in (True, False):
            for outcome in (module_outcome(one, diff=diff, detail=detail), module_outcome(many, diff=diff, detail=detail)):
                result = {**outcome, "observed": views.shown(_observed(), detail=detail)}
                assert value_problems(result, EnqueueShardsResult) == []
                assert ("diff" in result) is diff and "warnings" not in result
                assert ("queries" in result) is detail and ("runtimes" in result["observed"]) is detail


def _observed() -> ObservedRead:
    """A read after a lowering to 2, as view builds it and the run returns it (with a straggler, a change)."""
    runtimes = [runtime("old", -60, pid=41), runtime("new", 60, pid=42)]
    read = views.shards_read({"orders": lowered_to_2(runtimes, ready={3: 5})}, runtimes,
                             read_at=datetime.datetime.now(datetime.timezone.utc), findings=[],
                             warnings=["a warning"], known_runtimes=frozenset(), expected_new_runtimes=0)
    return views.observed_read(read, "db1:5432")


def test_the_read_after_the_change_is_the_info_modules_read_without_its_own_changed_and_warnings():
    observed = _observed()
    assert observed["queues"]["orders"]["stragglers"] and observed["server"] == "db1:5432"
    assert value_problems(observed, ObservedRead) == []


def test_a_change_found_committed_after_a_lost_commit_is_a_result_as_declared():
    pending = lost_commit.PendingChange(queue="orders", change_id=LEDGER_ROW["change_id"], result=_run("orders", 8),
                                        ledger_schema="awa_operations", transaction=None, lock_timeout=5)
    found = lost_commit._outcome(pending, "lost", 2, True, "change id in the ledger", LEDGER_ROW)  # pylint: disable=protected-access
    assert found["lost_commit"]["outcome"] == "committed"
    assert value_problems(found, QueueChangeRun) == []
    result = {**module_outcome(found, diff=False), "observed": _observed()}
    assert value_problems(result, EnqueueShardsResult) == []


def test_a_difference_is_named_by_its_path():
    """The checks themselves, on this declaration: what a drift looks like when it happens."""
    real = load("change-real")
    real["queues"]["demo"]["ledger"]["id"] = "2"
    del real["diff"]["after"]["demo"]["lanes_missing"]
    real["queues"]["demo"]["lanes"] = 24
    assert value_problems(real, ChangesRun) == [
        "result.diff.after['demo'].lanes_missing: missing (declared by PhysicalQueueSide)",
        "result.queues['demo'].lanes: not declared by QueueChange",
        "result.queues['demo'].ledger.id: str '2', declared int",
    ]
    changed = documented()
    del changed["queues"]["contains"]["ordering"]
    changed["diff"]["contains"]["after"]["contains"] = {}
    assert doc_problems(EnqueueShardsResult, changed, top_level=True) == [
        "RETURN.diff.after.enqueue_shards: declared by PhysicalQueueSide, not documented",
        "RETURN.diff.after.lanes: declared by PhysicalQueueSide, not documented",
        "RETURN.diff.after.lanes_missing: declared by PhysicalQueueSide, not documented",
        "RETURN.diff.after.missing_grants: declared by PhysicalQueueSide, not documented",
        "RETURN.queues.ordering: declared by QueueChange, not documented",
    ]
