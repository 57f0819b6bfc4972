# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's state, one record: the plan makes it, each batch reads what it restarts and waits for, and carries
it on; what is only for display stays apart."""

from __future__ import annotations

import datetime

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.state import (
    Rollout,
    after_batch,
    plan,
)
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.batch import (
    batch_services,
    expectations,
    next_batch,
    pause_seconds,
)
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.recorded import load
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import (
    runtime,
    settings,
    systemd_result,
    unit,
)

UNCONVERGED = load("info-unconverged")  # 0 of 3 runtimes on the count after change #2 (demo 4 -> 6)
CHANGE_AT = datetime.datetime.fromisoformat(UNCONVERGED["queues"]["demo"]["last_change"]["demo"]["changed_at"]).timestamp()
READ_AT = datetime.datetime.fromisoformat(UNCONVERGED["read_at"]).timestamp()
BEFORE = CHANGE_AT - 60
HEALTH = {"deadlocks": 0, "stats_reset": None}
ASKED = {"queues": [{"queue": "demo", "shards": 6}], "batch_size": 1,
         "max_fail_percentage": 0.0, "canary_pause": 30, "batch_pause": 0, "limits": {"deadlocks": 0},
         "restart_timeout": 120, "converge_timeout": 300, "drain_timeout": 1800, "report_dir": "", "check_mode": False}
CLI = {"args": ["play.yml"], "inventory": ["inventory"]}


def two_hosts(change: dict | None = None, **asked) -> Rollout:
    """app1/a and app2/a started before the change (``change``: its result; an empty one by default): one batch
    each, app1's first."""
    hosts = [settings("app1", ["a"]), settings("app2", ["a"])]
    reads = [systemd_result({"a": unit("a", started=BEFORE, pid=pid)}, READ_AT + 2) for pid in (11, 12)]
    return plan(list(zip(hosts, [{}, {}], reads)), read=UNCONVERGED,
                change={"queues": {}} if change is None else change,
                before={"health": HEALTH}, settings={**ASKED, **asked}, cli_args=CLI)


def test_the_plan_is_the_rollouts_first_state_with_its_settings_and_its_back_out():
    rollout = two_hosts()
    assert rollout["batches"] == [[["app1", "a"]], [["app2", "a"]]]
    assert (rollout["restarted"], rollout["verdicts"], rollout["gone"], rollout["problems"]) == ([], [], [], [])
    assert rollout["known_runtimes"] == [entry["instance_id"] for entry in UNCONVERGED["runtimes"]]
    assert (rollout["canary_pause"], rollout["batch_pause"], rollout["gates"]) == (
        30, 0, {"baseline": HEALTH, "queues": ["demo"], "limits": {"deadlocks": 0}})
    assert rollout["backout"].startswith("To back out (the previous counts, the same options): ansible-playbook -i "
                                         "inventory play.yml -e ")
    shown = rollout["shown"]
    assert shown["lines"][0] == shown["headline"] and shown["headline"].startswith("Restarting 2 producer service(s)")
    # Every host restarts: the estimate said before the change holds, and is not said again.
    assert not any(line.startswith("The window should take") for line in shown["lines"])
    assert "app1/a: restart - it started before the change of demo" in shown["lines"]


def test_a_plan_that_restarts_fewer_batches_than_the_estimate_counted_says_its_own():
    hosts = [settings("app1", ["a"]), settings("app2", ["a"]), settings("app3", ["a"])]
    # app3's service is stopped: it is left alone, two batches of the three the estimate before the change counted.
    reads = [systemd_result({"a": unit("a", started=BEFORE, pid=pid)}, READ_AT + 2) for pid in (11, 12)] + [
        systemd_result({"a": unit("a", state="inactive", sub="dead")}, READ_AT + 2)]
    rollout = plan(list(zip(hosts, [{}, {}, {}], reads)), read=UNCONVERGED, change={"queues": {}},
                   before={"health": HEALTH}, settings=ASKED, cli_args=CLI)
    assert rollout["batches"] == [[["app1", "a"]], [["app2", "a"]]]
    # The canary's pause between the two: 30 s + 15 s a batch + 30 s for the rest, as no window was measured.
    assert rollout["shown"]["lines"][1] == (
        "The window should take about 90s (2 batch(es), 15s a batch until a window's record has measured one); at "
        "least 30s (the pauses), at most 14 min (the timeouts and pauses, a minute a batch for its restarts and two "
        "for the rest)")


def test_a_plan_that_cannot_restart_says_so_with_the_back_out_except_in_check_mode():
    hosts = [settings("app1", ["gone"])]
    reads = [systemd_result({"gone": unit("gone", state="inactive", sub="dead", load_state="not-found")}, READ_AT)]
    for check_mode in (False, True):
        rollout = plan(list(zip(hosts, [{}], reads)), read=UNCONVERGED, change=None, before=None,
                       settings={**ASKED, "check_mode": check_mode}, cli_args=None)
        assert rollout["problems"] and rollout["gates"]["baseline"] is None
        refusal = rollout["shown"]["refusal"]
        assert refusal.startswith(f"Nothing was restarted: {rollout['problems'][0]}. ")
        assert refusal.endswith("" if check_mode else rollout["backout"])
        assert ("To back out" in refusal) is not check_mode


def test_a_host_left_out_since_the_reach_keeps_why():
    hosts = [settings("app1", ["a"])]
    rollout = plan(list(zip(hosts, [{"unreachable": True, "msg": "ssh: no route to host"}], [{"skipped": True}])),
                   read=UNCONVERGED, change=None, before=None, settings={**ASKED, "max_fail_percentage": 100.0},
                   cli_args=None)
    assert rollout["gone"] == ["app1"] and rollout["skipped"] == ["app1/a"]
    assert rollout["hosts"][0]["services"][0]["detail"] == "ssh: no route to host"


def test_a_planned_batch_tells_each_host_its_services_then_what_its_wait_waits_for_and_how_long_to_watch_it():
    rollout = two_hosts()
    assert batch_services(rollout, 0) == {"app1": ["a"]}
    assert expectations(rollout, {})["restarted_services"] == [], "nothing to wait for before its hosts restarted"
    # Every play host's restart comes in; only the batch's own count.
    restarts = {"app1": systemd_result({"a": unit("a", pid=21, started=READ_AT + 5)}, READ_AT + 6, restart=("a",)),
                "app2": {"skipped": True}}
    index, ran = next_batch(rollout, restarts)
    assert (index, ran) == (0, {"app1": restarts["app1"]})
    # No live runtime has a pid of these hosts' services: their runtimes are counted, not told apart by pid.
    assert rollout["pid_hosts"] == []
    assert expectations(rollout, ran) == {"restarted_services": [], "expected_new_runtimes": 1}
    back = {"new_runtimes": [runtime(21, READ_AT + 5.5)], "expected_new_runtimes": 1, "health": HEALTH}
    assert pause_seconds(rollout, index, back) == 30, "the canary's own pause, from the plan's settings"
    crossed = dict(back, health={"deadlocks": 2, "stats_reset": None})
    assert pause_seconds(rollout, index, crossed) == 0, "a batch over a gate is not watched"


def test_after_a_batch_the_record_carries_what_it_did_judged_on_its_last_read():
    rollout = two_hosts()
    restarts = {"app1": systemd_result({"a": unit("a", pid=21, started=READ_AT + 5)}, READ_AT + 6, restart=("a",)),
                "app2": {"skipped": True}}
    wait = {"runtimes": [runtime(21, READ_AT + 5.5)], "new_runtimes": [runtime(21, READ_AT + 5.5)],
            "expected_new_runtimes": 1, "health": HEALTH}
    window = after_batch({"rollout": rollout, "stop": None}, restarts, [wait, {"skipped": True}])
    after = window["rollout"]
    assert after["restarted"] == ["app1/a"] and len(after["verdicts"]) == 1 and after["verdicts"][-1]["ok"]
    assert after["batches"] == rollout["batches"] and after["shown"] == rollout["shown"]
    assert window["stop"] is None
    assert next_batch(after, restarts) == (1, {"app2": restarts["app2"]}), "the next batch: the first not judged yet"
    # The watch after the pause is the batch's last read when it ran: there a gate crossed stops the rollout, and
    # the window.
    watched = dict(wait, health={"deadlocks": 5, "stats_reset": None})
    stopped = after_batch({"rollout": rollout, "stop": None}, restarts, [wait, watched])
    verdict = stopped["rollout"]["verdicts"][-1]
    assert not verdict["ok"] and "health gate deadlocks: 5" in verdict["message"]
    assert verdict["message"].endswith(rollout["backout"])
    assert stopped["stop"] == {"task": "Batch | wait for the runtimes of the services it restarted, watch it for its "
                                       "pause, and judge it", "message": verdict["message"], "hosts": ["app1"]}
