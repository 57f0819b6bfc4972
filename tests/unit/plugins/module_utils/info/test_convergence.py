# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The convergence rule, on plain runtimes and recorded changes."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.info import convergence
from ansible_collections.awa.operations.plugins.module_utils.info.convergence import (
    judge,
    queue_convergence,
    ready_beyond,
)
from ansible_collections.awa.operations.plugins.module_utils.schema.runtimes import reported_shard_counts

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.observed import change, runtime


@pytest.mark.parametrize("rt, recorded, expected, code, reason", [
    (runtime("new", 60), change(), True, "started_after_change", "started after"),
    (runtime("old", 60), change(), False, "running_at_change", "already running"),
    (runtime("new", -60), change(), False, "started_before_change", "started before"),
    # within the default 5 s clock margin
    (runtime("new", -4), change(), True, "started_after_change", "started after"),
    (runtime("new", 60), None, True, "no_recorded_change", "no recorded change"),
    (runtime("new", 60), change(to_shards=4), False, convergence.CHANGED_OUTSIDE_MODULE, "outside awa_enqueue_shards"),
    (runtime("old", -600, reported={"q": 8}), change(), True, "reported_by_snapshot",
     "reports enqueue_shards=8"),
    (runtime("new", 60, reported={"q": 1}), change(), False, "reported_by_snapshot",
     "reports enqueue_shards=1"),
])
def test_judge(rt, recorded, expected, code, reason):
    verdict = judge(rt, "q", 8, recorded)
    assert verdict.converged is expected
    assert verdict.code == code
    assert reason in verdict.reason


def test_only_live_runtimes_count_and_each_straggler_is_named():
    runtimes = [runtime("old", -60), runtime("new", 60), runtime("dead", -60, live=False)]
    result = queue_convergence(runtimes, {"q#0": 8, "q#1": 8}, {"q#0": change(), "q#1": change()})
    assert (result.converged, result.live, result.complete) == (1, 2, False)
    assert {(s.runtime.instance_id, s.physical_queue) for s in result.stragglers} == {("old", "q#0"), ("old", "q#1")}


def test_the_depth_beyond_the_count_sums_the_readable_lanes_beyond_and_is_unknown_if_one_is_unreadable():
    lanes = [{"beyond_count": False, "ready_depth": 5}, {"beyond_count": True, "ready_depth": 0}]
    assert ready_beyond(lanes) == 0
    assert ready_beyond(lanes + [{"beyond_count": True, "ready_depth": None}]) is None


@pytest.mark.parametrize("snapshot, expected", [
    ([{"queue": "q", "config": {"max_workers": 4}}], {}),  # Awa 0.6.9: nothing reported
    ([{"queue": "q", "enqueue_shards": 8}], {"q": 8}),
    ([{"queue": "q", "config": {"enqueue_shards": 4}}], {"q": 4}),
    ([{"queue": "q", "enqueue_shards": True}, "junk", {"config": {}}], {}),
    (None, {}),
])
def test_reported_shard_counts_reads_what_a_snapshot_publishes(snapshot, expected):
    assert reported_shard_counts(snapshot) == expected
