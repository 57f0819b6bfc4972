# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the role prints: the change, the queues to drain, and a summary that never passes a plan off as done."""

from __future__ import annotations

import copy

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.record import window_summary
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.summary import (
    change_lines,
    count_problems,
    lowered_queues,
    table,
    window_verdict,
)
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.recorded import load
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import runtime, systemd_host, unit


CONVERGED, UNCONVERGED = load("info-converged"), load("info-unconverged")
CHECK, REAL = load("change-check"), load("change-real")
DEMO_TO_6 = [{"queue": "demo", "shards": 6}]


def summary(views: dict, change: dict | None = None, check_mode: bool = False, inventory: dict | None = None,
            before: dict | None = None, ended: str | None = None) -> list[str]:
    """The summary's lines (record.window_summary) of a window whose queues were last read as ``views``, after
    ``change``; ``inventory``: the rollout's producer hosts (``hosts``, ``pid_hosts``) and the read's ``runtimes``."""
    rollout = None if inventory is None else {"concerned_queues": None, **inventory}
    reads = {"before": before, "change": change and dict(change, observed={"queues": views}),
             "converged": {"queues": views, "runtimes": (inventory or {}).get("runtimes", []), "read_at": ended}}
    asked = {"queues": DEMO_TO_6, "check_mode": check_mode}
    return window_summary(reads, {"rollout": rollout, "stop": None}, asked)["lines"]


def test_change_lines_say_what_was_done_or_would_be():
    assert change_lines(CHECK, DEMO_TO_6, True)[0] == (
        "demo: enqueue_shards 4 -> 6 on demo - check mode, would create 8 lanes and add 16 grants in one transaction")
    real = change_lines(REAL, DEMO_TO_6, False)
    assert real[0] == ("demo: enqueue_shards 4 -> 6 on demo - changed in one transaction: 8 lanes created, "
                       "16 grants added, recorded as change #2")
    assert real[1].startswith("  ordering: partitioned FIFO")
    unchanged = copy.deepcopy(REAL)
    unchanged["queues"]["demo"].update(changed=False, previous_shards={"demo": 6})
    assert change_lines(unchanged, DEMO_TO_6, False)[0] == "demo: enqueue_shards 6 -> 6 on demo - already so, nothing written"


def test_lowered_queues_are_those_whose_last_change_lowered_the_count():
    assert lowered_queues(UNCONVERGED) == []
    lowered = copy.deepcopy(UNCONVERGED)
    lowered["queues"]["demo"]["last_change"]["demo"].update(from_shards=8, to_shards=2)
    assert lowered_queues(lowered) == ["demo"]
    assert lowered_queues({"skipped": True}) == []


def test_the_summary_after_a_real_change_shows_before_and_after_and_n_of_m():
    lines = summary(UNCONVERGED["queues"], REAL)
    header = [cell.strip() for cell in lines[0].split(" | ")]
    assert header == ["queue", "S before -> after", "runtimes on S", "ready jobs by shard", "beyond S",
                      "converged / drained"]
    row = [cell.strip() for cell in lines[2].split(" | ")]
    assert row == ["demo", "4 -> 6", "0 of 3", "0:? 1:0 2:0 3:0 4:0 5:0", "0", "no / no"]
    assert lines[4:-3] == UNCONVERGED["queues"]["demo"]["summary_lines"]


def test_the_check_mode_summary_says_what_is_planned_and_what_is_true_now():
    # Check mode: the read is of the running system (4 shards, every runtime on it), the change only planned.
    lines = summary(CONVERGED["queues"], CHECK, check_mode=True)
    assert lines[0].split(" | ")[1:3] == ["S now -> planned", "runtimes on planned S"]
    row = [cell.strip() for cell in lines[2].split(" | ")]
    assert row[1:3] == ["4 -> 6", "0 of 2 (they restart)"] and row[5] == "not yet (check mode)"
    assert "yes / yes" not in lines[2]
    assert lines[-1].startswith("Check mode: nothing was changed, restarted or waited for.")


def test_the_wait_entry_point_takes_the_count_before_from_the_ledger():
    row = [cell.strip() for cell in summary(UNCONVERGED["queues"])[2].split(" | ")]
    assert row[1] == "4 -> 6"


def test_over_sixteen_shards_the_total_is_shown():
    view = copy.deepcopy(UNCONVERGED["queues"]["demo"])
    view["shards"] = [{"queue": "demo", "shard": shard, "beyond_count": False, "ready_depth": 2}
                      for shard in range(20)]
    row = summary({"demo": view})[2]
    assert "40 over 20 shards" in row


def test_table_aligns_columns_under_a_rule():
    assert table(("a", "bb"), [["xxx", "y"]]) == ["a   | bb", "--------", "xxx | y"]


def test_with_the_inventory_n_of_m_counts_its_runtimes_and_converged_is_never_said_while_one_is_missing():
    # The reported bug: 3 runtimes on the count, all converged by Awa's view, but the inventory has 4 services.
    started = 1764520000.0
    units = {f"p{index}": unit(f"p{index}", started=started, pid=10 + index) for index in range(4)}
    hosts = [systemd_host("app1", units)]
    runtimes = [runtime(10 + index, started + 1) for index in range(3)] + [runtime(99, started + 1)]
    view = copy.deepcopy(CONVERGED["queues"]["demo"])
    lines = summary({"demo": view}, inventory={"hosts": hosts, "runtimes": runtimes, "pid_hosts": []})
    row = [cell.strip() for cell in lines[2].split(" | ")]
    assert row[2] == "3 of 4, 1 outside" and row[5] == "no / no"
    assert lines[4].startswith("inventory: 3 of 4, 1 outside runtimes of the producer services live on the count; "
                               "runtimes matched to services by pid")
    # Every service is told apart by pid: pid 99 runs outside the window, named.
    assert lines[5].startswith("  1 live runtime outside the change window - no producer service of the inventory runs "
                               "them (another window's, on another part of the inventory, or a producer the inventory "
                               "does not list): pid 99 on host (unreported) (instance instance-99-"), lines[5]
    assert lines[6] == "  without a live runtime on the count: app1/p3"
    live = runtimes[:3] + [runtime(13, started + 1)]
    done = summary({"demo": view}, inventory={"hosts": hosts, "runtimes": live, "pid_hosts": []})
    assert [cell.strip() for cell in done[2].split(" | ")][2:][::3] == ["4 of 4", "yes / yes"]


WINDOW = "The window: 2026-11-30 16:55:20 -> 16:56:40 UTC (80s, the database's clock)."


def test_a_real_run_s_summary_ends_with_the_window_s_times_and_its_back_out_and_a_dry_run_s_does_not():
    before = {"read_at": "2026-11-30T16:55:20+00:00"}
    lines = summary(converged_at(6)["queues"], REAL, before=before, ended="2026-11-30T16:56:40+00:00")
    backout = "To back out, run your change-window playbook again with enqueue_shards_queues: "
    assert lines[-3:-1] == ["", WINDOW] and lines[-1].startswith(backout)
    check = summary(CONVERGED["queues"], CHECK, check_mode=True, before=before, ended="2026-11-30T16:56:40+00:00")
    assert WINDOW not in check and not any(line.startswith(backout) for line in check)
    # A count this run did not set is not its to back out.
    resumed = summary(CONVERGED["queues"], before=before, ended="2026-11-30T16:56:40+00:00")
    assert resumed[-2:] == ["", WINDOW]


def converged_at(shards: int) -> dict:
    read = copy.deepcopy(CONVERGED)
    read["queues"]["demo"]["enqueue_shards"] = {"demo": shards}
    return read


def test_the_verdict_refuses_a_count_it_did_not_set_and_says_how_to_resume():
    # The run: --start-at-task at the wait, 2 asked, the queue still at 4, every runtime on 4.
    verdict = window_verdict([{"queue": "demo", "shards": 2}], views=CONVERGED["queues"])
    assert not verdict["ok"]
    assert verdict["message"].startswith(
        "The change window is not done: demo holds enqueue_shards 4, not the 2 asked. This run did not set it: it "
        "started past the change (--start-at-task, or --tags without enqueue_shards_change), or another change came "
        "after it. Nothing more was done. To resume, run the same command again without --start-at-task (or those "
        "--tags): it changes nothing already done")
    assert verdict["message"].endswith("or, once the count asked is set, only the wait (--tags "
                                       "enqueue_shards_wait,enqueue_shards_summary, or the role's wait entry point).")
    assert count_problems(DEMO_TO_6, {}) == ["demo was not read"]


def test_the_verdict_is_done_only_when_converged_and_drained_after_a_lowering_then_asks_the_inventory():
    assert window_verdict([{"queue": "demo", "shards": 4}], views=CONVERGED["queues"]) == {
        "ok": True, "message": "Every queue runs the count asked, converged (and drained after a lowering)."}
    unconverged = window_verdict(DEMO_TO_6, views=UNCONVERGED["queues"])
    assert not unconverged["ok"] and unconverged["message"].startswith(
        "The change window is not done: demo not converged (or not drained after a lowering) at the last read")
    lowered = copy.deepcopy(CONVERGED)
    lowered["queues"]["demo"].update(drained=False, enqueue_shards={"demo": 2})
    lowered["queues"]["demo"]["last_change"]["demo"].update(from_shards=4, to_shards=2)
    assert not window_verdict([{"queue": "demo", "shards": 2}], views=lowered["queues"])["ok"]
    # The inventory's verdict names hosts and services: it speaks before the queues' own.
    inventory = {"ok": False, "message": "The change window is not done for the inventory: ..."}
    assert window_verdict(DEMO_TO_6, views=UNCONVERGED["queues"], inventory_verdict=inventory) == inventory
    done = {"ok": True, "message": "Every service of the inventory is done: ..."}
    assert window_verdict([{"queue": "demo", "shards": 4}], views=CONVERGED["queues"], inventory_verdict=done) == done
    assert not window_verdict(DEMO_TO_6, views=UNCONVERGED["queues"], inventory_verdict=done)["ok"]
