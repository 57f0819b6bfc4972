# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The window's record on every ending after the change: its report, the outcome it publishes, its last word; and the
window's reads it and the summary are made of."""

from __future__ import annotations

import copy

import pytest
from ansible import context

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.record import (
    OUTCOME_KEY,
    WindowOutcome,
    WindowReport,
    after_change,
    last_read,
    services_outcome,
    stop,
    times_text,
    window_record,
    window_summary,
)
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.summary import CHECK_MODE_NOTE, RESUME

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.declared import value_problems
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.recorded import load
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import runtime, systemd_host, unit

UNCONVERGED, CONVERGED, REAL = load("info-unconverged"), load("info-converged"), load("change-real")
DEMO_TO_6 = [{"queue": "demo", "shards": 6}]
BACKOUT = ("To back out (the previous counts, the same options): ansible-playbook -i inventory play.yml -e "
           "'{\"enqueue_shards_queues\": [{\"queue\": \"demo\", \"shards\": 4}]}'")
STOPPED = ("Rollout stopped at batch 2 of 2 (app2/worker): app2/worker did not come back: the restart failed: exit "
           f"status 3. No later batch was restarted. {BACKOUT}")
# The window 4 -> 6 on two hosts, one service each, in two batches; the first batch restarted app1/worker.
ROLLOUT = {"batches": [[["app1", "worker"]], [["app2", "worker"]]], "skipped": [], "restarted": ["app1/worker"],
           "hosts": [], "verdicts": [], "shown": {"headline": "Restarting 2 producer service(s) in 2 batch(es)", "detail": []},
           "problems": [], "pid_hosts": [], "concerned_queues": ["demo"]}
CLI = {"args": ("play.yml",), "inventory": ("inventory",)}


@pytest.fixture(autouse=True)
def command_line(monkeypatch):
    """The options of the ansible-playbook command line that runs the role, where the back-out reads them."""
    monkeypatch.setattr(context, "CLIARGS", CLI)


def converged_at_6() -> dict:
    read = copy.deepcopy(CONVERGED)
    view = read["queues"]["demo"]
    view.update(enqueue_shards={"demo": 6}, last_change=copy.deepcopy(UNCONVERGED["queues"]["demo"]["last_change"]))
    return read


def record(last_read: dict, *, stopped: dict | None = None, check_mode: bool = False, started_past: bool = False,
           **given) -> dict:
    """The record of a window whose queues were last read as ``last_read``; ``given``: its ``rollout`` (ROLLOUT by
    default) and the window's other reads."""
    rollout = given.pop("rollout", ROLLOUT)
    reads = {"at_stop": last_read, "change": REAL, "before": {"read_at": "2026-11-30T16:55:20.000000+00:00"},
             "written": {"changed": False, "path": "/srv/windows/enqueue_shards-20261130T165600Z.json"},
             "validated": not started_past, **given}
    return window_record(reads, {"rollout": rollout, "stop": stopped}, {"queues": DEMO_TO_6, "check_mode": check_mode})


def test_what_stopped_the_window_is_the_failed_task_its_message_and_the_hosts_it_failed_on():
    task = {"name": "Batch | wait for the runtimes of the services it restarted, watch it for its pause, and judge it"}
    # A task that runs once fails on the first host; the rescue's other hosts carry nothing.
    assert stop(["app1", "app2"], {"app1": {"ansible_failed_task": task, "ansible_failed_result": {
        "msg": STOPPED, "invocation": {"module_args": {"login_password": "s3cret"}}}}, "app2": {}}) == {
        "task": task["name"], "message": STOPPED, "hosts": ["app1"]}
    write = {"name": "Pickup | write the producers' environment file"}
    same = {host: {"ansible_failed_task": write, "ansible_failed_result": {"msg": "not written"}}
            for host in ("app1", "app2")}
    assert stop(["app1", "app2"], same)["message"] == "not written"
    differ = dict(same, app2={"ansible_failed_task": write, "ansible_failed_result": {"msg": "gone", "results": [
        {"msg": "item one failed", "failed": True}, {"msg": "fine"}]}})
    assert stop(["app1", "app2"], differ)["message"] == "app1: not written | app2: item one failed"
    assert stop(["app1"], {"app1": {}}) == {"task": None, "hosts": [], "message": (
        "A host stopped answering during the window and Ansible stopped running tasks on it")}


def test_a_window_done_at_its_summary_publishes_done_with_the_back_out_and_its_times():
    read = converged_at_6()
    verdict = {"ok": True, "message": "Every queue runs the count asked, converged (and drained after a lowering)."}
    done = record(read, verdict=verdict, rollout=dict(ROLLOUT, restarted=["app1/worker", "app2/worker"]))
    outcome = done["outcome"]
    assert value_problems(outcome, WindowOutcome, "outcome") == []
    assert value_problems(done["report"], WindowReport, "report") == []
    assert (outcome["done"], outcome["stopped_at"], outcome["message"]) == (True, None, verdict["message"])
    assert outcome["last_step"] == "the end"
    assert outcome["queues"] == {"demo": {"asked": 6, "before": 4, "after": 6, "converged": True, "drained": True,
                                          "set_by": None}}
    assert outcome["services"] == {"restarted": ["app1/worker", "app2/worker"], "skipped": [], "left": []}
    assert (outcome["backout"], outcome["backout_queues"]) == (BACKOUT, [{"queue": "demo", "shards": 4}])
    assert (outcome["started"], outcome["ended"]) == ("2026-11-30T16:55:20.000000+00:00", read["read_at"])
    assert done["report"]["outcome"] == outcome and done["report"]["stopped"] is None
    assert done["ok"] and done["message"] == (
        f"The window's report: /srv/windows/enqueue_shards-20261130T165600Z.json. Its outcome is published as "
        f"{OUTCOME_KEY} (set_stats).")


def test_a_window_stopped_at_a_batch_says_what_is_done_and_left_and_ends_with_the_back_out():
    stopped = {"task": "Batch | wait for the runtimes of the services it restarted, watch it for its pause, and judge it",
               "message": STOPPED, "hosts": ["app1"]}
    ended = record(UNCONVERGED, stopped=stopped)
    outcome = ended["outcome"]
    assert (outcome["done"], outcome["stopped_at"], outcome["message"]) == (False, stopped["task"], STOPPED)
    assert outcome["queues"]["demo"] == {"asked": 6, "before": 4, "after": 6, "converged": False, "drained": False,
                                         "set_by": None}
    assert outcome["services"] == {"restarted": ["app1/worker"], "skipped": [], "left": ["app2/worker"]}
    assert ended["report"]["stopped"] == stopped
    # The back-out stays the last words: the command to copy.
    assert ended["message"] == (
        "Rollout stopped at batch 2 of 2 (app2/worker): app2/worker did not come back: the restart failed: exit status "
        "3. No later batch was restarted. So far restarted: app1/worker; not done: app2/worker. The window's "
        f"report: /srv/windows/enqueue_shards-20261130T165600Z.json. {BACKOUT}")
    timed_out = record(UNCONVERGED, stopped=dict(stopped, message="Timed out after 300s waiting until converged."),
                       written={"changed": False, "skipped": True})
    assert timed_out["message"].endswith(f"waiting until converged. So far restarted: app1/worker; not done: "
                                         f"app2/worker. No report was written (enqueue_shards_report_dir is empty). "
                                         f"{BACKOUT}")
    assert not ended["ok"] and not timed_out["ok"]


def test_a_report_that_cannot_be_written_fails_the_run_after_the_outcome_is_published():
    failed = {"changed": False, "failed": False, "msg": "The report's directory /srv/gone does not exist on the "
              "controller: create it or name another (the role's enqueue_shards_report_dir; an empty string there "
              "writes no report)"}
    ended = record(converged_at_6(), verdict={"ok": True, "message": "done"}, written=failed)
    assert not ended["ok"] and ended["outcome"]["done"]
    assert ended["message"] == (f"The window's report could not be written: {failed['msg']}. Its outcome is "
                                f"published as {OUTCOME_KEY} (set_stats).")


def test_a_record_written_during_the_window_names_its_last_step_and_says_how_to_finish_an_interrupted_one():
    rollout = dict(ROLLOUT, batches=[[["app1", "worker"]], [["app2", "worker"]]], restarted=["app1/worker"],
                   verdicts=[{"ok": True, "message": "Batch 1 of 2 is back."}])
    after_batch = record(converged_at_6(), rollout=rollout, step="a batch")
    outcome = after_batch["outcome"]
    assert (outcome["done"], outcome["last_step"], outcome["stopped_at"]) == (False, "batch 1 of 2", None)
    assert outcome["message"].startswith("The window had run up to batch 1 of 2 when this record was written: if it "
                                         "ends here, the window was interrupted. To resume, run the same command again")
    assert outcome["services"]["restarted"] == ["app1/worker"] and outcome["services"]["left"] == ["app2/worker"]
    assert record(converged_at_6(), step="the change")["outcome"]["last_step"] == "the change"


def test_a_summary_that_says_not_done_ends_the_window_as_a_stop_does():
    verdict = {"ok": False, "message": "The change window is not done: demo not converged at the last read."}
    ended = record(converged_at_6(), verdict=verdict, rollout=dict(ROLLOUT, restarted=["app1/worker"]))
    assert not ended["ok"] and ended["message"].startswith(verdict["message"] + " So far restarted: app1/worker")
    assert ended["outcome"]["stopped_at"] == ("Summary | stop unless every queue runs the count asked, converged, and "
                                              "every service of the inventory is done")


def test_a_run_started_past_its_first_phases_says_how_to_resume():
    stopped = {"task": "Pickup | plan the restarts over every host",
               "message": "Task failed: '_enqueue_shards_host' is undefined", "hosts": ["app1"]}
    ended = record(converged_at_6(), stopped=stopped, started_past=True, rollout=None, change=None, before=None)
    assert ended["message"] == (
        "This run started past the window's first phases (--start-at-task), so 'Pickup | plan the restarts over every "
        "host' lacked what they hand on (Task failed: '_enqueue_shards_host' is undefined). Nothing more was done. "
        f"{RESUME.replace('again', 'again without --start-at-task', 1)}. The window's report: "
        "/srv/windows/enqueue_shards-20261130T165600Z.json. To back out, run your change-window playbook again with "
        'enqueue_shards_queues: [{"queue": "demo", "shards": 4}].')
    assert ended["outcome"]["started"] is None and ended["outcome"]["services"] == {
        "restarted": [], "skipped": [], "left": []}
    # The summary's own refusal of a count it did not set says all of that already, and backs nothing out.
    verdict = {"task": "Summary | stop unless ...", "message": "The change window is not done: demo holds "
               "enqueue_shards 4, not the 6 asked. ... To resume, run the same command again ...", "hosts": ["app1"]}
    refused = record(CONVERGED, stopped=verdict, started_past=True, rollout=None, change=None)
    assert refused["message"] == verdict["message"] + " The window's report: " \
        "/srv/windows/enqueue_shards-20261130T165600Z.json."
    # Before: the count before the last recorded change (1 -> 4, change #1), as the summary's table says it.
    assert refused["outcome"]["queues"]["demo"] == {"asked": 6, "before": 1, "after": 4, "converged": True,
                                                    "drained": True, "set_by": None}


@pytest.mark.parametrize("given", [{"check_mode": True}, {"at_stop": {}}])
def test_a_dry_run_or_a_window_with_nothing_read_is_never_done(given):
    outcome = record(converged_at_6(), **given)["outcome"]
    assert not outcome["done"]
    if given.get("check_mode"):
        assert outcome["message"] == CHECK_MODE_NOTE and outcome["check_mode"]
    else:
        assert outcome["queues"]["demo"] == {"asked": 6, "before": None, "after": None, "converged": False,
                                             "drained": None, "set_by": None}
        assert outcome["ended"] is None


def test_the_window_s_times_are_on_the_database_s_clock():
    assert times_text("2026-12-05T10:15:02.5+00:00", "2026-12-05T10:21:40.1+00:00") == (
        "The window: 2026-12-05 10:15:02 -> 10:21:40 UTC (7 min, the database's clock).")
    # A window past midnight gives the end's date; a server in another zone is read in UTC.
    assert times_text("2026-12-05T23:59:00+00:00", "2026-12-06T02:01:30+02:00") == (
        "The window: 2026-12-05 23:59:00 -> 2026-12-06 00:01:30 UTC (2 min, the database's clock).")
    assert times_text(None, "2026-12-05T10:21:40+00:00") == (
        "The window ended 2026-12-05 10:21:40 UTC (the database's clock); its start was not read: this run did not "
        "read the queues before the change.")
    assert times_text(None, None) == "The window's end was not read."


def test_a_service_restarted_into_a_restart_loop_is_left_not_done():
    both = dict(ROLLOUT, restarted=["app1/worker", "app2/worker"])
    matched = {"services": [{"host": "app1", "service": "worker", "status": "has_runtimes"},
                            {"host": "app2", "service": "worker", "status": "no_runtime"}]}
    assert services_outcome(both, matched) == {"restarted": ["app1/worker", "app2/worker"], "skipped": [],
                                               "left": ["app2/worker"]}
    # Without the inventory's runtimes, a restart is all it can go by.
    assert services_outcome(both, None)["left"] == []
    assert services_outcome(ROLLOUT, matched)["left"] == ["app2/worker"]
    assert services_outcome(None, matched) == {"restarted": [], "skipped": [], "left": []}


# The window's reads: the last read of each queue, and the summary and record made of it.
SKIPPED = {"skipped": True, "changed": False}
NO_ROLLOUT = {"rollout": None, "stop": None}
REAL_RUN = {"queues": DEMO_TO_6, "check_mode": False}


def test_the_queues_after_the_change_are_the_changes_else_the_pickups_own_read():
    change = dict(REAL, observed=UNCONVERGED)
    assert after_change({"change": change, "now": SKIPPED}) == UNCONVERGED
    assert after_change({"change": None, "now": CONVERGED}) == CONVERGED
    assert after_change({}) == {}


def test_the_last_read_is_the_newest_that_ran_and_each_queue_is_as_it_last_read():
    drained = converged_at_6()
    reads = {"change": dict(REAL, observed=UNCONVERGED), "converged": CONVERGED, "drained": drained}
    assert last_read(reads)[0] is not drained and last_read(reads)[0] == drained
    assert last_read(dict(reads, drained=SKIPPED)) == (CONVERGED, CONVERGED["queues"])
    # Check mode: the waits did not run, the read with the change is the last.
    assert last_read(dict(reads, converged=SKIPPED, drained=None))[0] == UNCONVERGED
    assert last_read({"before": CONVERGED}) == ({}, {}), "a run started past the change and the waits read nothing after it"
    # A read after a stop is the last; one that failed leaves the read before it.
    assert last_read(dict(reads, at_stop=CONVERGED))[0] == CONVERGED
    assert last_read(dict(reads, at_stop={"failed": True, "msg": "no connection"}))[0] == drained


def test_the_inventory_is_the_rollouts_services_with_the_last_reads_runtimes():
    started = 1764520000.0
    hosts = [systemd_host("app1", {"p0": unit("p0", started=started, pid=10)})]
    rollout = dict(ROLLOUT, hosts=hosts, pid_hosts=["app1"])
    read = dict(converged_at_6(), runtimes=[runtime(10, started + 1)])
    ended = record(read, rollout=rollout)
    assert ended["report"]["inventory"]["services"][0]["host"] == "app1"
    assert ended["report"]["inventory"]["on_count"] == ended["report"]["inventory"]["expected"] == 1
    assert record(read, rollout=None)["report"]["inventory"] is None


def test_the_summary_says_the_window_from_its_last_read_and_judges_it_in_a_real_run_only():
    reads = {"before": {"read_at": "2026-11-30T16:55:20.000000+00:00"}, "change": dict(REAL, observed=UNCONVERGED),
             "converged": converged_at_6()}
    done = window_summary(reads, NO_ROLLOUT, REAL_RUN)
    assert done["verdict"] == {"ok": True, "message": (
        "Every queue runs the count asked, converged (and drained after a lowering).")}
    assert any(line.startswith("The window: 2026-11-30 16:55:20 -> ") for line in done["lines"]), done["lines"]
    assert done["lines"][-1].startswith("To back out (the previous counts, the same options): ansible-playbook")
    # Resumed past the change: the count in force is not the one asked, and nothing of it is this run's to back out.
    resumed = window_summary({"converged": CONVERGED}, NO_ROLLOUT, REAL_RUN)
    assert not resumed["verdict"]["ok"] and "demo holds enqueue_shards 4, not the 6 asked" in resumed["verdict"]["message"]
    assert not any("To back out" in line for line in resumed["lines"])
    planned = window_summary({"change": dict(REAL, observed=UNCONVERGED)}, NO_ROLLOUT,
                             {"queues": DEMO_TO_6, "check_mode": True})
    assert planned["verdict"] is None


def test_the_record_reads_where_the_queues_stand_after_a_stop():
    stopped = {"rollout": None, "stop": {"task": "Wait | until every live runtime runs with the new count",
                                         "message": "timed out", "hosts": []}}
    reads = {"before": {"read_at": "2026-11-30T16:55:20.000000+00:00"}, "change": dict(REAL, observed=UNCONVERGED),
             "converged": dict(UNCONVERGED, failed=True), "at_stop": converged_at_6()}
    ended = window_record(reads, stopped, REAL_RUN)
    assert ended["outcome"]["ended"] == CONVERGED["read_at"] and ended["outcome"]["queues"]["demo"]["converged"]
    assert not ended["ok"] and ended["message"].startswith("timed out.")
    # A read after the stop that failed leaves the record with the last read before it.
    unread = window_record(dict(reads, at_stop={"failed": True, "msg": "no connection"}), stopped, REAL_RUN)
    assert unread["outcome"]["ended"] == UNCONVERGED["read_at"] and not unread["outcome"]["queues"]["demo"]["converged"]
