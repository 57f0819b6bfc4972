# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What awa_enqueue_shards_info says about a queue, from observed data written as plain tables."""

from __future__ import annotations

import dataclasses
import datetime

from ansible_collections.awa.operations.plugins.module_utils.schema.lanes import LaneDepth
from ansible_collections.awa.operations.plugins.module_utils.info.views import (
    DETAIL_KEYS,
    LANE_KEYS,
    NO_LIVE_RUNTIME,
    QUEUE_DETAIL_KEYS,
    queue_view,
    shards_read,
    shown,
)
from ansible_collections.awa.operations.plugins.module_utils.info.result import ShardsRead
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import never_seen, resolve_stripes

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.declared import value_problems

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.observed import (
    RUNTIME,
    change,
    grid,
    runtime,
    state,
)

MARGIN = 5.0


def depths(queue: str, shards: int, ready: dict[int, int] | None = None, readable: bool = True) -> list[LaneDepth]:
    """Lanes 1..4 x [0, shards), with ``ready[shard]`` jobs ready on priority 2 of that shard."""
    ready = ready or {}
    return [LaneDepth(queue, priority, shard, readable,
                      seq_lag=ready.get(shard, 0) if readable and priority == 2 else 0 if readable else None,
                      ready_depth=(ready.get(shard, 0) if priority == 2 else 0) if readable else None,
                      oldest_ready_age_seconds=12.34 if readable and priority == 2 and ready.get(shard) else None)
            for priority in (1, 2, 3, 4) for shard in range(shards)]


def lowered_to_2(runtimes, ready=None, recorded_to=2, lanes=None, roles=(), readable=True,
                 read_lanes=True) -> dict:
    """orders at 2 shards, with the lanes of shards 2 and 3 left from a higher count;
    the last recorded change set ``recorded_to``. ``read_lanes``: as a read with lanes: true (or false)."""
    layout = resolve_stripes("orders", None, ["orders"])
    observed = state(lanes if lanes is not None else grid("orders", 4, 4), {"orders": 2})
    recorded = {"orders": change(to_shards=recorded_to, live_ids=("old",), queue="orders")}
    return queue_view(layout, "orders", observed, {"orders": depths("orders", 4, ready, readable)}, runtimes, recorded,
                      tuple(roles), MARGIN, lanes=read_lanes)


def test_a_queue_whose_runtimes_restarted_and_whose_old_shards_are_empty_is_converged_and_drained():
    view = lowered_to_2([runtime("new", 60)], ready={0: 3})
    assert (view["converged"], view["drained"]) == (True, True)
    assert (view["runtimes_live"], view["runtimes_converged"], view["stragglers"]) == (1, 1, [])
    assert (view["ready_depth"], view["depth_beyond_count"]) == (3, 0)
    assert [(row["shard"], row["beyond_count"], row["ready_depth"]) for row in view["shards"]] == [
        (0, False, 3), (1, False, 0), (2, True, 0), (3, True, 0)]
    assert view["findings"] == []
    assert view["summary_lines"] == [
        "orders: enqueue_shards 2 (was 1, change #3 at 2026-11-29T10:00:00+00:00 by awa_migrator); partitioned FIFO: "
        "FIFO per (queue, priority, shard) across 2 shards; use ordering_key for per-key FIFO",
        "  runtimes: 1 of 1 live runtimes on the current count",
        "  ready by shard 0:3 1:0 | beyond the count (shards 2..3): none ready",
        "  converged: yes; drained: yes",
    ]


def test_a_runtime_running_at_the_change_is_a_straggler_and_ready_jobs_beyond_the_count_keep_it_undrained():
    view = lowered_to_2([runtime("old", -60, pid=41), runtime("new", 60, pid=42),
                         runtime("gone", -600, live=False, pid=43)], ready={3: 5})
    assert (view["converged"], view["drained"], view["depth_beyond_count"]) == (False, False, 5)
    assert (view["runtimes_live"], view["runtimes_converged"]) == (2, 1)
    assert [(s["pid"], s["physical_queue"]) for s in view["stragglers"]] == [(41, "orders")]
    assert "already running when the count changed (change #3)" in view["stragglers"][0]["reason"]
    assert view["summary_lines"][1].startswith("  runtimes: 1 of 2 live runtimes on the current count; "
                                               "waiting for pid 41 on host (unreported)")
    assert view["summary_lines"][2] == "  ready by shard 0:0 1:0 | beyond the count (shards 2..3): 5 ready"


def test_a_queue_read_beside_others_reports_its_own_lanes_only():
    # One read of many queues holds every queue's lanes: each queue's view takes its own (a missing lane of
    # another queue is not its finding, nor counted in its lanes).
    layout = resolve_stripes("orders", None, ["orders"])
    counts = {"events": 4, "orders": 2, "zebra": 4}
    observed = state(grid("events", 4, 2) + grid("orders", 2, 2) + grid("zebra", 4, 1), counts)
    view = queue_view(layout, "orders", observed, {"orders": depths("orders", 2)}, [runtime("new", 60)], {}, (), MARGIN)
    assert (view["lanes_complete"], view["lanes_missing"], view["findings"]) == (8, [], [])
    assert {lane["queue"] for lane in view["lanes"]} == {"orders"}
    assert [(row["queue"], row["shard"]) for row in view["shards"]] == [("orders", 0), ("orders", 1)]


def test_drained_is_not_claimed_before_every_runtime_converged():
    view = lowered_to_2([runtime("old", -60)], ready={})
    assert view["depth_beyond_count"] == 0
    assert (view["converged"], view["drained"]) == (False, False)
    converged = lowered_to_2([runtime("new", 60)], ready={3: 3})
    assert (converged["converged"], converged["drained"], converged["depth_beyond_count"]) == (True, False, 3)


def test_a_count_changed_outside_the_module_is_a_finding_with_the_fix():
    view = lowered_to_2([runtime("new", 60)], recorded_to=8)
    assert view["converged"] is False
    assert view["findings"] == [
        "orders: enqueue_shards is 2 but the last recorded change set 8: it was changed outside awa_enqueue_shards; "
        "re-apply the count with awa.operations.awa_enqueue_shards so the change is recorded."]


def test_missing_lanes_grants_and_runtime_owned_sequences_are_findings_naming_the_fix():
    lanes = grid("orders", 4, 4, missing=["awa_runtime2"], owner=RUNTIME)
    lanes[1] = dataclasses.replace(lanes[1], has_claim_head=False)  # priority 1, shard 1: below the count
    view = lowered_to_2([runtime("new", 60)], lanes=lanes, roles=[RUNTIME, "awa_runtime2"])
    assert view["lanes_missing"] == [{"queue": "orders", "priority": 1, "shard": 1}]
    first, grants, owned = view["findings"]
    assert first.startswith("orders: 1 lanes below the shard count are missing (e.g. orders priority 1 shard 1)")
    assert "role awa_runtime2 lacks SELECT/UPDATE/USAGE on 32 lane sequences" in grants
    assert "with runtime_roles including awa_runtime2" in grants
    assert owned.startswith("orders: 32 lane sequences are owned by runtime role awa_runtime")
    assert view["grants"]["missing"][0]["role"] == "awa_runtime2"
    assert view["grants"]["sequence_owners"] == {RUNTIME: 32}


def test_a_queue_the_database_has_never_seen_says_so_first_instead_of_advising_the_change_for_its_lanes():
    layout = resolve_stripes("ordres", None, [])
    said = never_seen("ordres", ["orders"])
    view = queue_view(layout, "ordres", state(grid("ordres", 1, 0), {"ordres": 1}), {}, [runtime("new", 60)], {}, (),
                      MARGIN, never_seen=said)
    assert view["known"] is False and view["lanes_missing"], "its lanes are missing, as for any queue without lanes"
    assert view["findings"] == [f"ordres: {said}"]
    assert "awa_enqueue_shards" not in " ".join(view["findings"])
    assert lowered_to_2([runtime("new", 60)])["known"] is True


def test_unreadable_lanes_make_the_depth_unknown_and_the_queue_undrained():
    view = lowered_to_2([runtime("new", 60)], readable=False)
    assert (view["ready_depth"], view["depth_beyond_count"], view["drained"]) == (None, None, False)
    assert view["summary_lines"][2] == "  ready by shard 0:? 1:? | beyond the count: unknown (unreadable)"
    assert view["findings"] == ["orders: 16 lanes have sequences the connected role cannot read (SELECT), so "
                                "their depth is unknown. Connect as their owner or a member of it."]


def read_of(runtimes) -> dict:
    return shards_read({"orders": lowered_to_2(runtimes)}, runtimes,
                       read_at=datetime.datetime.now(datetime.timezone.utc), findings=[], warnings=[],
                       known_runtimes=frozenset(), expected_new_runtimes=0)


def test_converged_with_no_live_runtime_says_that_nothing_runs():
    """0 of 0 live runtimes is converged by the rule, but nothing took the count: the read says so."""
    gone = read_of([runtime("old", -60, live=False)])
    assert gone["converged"] and gone["queues"]["orders"]["runtimes_live"] == 0
    assert gone["findings"] == [NO_LIVE_RUNTIME]
    assert "start them and read again" in NO_LIVE_RUNTIME
    assert read_of([runtime("new", 60)])["findings"] == []


def test_a_read_without_lanes_keeps_the_convergence_and_says_nothing_of_the_lanes():
    """lanes: false (a batch wait): the count, the stragglers and the last change; no lane keys, depth or drained."""
    lanes = grid("orders", 4, 4, missing=["awa_runtime2"])
    runtimes = [runtime("old", -60, pid=41), runtime("new", 60, pid=42)]
    full = lowered_to_2(runtimes, ready={3: 5}, lanes=lanes, roles=["awa_runtime2"], recorded_to=8)
    light = lowered_to_2(runtimes, ready={3: 5}, lanes=lanes, roles=["awa_runtime2"], recorded_to=8, read_lanes=False)
    assert set(full) - set(light) == set(LANE_KEYS)
    assert {key: light[key] for key in light if key not in ("findings", "summary_lines")} == {
        key: full[key] for key in light if key not in ("findings", "summary_lines")}
    # The grant finding comes from the lanes; the count changed outside the module from the ledger.
    assert light["findings"] == [finding for finding in full["findings"] if "lacks" not in finding] != []
    assert light["summary_lines"] == [line for line in full["summary_lines"] if "ready by shard" not in line][:-1] + [
        "  converged: no; 1 finding(s)"]
    read = shards_read({"orders": light}, runtimes, read_at=datetime.datetime.now(datetime.timezone.utc), findings=[],
                       warnings=[], known_runtimes=frozenset({"old"}), expected_new_runtimes=1, lanes=False)
    assert "drained" not in read and [view["pid"] for view in read["new_runtimes"]] == [42]
    assert value_problems(read, ShardsRead) == []


def test_a_module_returns_its_summary_lines_first_and_the_detail_only_when_asked():
    """Every runtime (stale ones too), each lane and shard, and the summary said again are the detail (a screen for
    one queue without it); the read itself keeps all of it, and so does the result with detail."""
    runtimes = [runtime("old", -60, pid=41), runtime("new", 60, pid=42), runtime("gone", -600, live=False, pid=43)]
    read = shards_read({"orders": lowered_to_2(runtimes, ready={3: 5})}, runtimes,
                       read_at=datetime.datetime.now(datetime.timezone.utc), findings=[], warnings=[],
                       known_runtimes=frozenset(), expected_new_runtimes=0)
    brief, whole = shown(read, detail=False), shown(read, detail=True)
    assert next(iter(brief)) == next(iter(whole)) == "summary_lines" and whole == read
    assert set(read) - set(brief) == set(DETAIL_KEYS)
    assert set(read["queues"]["orders"]) - set(brief["queues"]["orders"]) == set(QUEUE_DETAIL_KEYS)
    assert brief["queues"]["orders"]["stragglers"] == read["queues"]["orders"]["stragglers"] != []
    assert brief["summary_lines"] == read["summary_lines"] and value_problems(brief, ShardsRead) == []
    assert "runtimes" in read and "lanes" in read["queues"]["orders"], "the read is left as it was"
    failed = {"msg": "could not connect", "disconnected": True}
    assert shown(failed, detail=False) == failed
