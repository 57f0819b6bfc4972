# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The list form of the change: one result merged over its queues, and the module refusing a bad list."""

from __future__ import annotations

import json

import pytest
from ansible_collections.awa.operations.tests.unit.plugins.module_args import patch_module_args

from ansible_collections.awa.operations.plugins.module_utils.change.operation import merge_results
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import physical_queues
from ansible_collections.awa.operations.plugins.module_utils.change.plan import change_warnings
from ansible_collections.awa.operations.plugins.modules import awa_enqueue_shards
from ansible_collections.awa.operations.tests.unit.plugins.module_utils.infinite_ints import infinite_int_refusal


def queue_result(queue: str, shards: int, *, changed: bool = True, stripes: int = 1, previous: int = 1,
                 warnings: tuple[str, ...] = ()) -> dict:
    """What change_queues returns for one queue (the keys the merge reads), with the switch warnings
    the queue's plan gives (none when unchanged: it already has ``shards``)."""
    physical = physical_queues(queue, stripes)
    previous_shards = dict.fromkeys(physical, previous if changed else shards)
    return {
        "changed": changed, "check_mode": False, "queue": queue, "shards": shards, "stripes": stripes,
        "physical_queues": physical, "previous_shards": previous_shards,
        "lanes_created": 4 * (shards - 1) * stripes if changed else 0, "lanes_repaired": 0,
        "grants_added": 2 if changed else 0, "ordering": "...", "queries": [f"-- {queue}"] if changed else [],
        "diff": {"before": dict.fromkeys(physical, {"enqueue_shards": 1}),
                 "after": dict.fromkeys(physical, {"enqueue_shards": shards})},
        "warnings": [*warnings, *change_warnings([(queue, previous_shards, shards)])], "duration": 0.05,
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
    assert merged["warnings"] == [
        "Running Awa 0.6 runtimes keep enqueue_shards=1 for promotion and re-enqueue of queue 'orders' until they "
        "restart: restart them, then wait with awa.operations.awa_enqueue_shards_info (wait: converged).",
        "Running Awa 0.6 runtimes keep enqueue_shards=1 for promotion and re-enqueue of queue 'events' until they "
        "restart: restart them, then wait with awa.operations.awa_enqueue_shards_info (wait: converged).",
        "ordering_key -> shard mapping changes (hash % enqueue_shards): per-key FIFO does not hold between jobs "
        "enqueued before and after the change while the older ones remain."]
    assert list(merged["queues"]) == ["orders", "events", "idle"]
    assert merged["queues"]["events"]["shards"] == 4 and "queries" not in merged["queues"]["events"]
    assert merged["duration"] == 0.2


def test_a_hundred_queues_switched_alike_warn_in_a_few_lines_naming_them_all():
    raised = {f"q{index:03d}": queue_result(f"q{index:03d}", 4) for index in range(100)}
    lowered = {name: queue_result(name, 2, previous=8) for name in ("big_a", "big_b")}
    striped = queue_result("s001", 4, stripes=2, warnings=("queue 's001' also has unstriped lanes",))
    merged = merge_results({**raised, **lowered, "s001": striped}, duration=1.0)
    restart = "until they restart: restart them, then wait with awa.operations.awa_enqueue_shards_info (wait: converged)."
    assert merged["warnings"] == [
        "queue 's001' also has unstriped lanes",
        f"Running Awa 0.6 runtimes keep enqueue_shards=1 for promotion and re-enqueue of 101 queues (q000..q099, "
        f"s001) {restart}",
        f"Running Awa 0.6 runtimes keep enqueue_shards=8 for promotion and re-enqueue of 2 queues (big_a, big_b) "
        f"{restart}",
        "Lowering 2 queues (big_a, big_b) from 8 to 2: jobs already on shards >= 2 keep draining (lanes are never "
        "deleted); wait with awa_enqueue_shards_info (wait: drained).",
        "ordering_key -> shard mapping changes (hash % enqueue_shards): per-key FIFO does not hold between jobs "
        "enqueued before and after the change while the older ones remain."]


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
    assert result["failed"] and infinite_int_refusal("queues[1].shards") in result["msg"]
