# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight: every refusal is a whole message that says nothing was changed and what to do."""

from __future__ import annotations

import copy
import datetime
import json
from pathlib import Path

import pytest

from ansible_collections.awa.operations.plugins.plugin_utils.rollout import preflight as rollout_preflight

READ = json.loads((Path(__file__).parents[1] / "fixtures" / "info-converged.json").read_text(encoding="utf-8"))
DEMO = [{"queue": "demo", "shards": 8}]


def preflight(read: dict, queues: list, repair: bool, *, watched: dict | None = None, drain_timeout: float = 1800) -> dict:
    """The filter as the role calls it: the read, the read again, and what the window is asked."""
    return rollout_preflight.preflight(read, watched, {"queues": queues, "repair": repair, "drain_timeout": drain_timeout})


def with_view(**changes) -> dict:
    read = copy.deepcopy(READ)
    read["queues"]["demo"].update(changes)
    return read


@pytest.mark.parametrize("message", [
    "could not connect to database 'awa' on 127.0.0.1:5999 as 'awa_migrator': connection refused",
    "The queue-storage engine is not active in database 'app' (state=canonical, engine=canonical)",
    "runtime_roles do not exist in database 'app''s cluster: awa_runtme. Create them (CREATE ROLE ... LOGIN) or "
    "correct the names.",
])
def test_a_failed_read_is_refused_with_the_modules_own_message(message):
    # What ansible registers for a failed module run with failed_when: false.
    verdict = preflight({"failed": False, "msg": message, "changed": False}, DEMO, True)
    assert verdict == {"lines": [], "refusals": [f"Preflight refused, nothing was changed: {message}"], "backlog": []}


def test_a_healthy_queue_prints_its_summary_and_findings_and_is_not_refused():
    verdict = preflight(READ, DEMO, True)
    assert verdict["refusals"] == []
    assert verdict["lines"][:len(READ["summary_lines"])] == READ["summary_lines"]
    assert f"finding: {READ['findings'][0]}" in verdict["lines"]


def test_stripes_that_do_not_match_the_stored_layout_are_refused():
    verdict = preflight(READ, [{"queue": "demo", "shards": 8, "stripes": 2}], True)
    assert verdict["refusals"] == [
        "Preflight refused queue demo, nothing was changed: enqueue_shards_queues sets stripes: 2, but the queue is "
        "stored with 1 stripe(s) (demo). Set stripes to the runtimes' queue_storage_queue_stripe_count, or leave it "
        "out to use the stored layout."]


def test_missing_lanes_are_refused_without_repair_and_announced_with_it():
    read = with_view(lanes_missing=[{"queue": "demo", "priority": 1, "shard": 0}], findings=["demo: 1 lanes ..."])
    refused = preflight(read, DEMO, False)["refusals"]
    assert len(refused) == 1 and refused[0].startswith(
        "Preflight refused queue demo, nothing was changed: lanes or runtime-role grants are missing and "
        "enqueue_shards_repair is false. demo: 1 lanes ...")
    repaired = preflight(read, DEMO, True)
    assert repaired["refusals"] == []
    assert "note: demo: the change provisions the missing lanes and grants found (enqueue_shards_repair)" \
        in repaired["lines"]


def test_a_lowering_whose_old_shards_cannot_be_read_is_refused():
    # The recorded queue has 4 shards: make shard 3's lanes unreadable and lower to 2.
    read = copy.deepcopy(READ)
    for lane in read["queues"]["demo"]["lanes"]:
        lane["readable"] = lane["shard"] != 3
    refused = preflight(read, [{"queue": "demo", "shards": 2}], True)["refusals"]
    assert len(refused) == 1 and "lowering to 2 needs the ready depth of shards 2 and above" in refused[0]
    assert "4 of those lanes have sequences the connected role cannot read" in refused[0]


def test_a_paused_queue_is_reported_and_a_lowering_of_it_warned():
    read = with_view(paused=True)
    raise_lines = preflight(read, DEMO, True)["lines"]
    assert "note: demo is paused: its workers claim nothing until it is resumed (awa queue resume demo)" in raise_lines
    lower_lines = preflight(read, [{"queue": "demo", "shards": 2}], True)["lines"]
    assert any("so after this lowering its old shards cannot drain" in line for line in lower_lines)


NEVER_SEEN = ("the database has never seen queue 'demo' - no awa.queue_meta row, no lanes, no jobs and no runtime "
              "serving it (did you mean demo2?)")


def test_a_queue_the_database_has_never_seen_is_refused_unless_its_entry_asks_for_a_new_queue():
    read = with_view(known=False, findings=[f"demo: {NEVER_SEEN}"],
                     lanes_missing=[{"queue": "demo", "priority": 1, "shard": 0}])
    for repair in (True, False):
        assert preflight(read, DEMO, repair)["refusals"] == [
            f"Preflight refused queue demo, nothing was changed: {NEVER_SEEN}. A change window changes queues that "
            "exist: correct its name in enqueue_shards_queues, or - to prepare a new queue before its first producer "
            "- set new_queue: true on its entry."]
    prepared = preflight(read, [{"queue": "demo", "shards": 8, "new_queue": True}], False)
    assert prepared["refusals"] == []
    assert "note: demo is new to the database: the change prepares it - its lanes, grants and count (new_queue)" \
        in prepared["lines"]
    assert not any("provisions the missing lanes" in line for line in prepared["lines"])


LOWER_TO_2 = [{"queue": "demo", "shards": 2}]


def with_backlog(claimed: int, seconds: float = 5.0, **view) -> tuple[dict, dict]:
    """The read before the change with 300 ready jobs on each of shards 2 and 3 of priority 2, and the read again
    ``seconds`` later after ``claimed`` more jobs of shard 2 were claimed."""
    first, later = with_view(**view), with_view(**view)
    later["read_at"] = (datetime.datetime.fromisoformat(first["read_at"])
                        + datetime.timedelta(seconds=seconds)).isoformat()
    for read, taken in ((first, 0), (later, claimed)):
        for lane in read["queues"]["demo"]["lanes"]:
            if lane["ready_depth"] is None:  # the recording's one lane the role may not read
                lane.update(readable=True, ready_depth=0, seq_lag=0, enqueue_cursor=1)
            if lane["priority"] == 2 and lane["shard"] >= 2:
                lane.update(ready_depth=300 - (taken if lane["shard"] == 2 else 0), enqueue_cursor=1000,
                            seq_lag=300 - (taken if lane["shard"] == 2 else 0))
    return first, later


def test_a_lowering_whose_backlog_cannot_drain_in_time_is_warned_of_before_the_change():
    read, later = with_backlog(claimed=50)  # 10 jobs a second: 600 jobs need a minute
    assert preflight(read, LOWER_TO_2, True)["backlog"] == ["demo"] and preflight(read, DEMO, True)["backlog"] == []
    verdict = preflight(read, LOWER_TO_2, True, watched=later, drain_timeout=30)
    assert verdict["refusals"] == []
    assert verdict["lines"][-1] == (
        "warning: lowering demo to 2 leaves 600 ready jobs on shards 2 and above: at the rate its jobs were claimed "
        "before the change (10.0 jobs/s, the new shards' jobs among them) they need at least 60s, more than "
        "enqueue_shards_drain_timeout (30s), and the drain wait would time out. Raise enqueue_shards_drain_timeout, "
        "or give the queue more workers")
    within = preflight(read, LOWER_TO_2, True, watched=later, drain_timeout=1800)["lines"]
    assert within[-1] == ("note: lowering demo to 2 leaves 600 ready jobs on shards 2 and above: about 60s to drain at "
                          "the rate its jobs were claimed before the change (10.0 jobs/s), within "
                          "enqueue_shards_drain_timeout (30 min)")


def test_a_backlog_no_worker_claims_or_whose_rate_cannot_be_read_is_warned_of_plainly():
    read, idle = with_backlog(claimed=0)
    assert preflight(read, LOWER_TO_2, True, watched=idle, drain_timeout=1800)["lines"][-1].startswith(
        "warning: lowering demo to 2 leaves 600 ready jobs on shards 2 and above, and none of its jobs was claimed "
        "while preflight watched it: no worker serves it, so they cannot drain within enqueue_shards_drain_timeout "
        "(30 min)")
    failed = {"failed": False, "msg": "could not connect to database 'awa' on db1:5432: connection refused"}
    assert preflight(read, LOWER_TO_2, True, watched=failed, drain_timeout=1800)["lines"][-1] == (
        "warning: lowering demo to 2 leaves 600 ready jobs on shards 2 and above; how long they take to drain is "
        "unknown: preflight could not read how fast the queue's jobs are claimed (could not connect to database "
        "'awa' on db1:5432: connection refused), so it cannot tell whether they drain within "
        "enqueue_shards_drain_timeout (30 min)")
    # Paused: the note about the pause says it cannot drain; no second word about it.
    paused, dummy = with_backlog(claimed=0, paused=True)
    assert not any(line.startswith("warning:") for line in preflight(paused, LOWER_TO_2, True, watched=idle,
                                                                     drain_timeout=1800)["lines"])
    # A raise: nothing about a drain.
    assert not any("ready jobs on shards" in line for line in preflight(read, DEMO, True, watched=idle)["lines"])
