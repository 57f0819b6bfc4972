# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The info module's result as declared (info/result.py) against everything that describes or holds one.

Four things must agree, so that a key renamed or added in one place fails
here, not in molecule: the declaration; the module's RETURN documentation;
the results the role's unit tests were recorded with (plugin_utils fixtures);
results read from live databases on PostgreSQL 17 and 18 (module_utils
fixtures info-live-pg*.json, written and checked by
tests/functional/test_shards_info_result.py); and a result ``views`` builds
now from observed data, with advice from recorded windows of real load.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.awa.operations.plugins.module_utils.advice import gains
from ansible_collections.awa.operations.plugins.module_utils.info import views
from ansible_collections.awa.operations.plugins.module_utils.info.result import (
    Advice,
    ShardsInfo,
    ShardsRead,
)
from ansible_collections.awa.operations.plugins.modules import awa_enqueue_shards_info

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.declared import doc_problems, value_problems
from ansible_collections.awa.operations.tests.unit.plugins.module_utils.observed import runtime
from ansible_collections.awa.operations.tests.unit.plugins.module_utils.advice.test_rule import advised
from ansible_collections.awa.operations.tests.unit.plugins.module_utils.info.test_views import lowered_to_2
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.recorded import load

LIVE = Path(__file__).parents[1] / "fixtures"
MAJORS = (17, 18)


def test_the_return_documentation_names_every_declared_key_with_its_type():
    documented = yaml.safe_load(awa_enqueue_shards_info.RETURN)
    assert doc_problems(ShardsInfo, documented, top_level=True) == []


@pytest.mark.parametrize("name", ["info-converged", "info-unconverged"])
def test_the_results_the_role_is_tested_with_are_results_as_declared(name):
    assert value_problems(load(name), ShardsRead, name) == []


@pytest.mark.parametrize("major", MAJORS)
def test_results_read_from_live_databases_are_results_as_declared(major):
    live = json.loads((LIVE / f"info-live-pg{major}.json").read_text(encoding="utf-8"))
    assert value_problems(live, ShardsInfo, f"info-live-pg{major}") == []
    assert live["advice"], "the live recording includes advice, so its keys are held too"


def test_a_result_report_builds_now_is_a_result_as_declared():
    runtimes = [runtime("old", -60, pid=41), runtime("new", 60, pid=42), runtime("gone", -600, live=False, pid=43)]
    view = lowered_to_2(runtimes, ready={3: 5})
    read = views.shards_read({"orders": view}, runtimes, read_at=datetime.datetime.now(datetime.timezone.utc),
                             findings=[], warnings=["a warning"], known_runtimes=frozenset({"old"}),
                             expected_new_runtimes=1)
    assert read["queues"]["orders"]["stragglers"] and read["queues"]["orders"]["last_change"], "no key left empty"
    assert value_problems(read, ShardsRead) == []
    result = dict(read, server="db1:5432", waited=True, polls=3, duration=4.5,
                  advice={"orders": advised("contended_insert", 18, "busy", 1, gains.MEASURED)})
    assert value_problems(result, ShardsInfo) == []


@pytest.mark.parametrize("major", MAJORS)
@pytest.mark.parametrize("window, queue, shards", [("contended_insert", "busy", 1), ("idle", "idle", 2),
                                                   ("copy_one_shard", "bulk", 4)])
def test_advice_on_recorded_load_is_advice_as_declared(window, queue, shards, major):
    verdict = advised(window, major, queue, shards, gains.MEASURED)
    assert value_problems(verdict, Advice) == []


def test_a_difference_is_named_by_its_path():
    """The checks themselves: what a drift looks like when it happens."""
    read = load("info-converged")
    read["queues"]["demo"]["lanes"][0]["ready_depth"] = "0"
    del read["queues"]["demo"]["shards"][1]["seq_lag"]
    read["runtimes"][0]["host"] = "a"
    assert value_problems(read, ShardsRead) == [
        "result.queues['demo'].lanes[0].ready_depth: str '0', declared int",
        "result.queues['demo'].shards[1].seq_lag: missing (declared by ShardView)",
        "result.runtimes[0].host: not declared by RuntimeView",
    ]
    documented = yaml.safe_load(awa_enqueue_shards_info.RETURN)
    documented["queues"]["contains"]["stragglers"]["contains"].pop("reason")
    documented["polls"]["type"] = "float"
    assert doc_problems(ShardsInfo, documented, top_level=True) == [
        "RETURN.polls: documented type float, declared int",
        "RETURN.queues.stragglers.reason: declared by StragglerView, not documented",
    ]
