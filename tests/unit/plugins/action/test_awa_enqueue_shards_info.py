# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The info module's action plugin: how it polls the module, what it prints, and how it ends.

The role's internal read (plugins/action/__role/enqueue_shards_rollout_info.py)
is the same plugin for its own module, with the rollout's options: the tests
of those options (``delay``, ``wait: restarted``) run it, and the public
plugin refuses them.

The module runs are scripted by substituting ``_execute_module`` (the seam
Ansible's action plugins call to run a module), and the wait runs on a fake
clock, so no connection, database or sleep is involved. What Ansible does with
the module under async is not scripted here: tests/functional/test_async.py
runs it with ansible-playbook.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.awa.operations.plugins.action import awa_enqueue_shards_info as plugin
from ansible_collections.awa.operations.plugins.action.__role import enqueue_shards_rollout_info as rollout_plugin

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.info.test_wait import FakeClock
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout.test_state import (
    HEALTH,
    READ_AT,
    UNCONVERGED,
    two_hosts,
)
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import runtime, systemd_result, unit

STRAGGLER = {"instance_id": "i-1", "hostname": None, "pid": 42, "seconds_since_start": 90.0,
             "reason": "it was already running when the count changed (change #3)"}


def polled(converged: bool, runtimes_converged: int = 1) -> dict:
    """One result of the module run with ``wait: none`` (the keys the plugin reads; ``failed``, as Ansible's
    _execute_module gives it for a module that ran)."""
    return {"changed": False, "failed": False, "converged": converged, "drained": converged, "new_runtimes": [],
            "expected_new_runtimes": 0,
            "queues": {"orders": {"converged": converged, "drained": converged, "runtimes_live": 2,
                                  "runtimes_converged": 2 if converged else runtimes_converged,
                                  "enqueue_shards": {"orders": 8}, "depth_beyond_count": 0, "paused": False,
                                  "stragglers": [] if converged else [STRAGGLER]}}}


class Harness:
    """The action plugin with scripted module results, a fake clock and captured display lines."""

    def __init__(self, monkeypatch, args: dict, results: list[dict], async_val: int = 0, *,
                 action: type = plugin.ActionModule) -> None:
        task = SimpleNamespace(args=args, async_val=async_val, check_mode=False, action=action.MODULE)
        connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/tmp/unused"))
        # shared_loader_obj: a required argument before ansible-core 2.19.
        self.action = action(task, connection, play_context=None, loader=None, templar=None, shared_loader_obj=None)
        # What Ansible's plugin loader sets on the plugin it loads (ansible-core 2.19 has a default, earlier ones none).
        self.action._load_name = action.MODULE
        self.clock = FakeClock()
        self.action.clock = self.clock
        self.action.sleep = self.clock.sleep
        self.calls: list[dict] = []
        self.lines: list[str] = []
        scripted = iter(results)

        def execute_module(module_name=None, module_args=None, task_vars=None, **_):
            self.calls.append({"module": module_name, "args": dict(module_args)})
            # As ActionBase._execute_module does: Ansible's own arguments go into the dict it is given.
            module_args.update(_ansible_check_mode=False, _ansible_version="2.21")
            return dict(next(scripted))

        self.action._execute_module = execute_module  # pylint: disable=protected-access
        monkeypatch.setattr(plugin.display, "display", self.lines.append)

    def run(self) -> dict:
        return self.action.run(task_vars={"inventory_hostname": "db1"})


ARGS = {"login_host": "db1", "login_password": "s3cret", "queue": "orders", "wait": "converged",
        "wait_timeout": 60, "wait_sleep": 5}


def test_it_polls_the_module_without_wait_until_converged_printing_a_line_per_poll(monkeypatch):
    harness = Harness(monkeypatch, ARGS, [polled(False), polled(False), polled(True)])
    result = harness.run()
    assert [call["module"] for call in harness.calls] == ["awa.operations.awa_enqueue_shards_info"] * 3
    assert all(call["args"] == dict(ARGS, wait="none", detail=True) for call in harness.calls)
    assert harness.clock.sleeps == [5, 5]
    assert harness.lines == [
        "[db1]     0s of 60s waiting until converged: orders: 1/2 runtimes on 8 shards, 0 ready beyond the count",
        "[db1]     5s of 60s waiting until converged: orders: 1/2 runtimes on 8 shards, 0 ready beyond the count",
        "[db1]    10s of 60s done: orders: 2/2 runtimes on 8 shards, 0 ready beyond the count",
    ]
    assert not result.get("failed")
    assert (result["converged"], result["waited"], result["polls"], result["duration"]) == (True, True, 3, 10)


@pytest.mark.parametrize("detail", [False, True])
def test_every_poll_reads_the_whole_state_and_the_wait_returns_what_the_task_asks(monkeypatch, detail):
    """A drain compares each lane across polls: every poll asks for the detail, and the result leaves it out unless
    the task asks for it too (views.shown), on a timeout as well."""
    full = dict(polled(True), runtimes=[{"instance_id": "i-1"}], summary="orders: ...",
                summary_lines=["orders: ..."])
    full["queues"]["orders"].update(lanes=[], shards=[], summary_lines=["orders: ..."])
    for results, args in (([full], ARGS), ([dict(full, converged=False)] * 4, dict(ARGS, wait_timeout=12))):
        result = Harness(monkeypatch, dict(args, detail=detail), results).run()
        assert next(iter(result)) == "summary_lines"
        assert {"runtimes", "new_runtimes", "summary"} <= result.keys() if detail else \
            not {"runtimes", "new_runtimes", "summary"} & result.keys()
        assert ("lanes" in result["queues"]["orders"]) is detail and "stragglers" in result["queues"]["orders"]


def draining(depth: int) -> dict:
    """A poll of a drain: every runtime on the count, ``depth`` ready jobs beyond it."""
    result = polled(True)
    result["queues"]["orders"].update(drained=depth == 0, depth_beyond_count=depth)
    return dict(result, drained=depth == 0)


def test_a_drain_s_lines_say_the_timeout_and_the_time_left_at_the_rate_its_depth_falls(monkeypatch):
    harness = Harness(monkeypatch, dict(ARGS, wait="drained", wait_timeout=1800),
                      [draining(300), draining(250), draining(250), draining(100), draining(0)])
    assert not harness.run().get("failed")
    assert harness.lines == [
        "[db1]     0s of 1800s waiting until drained: orders: 2/2 runtimes on 8 shards, 300 ready beyond the count",
        # 50 jobs in 5 s: 10 a second, 250 left.
        "[db1]     5s of 1800s waiting until drained: orders: 2/2 runtimes on 8 shards, 250 ready beyond the count; "
        "about 25s left (falling 10.0 jobs/s)",
        "[db1]    10s of 1800s waiting until drained: orders: 2/2 runtimes on 8 shards, 250 ready beyond the count; "
        "about 50s left (falling 5.0 jobs/s)",
        "[db1]    15s of 1800s waiting until drained: orders: 2/2 runtimes on 8 shards, 100 ready beyond the count; "
        "about 8s left (falling 13.3 jobs/s)",
        "[db1]    20s of 1800s done: orders: 2/2 runtimes on 8 shards, 0 ready beyond the count",
    ]


def test_a_drain_too_slow_for_its_timeout_says_so_on_every_line(monkeypatch):
    harness = Harness(monkeypatch, dict(ARGS, wait="drained", wait_timeout=60), [draining(1000), draining(990)] * 1
                      + [draining(990)] * 12)
    result = harness.run()
    assert result["failed"] and result["msg"].startswith("Timed out after 60s waiting until drained.")
    assert harness.lines[1].endswith("; about 8 min left (falling 2.0 jobs/s), more than the 55s the timeout leaves")
    assert harness.lines[-1].endswith("; orders: not falling over the last 45s, no time left to estimate")


def test_at_the_deadline_it_fails_naming_the_stragglers_and_returns_the_last_state(monkeypatch):
    harness = Harness(monkeypatch, dict(ARGS, wait_timeout=12), [polled(False)] * 4)
    result = harness.run()
    assert harness.clock.sleeps == [5, 5, 2]
    assert result["failed"] is True and result["polls"] == 4
    assert result["msg"].startswith("Timed out after 12s waiting until converged. orders: 1 of 2 live runtimes on "
                                    "the current count; not yet: pid 42 on host (unreported) (instance i-1, up 90s)")
    assert "To finish: restart the runtimes named" in result["msg"]
    assert result["queues"]["orders"]["stragglers"] == [STRAGGLER]


def test_a_failed_poll_ends_the_wait_with_the_module_result_unchanged(monkeypatch):
    lock_timeout = {"failed": True, "msg": "reading the shard state of 'orders': a lock was not granted within "
                                           "lock_timeout (5s: canceling statement due to lock timeout). ..."}
    harness = Harness(monkeypatch, ARGS, [polled(False), lock_timeout, polled(True)])
    result = harness.run()
    assert len(harness.calls) == 2, "no poll after the failure"
    assert result == lock_timeout
    assert len(harness.lines) == 1


def test_without_wait_the_module_runs_once_as_is(monkeypatch):
    args = dict(ARGS, wait="none")
    harness = Harness(monkeypatch, args, [polled(False)])
    result = harness.run()
    assert harness.calls == [{"module": "awa.operations.awa_enqueue_shards_info", "args": args}]
    assert result["converged"] is False and "waited" not in result and harness.lines == []


# Under async the module runs wrapped by Ansible's async_wrapper: tests/functional/test_async.py runs it for real.

def test_an_async_that_would_end_the_job_before_wait_timeout_fails_before_any_run(monkeypatch):
    harness = Harness(monkeypatch, dict(ARGS, wait_timeout=300), [], async_val=60)
    result = harness.run()
    assert result == {"failed": True, "msg": "async (60s) would end the job before wait_timeout (300s), and Ansible "
                                             "would stop the wait without naming what it waited for: give async more "
                                             "seconds than wait_timeout (for example async: 360) or a shorter "
                                             "wait_timeout"}
    assert harness.calls == []


@pytest.mark.parametrize("async_seconds, wait, wait_timeout, delay", [
    (0, "converged", 300, 0),  # no async
    (301, "converged", 300, 0),
    (10, "none", 300, 0),  # one read: wait_timeout does not apply
    (31, "none", 300, 30),  # one read after the delay
])
def test_an_async_longer_than_the_wait_or_without_a_wait_is_accepted(async_seconds, wait, wait_timeout, delay):
    plugin.validate_async_limit(async_seconds, wait, wait_timeout, delay)


def test_an_async_that_would_end_the_job_during_the_delay_fails_before_any_run(monkeypatch):
    harness = Harness(monkeypatch, dict(ARGS, delay=30), [], async_val=80, action=rollout_plugin.ActionModule)
    result = harness.run()
    assert result["failed"] and result["msg"].startswith(
        "async (80s) would end the job before delay and wait_timeout together (30s + 60s)")
    assert result["msg"].endswith("(for example async: 150) or a shorter delay or wait_timeout")
    assert harness.calls == []


def test_a_delay_is_waited_out_before_the_first_read_and_the_module_runs_without_it(monkeypatch):
    harness = Harness(monkeypatch, dict(ARGS, delay=20), [polled(True)], action=rollout_plugin.ActionModule)
    result = harness.run()
    assert not result.get("failed") and harness.clock.sleeps == [20]
    assert harness.calls == [{"module": "awa.operations.__role.enqueue_shards_rollout_info",
                              "args": dict(ARGS, wait="none", detail=True)}]
    assert harness.lines == ["[db1] waiting 20s before the first read",
                             "[db1]     0s of 60s done: orders: 2/2 runtimes on 8 shards, 0 ready beyond the count"]


def test_queue_and_queues_together_are_refused_with_the_modules_own_rule(monkeypatch):
    harness = Harness(monkeypatch, dict(ARGS, queues=["emails"]), [])
    with pytest.raises(AnsibleActionFail, match="parameters are mutually exclusive: queue[|]queues"):
        harness.run()
    assert harness.calls == []


@pytest.mark.parametrize("changes, message", [
    ({"wait_sleep": 0}, "wait_sleep must be between 0.1 and 3600 seconds, got 0.0"),
    ({"wait_timeout": -1}, "wait_timeout must be between 0 and 86400 seconds, got -1.0"),
    ({"lock_timeout": 7200}, "lock_timeout must be between 0 and 3600 seconds, got 7200.0"),
    ({"wait": "drained", "lanes": False}, "wait=drained waits for the ready jobs on the old shards, and lanes=false "
                                          "reads no lane depths: leave lanes at true (the default) to wait until "
                                          "drained, or wait until converged"),
])
def test_bad_wait_options_fail_before_any_poll(monkeypatch, changes, message):
    harness = Harness(monkeypatch, dict(ARGS, **changes), [])
    result = harness.run()
    assert result == {"failed": True, "msg": message}
    assert harness.calls == []


LOST = {"failed": True, "disconnected": True,
        "msg": "could not connect to database 'app' on db1:5432, db2:5432 (primary) as 'awa': db1:5432: Connection "
               "refused; db2:5432: server is in hot standby mode"}


def test_a_poll_that_lost_the_database_is_retried_and_the_wait_says_it_reconnected(monkeypatch):
    harness = Harness(monkeypatch, ARGS, [polled(False), LOST, LOST, dict(polled(True), server="db2:5432")])
    result = harness.run()
    assert not result.get("failed") and result["converged"] is True and result["polls"] == 2
    assert harness.clock.sleeps == [5, 5, 5]
    assert harness.lines[1] == f"[db1] connection lost ({LOST['msg']}): reconnecting in 5s, attempt 1 of 24"
    assert harness.lines[2].endswith("reconnecting in 5s, attempt 2 of 24")
    assert result["warnings"] == [
        "The connection to the database was lost 5s into the wait (" + LOST["msg"] + "); the wait reconnected "
        "after 2 attempt(s) and read db2:5432 from then on (the primary now, if it was a failover). The state "
        "reported was read there."]


def test_a_first_poll_that_cannot_reach_the_database_ends_the_wait_at_once(monkeypatch):
    harness = Harness(monkeypatch, ARGS, [LOST, polled(True)])
    result = harness.run()
    assert result == LOST and len(harness.calls) == 1 and harness.clock.sleeps == []


def test_after_its_attempts_the_wait_gives_up_saying_what_to_do(monkeypatch):
    harness = Harness(monkeypatch, dict(ARGS, wait_timeout=600), [polled(False)] + [LOST] * 30)
    result = harness.run()
    assert len(harness.calls) == 1 + 1 + 24, "the lost poll, then 24 reconnection attempts"
    assert result["failed"] is True and result["polls"] == 1
    assert result["msg"].startswith("The connection to the database was lost 5s into the wait until converged ("
                                    + LOST["msg"] + "), and all 24 reconnection attempts failed (the last at 125s")
    assert result["queues"]["orders"]["stragglers"] == [STRAGGLER], "the last state seen is returned"


def test_a_task_tried_again_in_an_until_loop_runs_with_its_own_arguments_again(monkeypatch):
    args = {"login_host": "db1", "queue": "orders"}
    harness = Harness(monkeypatch, args, [polled(False), polled(True)])
    first, second = harness.run(), harness.run()
    assert not first.get("failed") and not second.get("failed"), second.get("msg")
    assert [call["args"] for call in harness.calls] == [dict(args)] * 2


def test_a_wait_without_lanes_polls_the_module_without_lanes_and_prints_no_depth(monkeypatch):
    light = polled(False)
    light["queues"]["orders"].pop("depth_beyond_count")
    harness = Harness(monkeypatch, dict(ARGS, lanes=False), [light, polled(True)])
    assert not harness.run().get("failed")
    assert all(call["args"]["lanes"] is False for call in harness.calls)
    assert harness.lines[0] == "[db1]     0s of 60s waiting until converged: orders: 1/2 runtimes on 8 shards"


def test_the_role_s_read_waits_for_the_restarted_runtimes_polling_its_own_module(monkeypatch):
    not_yet = dict(polled(False), expected_new_runtimes=1)
    back = dict(polled(True), new_runtimes=[{"instance_id": "i-2"}], expected_new_runtimes=1)
    args = dict(ARGS, wait="restarted", known_runtimes=["i-1"], expected_new_runtimes=1, lanes=False)
    harness = Harness(monkeypatch, args, [not_yet, back], action=rollout_plugin.ActionModule)
    result = harness.run()
    assert not result.get("failed") and result["polls"] == 2
    assert harness.calls == [{"module": "awa.operations.__role.enqueue_shards_rollout_info",
                              "args": dict(args, wait="none", detail=True)}] * 2
    assert harness.lines[-1] == ("[db1]     5s of 60s done: 1/1 restarted runtimes live and healthy; orders: 2/2 runtimes "
                                 "on 8 shards, 0 ready beyond the count")


@pytest.mark.parametrize("moved", [{"known_runtimes": ["i-1"]}, {"expected_new_runtimes": 1},
                                   {"restarted_services": [{"reports_as": [{"pid": 11, "hostname": "app1"}]}]},
                                   {"window_services": [{"reports_as": [{"pid": 11, "hostname": "app1"}]}]}, {"delay": 20}],
                         ids=lambda moved: next(iter(moved)))
def test_the_public_module_refuses_the_role_s_options_naming_them(monkeypatch, moved):
    harness = Harness(monkeypatch, dict(ARGS, **moved), [])
    with pytest.raises(AnsibleActionFail, match=f"Unsupported parameters for .* module: {next(iter(moved))}"):
        harness.run()
    assert harness.calls == []


def test_the_public_module_refuses_the_role_s_wait(monkeypatch):
    harness = Harness(monkeypatch, dict(ARGS, wait="restarted"), [])
    with pytest.raises(AnsibleActionFail, match="value of wait must be one of: none, converged, drained, got: "
                                                "restarted"):
        harness.run()
    assert harness.calls == []


def test_given_a_window_s_state_the_role_s_read_waits_for_its_next_batch_watches_it_and_judges_it(monkeypatch,
                                                                                                  tmp_path):
    window = {"rollout": two_hosts(), "stop": None}  # app1/a, then app2/a; the canary is watched for 30 s
    restarts = {"app1": systemd_result({"a": unit("a", pid=21, started=READ_AT + 5)}, READ_AT + 6, restart=("a",)),
                "app2": {"skipped": True}}
    new = runtime(21, READ_AT + 5.5)
    not_yet = dict(polled(False), expected_new_runtimes=1, health=HEALTH)
    back = dict(polled(True), runtimes=[new], new_runtimes=[new], expected_new_runtimes=1, health=HEALTH)
    record = {"reads": {"now": UNCONVERGED}, "queues": [{"queue": "demo", "shards": 6}], "dir": str(tmp_path),
              "window": "w"}
    args = dict(ARGS, batch=window, restarts=restarts, queues=["orders"], lanes=False, health=True, record=record)
    del args["queue"], args["wait"]
    for watched, said in ((back, "[db1] Batch 1 of 2 is back: 1 of 1 restarted runtimes live and healthy; "),
                          (dict(back, health={"deadlocks": 5, "stats_reset": None}),
                           "[db1] Batch 1 of 2 stopped the window (1/1 restarted runtimes live and healthy): its end "
                           "says why")):
        harness = Harness(monkeypatch, dict(args), [not_yet, back, watched], action=rollout_plugin.ActionModule)
        judged = harness.run()["window_state"]
        # Its own options stay with it; the module waits for the runtime the restart left, then reads once more.
        assert [(call["args"]["wait"], call["args"]["expected_new_runtimes"]) for call in harness.calls] == [
            ("none", 1)] * 3
        assert all("batch" not in call["args"] and "delay" not in call["args"] for call in harness.calls)
        assert harness.clock.sleeps == [5, 30], "a poll apart, then the canary's pause"
        # A poll line while it waits; the verdict, not the poll that ended the wait, says the batch is back.
        assert harness.lines[0].startswith("[db1]     0s of 60s waiting until restarted: ")
        assert harness.lines[-1].startswith(said) and not any(" done: " in line for line in harness.lines)
        assert judged["rollout"]["restarted"] == ["app1/a"] and len(judged["rollout"]["verdicts"]) == 1
        assert (judged["stop"] is None) is judged["rollout"]["verdicts"][-1]["ok"]
        # The window's record after the batch holds its verdict.
        [written] = tmp_path.glob("enqueue_shards-*.json")
        report = json.loads(written.read_text(encoding="utf-8"))
        assert report["outcome"]["last_step"] == "batch 1 of 2" and report["batches"][0]["ok"] is (judged["stop"] is None)
