# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The list form of the change: one result merged over its queues, and the module refusing a bad list."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.awa.operations.plugins.module_utils.enqueue_shards import merge_results
from ansible_collections.awa.operations.plugins.module_utils.naming import physical_queues
from ansible_collections.awa.operations.plugins.modules import awa_enqueue_shards


def queue_result(queue: str, shards: int, *, changed: bool = True, stripes: int = 1) -> dict:
    """What change_enqueue_shards returns for one queue (the keys the merge reads)."""
    physical = physical_queues(queue, stripes)
    return {
        "changed": changed, "check_mode": False, "queue": queue, "shards": shards, "stripes": stripes,
        "physical_queues": physical, "previous_shards": dict.fromkeys(physical, 1),
        "lanes_created": 4 * (shards - 1) * stripes if changed else 0, "lanes_repaired": 0,
        "grants_added": 2 if changed else 0, "ordering": "...", "queries": [f"-- {queue}"] if changed else [],
        "diff": {"before": dict.fromkeys(physical, {"enqueue_shards": 1}),
                 "after": dict.fromkeys(physical, {"enqueue_shards": shards})},
        "warnings": ["restart the runtimes"] if changed else [], "duration": 0.05,
    }


def test_merge_sums_and_merges_over_queues_and_keeps_each_queue_result():
    merged = merge_results({"orders": queue_result("orders", 8), "events": queue_result("events", 4, stripes=2),
                            "idle": queue_result("idle", 2, changed=False)}, duration=0.2)
    assert merged["changed"] is True
    assert merged["physical_queues"] == ["orders", "events#0", "events#1", "idle"]
    assert merged["lanes_created"] == 28 + 24 and merged["grants_added"] == 4
    assert merged["queries"] == ["-- orders", "-- events"]
    assert merged["diff"]["after"] == {"orders": {"enqueue_shards": 8}, "events#0": {"enqueue_shards": 4},
                                       "events#1": {"enqueue_shards": 4}, "idle": {"enqueue_shards": 2}}
    assert merged["warnings"] == ["restart the runtimes"]
    assert list(merged["queues"]) == ["orders", "events", "idle"]
    assert merged["queues"]["events"]["shards"] == 4 and "queries" not in merged["queues"]["events"]
    assert merged["duration"] == 0.2


def test_merge_of_queues_that_need_nothing_is_unchanged():
    merged = merge_results({"a": queue_result("a", 2, changed=False), "b": queue_result("b", 2, changed=False)}, 0.1)
    assert merged["changed"] is False and merged["queries"] == [] and merged["lanes_created"] == 0


def test_an_infinite_shard_count_in_the_list_is_refused_by_name(capsys):
    args = {"queues": [{"queue": "orders", "shards": 8}, {"queue": "events", "shards": float("inf")}],
            "login_host": "127.0.0.1", "login_port": 1}
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            awa_enqueue_shards.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] and result["msg"] == "queues[1].shards must be a finite integer, got an infinite value"
