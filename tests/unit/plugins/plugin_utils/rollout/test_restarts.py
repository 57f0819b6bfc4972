# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which services the role restarts, in which batches, and whether a batch came back."""

from __future__ import annotations

import datetime
import json

import pytest

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.restarts import restart_plan, window_services
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.recorded import load
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import (
    command_host,
    runtime,
    settings,
    systemd_host,
    systemd_result,
    unit,
)
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.services import host_state


UNCONVERGED = load("info-unconverged")  # 0 of 3 runtimes on the count after change #2 (demo 4 -> 6)
CONVERGED = load("info-converged")  # 2 of 2 after change #1
CHANGE_AT = datetime.datetime.fromisoformat(UNCONVERGED["queues"]["demo"]["last_change"]["demo"]["changed_at"]).timestamp()
READ_AT = datetime.datetime.fromisoformat(UNCONVERGED["read_at"]).timestamp()


def read_later(read: dict, seconds_after_change: float) -> dict:
    """The same state, read ``seconds_after_change`` after the change committed (a re-run, say)."""
    when = datetime.datetime.fromtimestamp(CHANGE_AT + seconds_after_change, tz=datetime.timezone.utc)
    return dict(read, read_at=when.isoformat())


def with_runtimes_on_the_count(seconds_after_change: float, count: int) -> dict:
    """The unconverged read, later, with ``count`` more live runtimes on the count whose pids no service has:
    services judged by the clock, their runtimes covered by count."""
    read = read_later(UNCONVERGED, seconds_after_change)
    read["runtimes"] = read["runtimes"] + [runtime(900 + index, CHANGE_AT + 21) for index in range(count)]
    return read


def plan(hosts: list[dict], read: dict = UNCONVERGED, change: dict | None = None, batch_size: object = 1,
         check_mode: bool = False, max_fail_percentage: float = 0) -> dict:
    made = restart_plan(hosts, read=read, change=change, settings={
        "batch_size": batch_size, "check_mode": check_mode, "max_fail_percentage": max_fail_percentage})
    # The lines under the headline, as restart_plan returned them before the plan's headline led them.
    return {**made, **made["shown"], "lines": made["shown"]["lines"][1:]}


def test_services_started_before_the_change_restart_in_batches_of_hosts_each_with_all_its_services():
    before = CHANGE_AT - 60
    hosts = [systemd_host("app1", {"a": unit("a", started=before), "b": unit("b", started=before)}, READ_AT + 2),
             systemd_host("app2", {"a": unit("a", started=before)}, READ_AT + 2)]
    result = plan(hosts, batch_size=2)
    assert result["batches"] == [[["app1", "a"], ["app1", "b"], ["app2", "a"]]]
    assert plan(hosts, batch_size=1)["batches"] == [[["app1", "a"], ["app1", "b"]], [["app2", "a"]]]
    assert sum(map(len, result["batches"])) == 3 and result["problems"] == []
    assert "app1/b: restart - it started before the change of demo" in result["lines"]
    assert result["headline"].startswith("Restarting 3 producer service(s) on 2 host(s) in 1 batch(es) of at most 2 "
                                         "host(s): [app1/a, app1/b, app2/a]")


def test_services_that_started_after_the_change_are_left_alone_and_outside_runtimes_named():
    # A re-run 60 s after the change: both services were restarted 30 s after it (their runtimes run the count),
    # yet 3 runtimes lag; every service is told apart by pid, so those 3 are no service's: outside the window.
    after = CHANGE_AT + 30
    hosts = [systemd_host("app1", {"a": unit("a", started=after, pid=21), "b": unit("b", started=after, pid=22)},
                          CHANGE_AT + 62)]
    read = read_later(UNCONVERGED, 60)
    read["runtimes"] = read["runtimes"] + [runtime(21, after + 1), runtime(22, after + 1)]
    result = plan(hosts, read=read)
    assert result["batches"] == [] and result["headline"] == "No producer service to restart."
    assert "app1/a: left alone - its runtime (pid 21) runs the count" in result["lines"]
    [outside] = [line for line in result["lines"] if "outside" in line]
    assert outside.startswith("3 live runtimes outside the change window - no producer service of the inventory "
                              "runs them (another window's, on another part of the inventory, or a producer the "
                              "inventory does not list): pid 15653 on host (unreported) (instance 00add19d-"), outside
    assert "pid 15854 on host" in outside and "pid 18237 on host" in outside
    assert outside.endswith("The waits leave them out; their own window or their owner restarts them.")


def test_runtimes_outside_are_only_counted_where_a_host_s_runtimes_cannot_be_told_apart_by_pid():
    # The same, but app2's service is judged by count (no runtime has its pid): the 3 cannot be told from its own.
    after = CHANGE_AT + 30
    hosts = [systemd_host("app1", {"a": unit("a", started=after, pid=21)}, CHANGE_AT + 62),
             systemd_host("app2", {"b": unit("b", started=after, pid=77)}, CHANGE_AT + 62)]
    read = read_later(UNCONVERGED, 60)
    read["runtimes"] = read["runtimes"] + [runtime(21, after + 1), runtime(22, after + 1)]
    lines = plan(hosts, read=read)["lines"]
    assert not any("outside the change window" in line for line in lines), lines
    [outside] = [line for line in lines if "outside the inventory" in line]
    assert "at least 3 runtime(s) run outside the inventory. On an older count: " in outside


def test_a_restart_only_one_runtime_short_still_names_the_runtimes_outside():
    before = CHANGE_AT - 60
    hosts = [systemd_host("app1", {"a": unit("a", started=before), "b": unit("b", started=before)}, READ_AT + 2)]
    lines = plan(hosts)["lines"]
    assert any("3 live runtime(s) run an older count but only 2 service(s)" in line and "at least 1 runtime(s)" in line
               for line in lines)


@pytest.mark.parametrize("host_clock_offset", [0.0, 3600.0, -3600.0], ids=["in-sync", "ahead-1h", "behind-1h"])
def test_clock_skew_between_host_and_database_does_not_change_the_decision(host_clock_offset):
    # Real times: a started 20 s before the change, b 20 s after; the database is read 60 s after the change
    # and the host's clock 2 s after that.
    hosts = [systemd_host("app1", {"a": unit("a", started=CHANGE_AT - 20 + host_clock_offset),
                                   "b": unit("b", started=CHANGE_AT + 20 + host_clock_offset)},
                          CHANGE_AT + 62 + host_clock_offset)]
    assert plan(hosts, read=with_runtimes_on_the_count(60, 2))["batches"] == [[["app1", "a"]]]


def test_a_start_within_the_clock_uncertainty_is_restarted_rather_than_trusted():
    # Started 1 s after the change, but the host's clock was read 3 s after the database's: it cannot be told apart.
    hosts = [systemd_host("app1", {"a": unit("a", started=CHANGE_AT + 1)}, CHANGE_AT + 13)]
    assert plan(hosts, read=read_later(UNCONVERGED, 10))["batches"] == [[["app1", "a"]]]


def test_stopped_services_are_left_alone_failed_ones_restarted_missing_ones_stop_the_rollout():
    before = CHANGE_AT - 60
    hosts = [systemd_host("app1", {"stopped": unit("stopped", state="inactive", sub="dead"),
                                   "failed": unit("failed", state="failed", sub="failed", result="exit-code"),
                                   "gone": unit("gone", state="inactive", sub="dead", load_state="not-found"),
                                   "ok": unit("ok", started=before)}, READ_AT + 2)]
    result = plan(hosts)
    assert result["batches"] == [[["app1", "failed"], ["app1", "ok"]]]
    assert any(line.startswith("app1/stopped: left alone - it is stopped") for line in result["lines"])
    assert result["problems"] == ["app1/gone: systemd does not know this unit (LoadState=not-found); correct "
                                  "enqueue_shards_services for this host, or install the unit there"]


def test_when_every_runtime_runs_the_count_only_a_changed_environment_restarts():
    before = datetime.datetime.fromisoformat(CONVERGED["read_at"]).timestamp() - 3600
    clock = datetime.datetime.fromisoformat(CONVERGED["read_at"]).timestamp() + 2
    quiet = systemd_host("app1", {"a": unit("a", started=before)}, clock)
    changed = systemd_host("app2", {"a": unit("a", started=before)}, clock, environment_changed=True)
    result = plan([quiet, changed], read=CONVERGED)
    assert result["batches"] == [[["app2", "a"]]]
    assert result["lines"][:2] == [
        "app1/a: left alone - the live runtimes on the count cover the inventory (judged by count)",
        "app2/a: restart - its environment file changed"]


def test_check_mode_plans_a_restart_of_every_running_service_when_the_count_would_switch():
    # In check mode nothing committed: the read is of the old count (converged), the change a plan (4 -> 6).
    clock = datetime.datetime.fromisoformat(CONVERGED["read_at"]).timestamp() + 2
    hosts = [systemd_host("app1", {"a": unit("a", started=clock - 5), "b": unit("b", state="inactive", sub="dead")},
                          clock)]
    result = plan(hosts, read=CONVERGED, change=load("change-check"), check_mode=True)
    assert result["batches"] == [[["app1", "a"]]]
    assert result["headline"].startswith("Check mode: would restart 1 producer service(s)")
    assert result["headline"].endswith("Nothing is restarted in check mode.")


def test_without_a_status_command_every_running_service_restarts_while_a_runtime_lags():
    report = command_host("localhost", {"p1": "", "p2": ""}, clock=1, status_command="")
    result = plan([report])
    assert result["batches"] == [[["localhost", "p1"], ["localhost", "p2"]]]
    assert "its start time is unknown (no status command)" in result["lines"][0]


def test_the_status_command_contract():
    report = command_host("localhost", {"p1": f"{CHANGE_AT + 30:.3f}\n", "p2": f"{CHANGE_AT - 30:.3f}",
                                        "p3": (1, "", "p3 is not running")}, clock=int(CHANGE_AT + 62))
    states = {service["service"]: service for service in report["services"]}
    assert states["p3"]["detail"] == "status command exited 1: p3 is not running"
    assert states["p3"]["problem"] is None, "a stopped service: its state is unknown, it is restarted"
    assert plan([report], read=with_runtimes_on_the_count(60, 2))["batches"] == [
        [["localhost", "p2"], ["localhost", "p3"]]]


def test_a_status_command_that_cannot_run_or_prints_something_else_restarts_nothing():
    report = command_host("localhost", {"p1": f"{CHANGE_AT - 30:.3f}", "p2": (127, "", "sh: 1: supervisorctl: not found"),
                                        "p3": "yesterday"}, clock=int(CHANGE_AT + 62))
    result = plan([report], read=with_runtimes_on_the_count(60, 2))
    assert result["problems"] == [
        "localhost/p2: the status command status p2 cannot run here (exit status 127: sh: 1: supervisorctl: not "
        "found); correct enqueue_shards_status_command for this host, or install what it runs there",
        "localhost/p3: the status command status p3 printed 'yesterday', not its contract: it must exit 0 and print "
        "START or START PID (the start in unix seconds, then optionally the pid), then optionally a line HOSTNAME or "
        "HOSTNAME PID for each runtime that runs elsewhere (a replica); correct enqueue_shards_status_command for this "
        "host, or install what it runs there"]


# ---- a service is done only when its runtimes are live on the count ----

NOW = datetime.datetime.fromisoformat(CONVERGED["read_at"]).timestamp()


def converged_read(*runtimes: dict) -> dict:
    """The recorded converged read, with these runtimes instead (every runtime on the count: no deadline)."""
    return dict(CONVERGED, runtimes=list(runtimes))


def test_a_service_that_runs_but_registered_no_runtime_is_restarted_even_when_every_runtime_is_converged():
    # The reported bug: a restarted service hangs before its runtime registers; every live runtime is on the count.
    hosts = [systemd_host("app1", {"a": unit("a", started=NOW - 60, pid=11), "b": unit("b", started=NOW - 50, pid=12)},
                          NOW + 2)]
    result = plan(hosts, read=converged_read(runtime(11, NOW - 59)))
    assert result["batches"] == [[["app1", "b"]]]
    assert "app1/a: left alone - its runtime (pid 11) runs the count" in result["lines"]
    assert ("app1/b: restart - it runs (pid 12) but no live Awa runtime has its pid: it hangs before its runtime "
            "registers, or it is in a restart loop") in result["lines"]
    assert result["pid_hosts"] == ["app1"]


def test_a_host_whose_only_service_hangs_is_caught_by_the_count():
    # f2 runs one unit, which hangs: no pid of it matches, so f2 is judged by count, and the count falls short.
    hosts = [systemd_host("f1", {"a": unit("a", started=NOW - 60, pid=300)}, NOW + 2),
             systemd_host("f2", {"b": unit("b", started=NOW - 40, pid=300)}, NOW + 2)]
    result = plan(hosts, read=converged_read(runtime(300, NOW - 59)))
    # Both hosts use pid 300: the runtime started before f2's process, so it is f1's.
    assert result["batches"] == [[["f2", "b"]]]
    assert result["pid_hosts"] == ["f1"]
    assert "f2/b: restart - the inventory runs 1 of 2 runtimes on the count" in " ".join(result["lines"])


def test_a_runtime_that_could_be_either_hosts_leaves_both_judged_by_count_and_restarted():
    # Pid 300 runs a service on each host and the runtime reports no host name: it could be either's (a hung
    # service on one host, a late runtime on the other), so both are judged by count - one runtime for two.
    hosts = [systemd_host("f1", {"a": unit("a", started=NOW - 60, pid=300)}, NOW + 2),
             systemd_host("f2", {"b": unit("b", started=NOW - 40, pid=300)}, NOW + 2)]
    result = plan(hosts, read=converged_read(runtime(300, NOW - 39)))
    assert result["batches"] == [[["f1", "a"]], [["f2", "b"]]]
    assert any(line.startswith("f2/b: restart") and "cannot be told apart from the others by pid" in line
               for line in result["lines"]), result["lines"]


def test_a_runtime_that_reports_its_host_name_is_matched_to_that_host_only():
    hosts = [systemd_host("f1", {"a": unit("a", started=NOW - 60, pid=300)}, NOW + 2),
             systemd_host("f2", {"b": unit("b", started=NOW - 60, pid=300)}, NOW + 2)]
    result = plan(hosts, read=converged_read(runtime(300, NOW - 59, hostname="f1"),
                                             runtime(300, NOW - 58, hostname="f2")))
    assert result["batches"] == []


def test_a_crash_looping_unit_is_restarted_and_a_stuck_start_too():
    hosts = [systemd_host("app1", {"loop": unit("loop", state="activating", sub="auto-restart", pid=0),
                                   "stuck": unit("stuck", state="activating", sub="start-pre", pid=0),
                                   "ok": unit("ok", started=NOW - 60, pid=11)}, NOW + 2)]
    result = plan(hosts, read=converged_read(runtime(11, NOW - 59)))
    assert result["batches"] == [[["app1", "loop"], ["app1", "stuck"]]]
    assert "app1/stuck: restart - it is stuck in start (activating/start-pre)" in result["lines"]


def test_a_matched_runtime_on_an_older_count_restarts_its_service_whatever_the_clocks_say():
    # By the host's clock the process started after the change, but its runtime (by pid) is a straggler.
    hosts = [systemd_host("app1", {"a": unit("a", started=CHANGE_AT + 300, pid=15653)}, CHANGE_AT + 602)]
    read = read_later(UNCONVERGED, 600)
    read["runtimes"] = [runtime(15653, CHANGE_AT + 301, converged=False)]
    result = plan(hosts, read=read)
    assert result["batches"] == [[["app1", "a"]]]
    assert "app1/a: restart - its runtime (pid 15653) runs an older count" in result["lines"]


def test_services_that_cannot_be_matched_are_restarted_when_the_count_falls_short():
    # A status command without pids: two services, one live runtime on the count, nothing lags.
    report = command_host("localhost", {"p1": f"{NOW - 60:.3f}", "p2": f"{NOW - 50:.3f}"}, clock=NOW + 2)
    result = plan([report], read=converged_read(runtime(4242, NOW - 59)))
    assert result["batches"] == [[["localhost", "p1"], ["localhost", "p2"]]]
    assert ("localhost/p1: restart - the inventory runs 1 of 2 runtimes on the count and its runtimes cannot be told "
            "apart from the others by pid") in result["lines"]
    assert any(line.startswith("How the runtimes were counted: runtimes matched to services by pid, except on "
                               "localhost") for line in result["lines"])
    covered = plan([report], read=converged_read(runtime(4242, NOW - 59), runtime(4243, NOW - 49)))
    assert covered["batches"] == []


def test_the_status_command_may_print_the_runtime_pid_after_the_start():
    report = command_host("localhost", {"p1": f"{NOW - 60:.3f} 4242\n", "p2": f"{NOW - 50:.3f} 4243"}, clock=NOW + 2)
    assert [service["main_pid"] for service in report["services"]] == [4242, 4243]
    result = plan([report], read=converged_read(runtime(4242, NOW - 59)))
    assert result["batches"] == [[["localhost", "p2"]]]


def test_services_of_unreachable_hosts_are_skipped_and_too_many_of_them_stop_before_any_restart():
    hosts = [systemd_host("app1", {"a": unit("a", started=CHANGE_AT - 60)}, READ_AT + 2),
             systemd_host("app2", {"b": unit("b"), "c": unit("c")}, reachable=False)]
    stopped = plan(hosts)
    assert stopped["skipped"] == ["app2/b", "app2/c"]
    assert "app2/b: not checked or restarted - its host is unreachable (unreachable earlier in this run)" in stopped["lines"]
    assert stopped["problems"] == [
        "1 of 2 producer host(s) unreachable (50%, over enqueue_shards_max_fail_percentage 0): app2 (unreachable "
        "earlier in this run): b, c not checked or restarted. Bring them back and run the playbook again (it restarts "
        "only what is still stale), or raise enqueue_shards_max_fail_percentage to go on without them"]
    allowed = plan(hosts, max_fail_percentage=50)
    assert allowed["problems"] == [] and allowed["batches"] == [[["app1", "a"]]]


def test_a_host_that_answered_but_failed_before_its_read_is_said_to_have_failed_not_to_be_unreachable():
    written = "could not write /etc/awa/producer.env: [Errno 13] Permission denied"
    hosts = [systemd_host("app1", {"a": unit("a", started=CHANGE_AT - 60)}, READ_AT + 2),
             host_state(settings("app2", ["b"]), {"failed": True, "msg": written})]
    stopped = plan(hosts)
    assert f"app2/b: not checked or restarted - its host's run failed before reading it ({written})" in stopped["lines"]
    assert stopped["problems"] == [
        f"1 of 2 producer host(s) failed before their services were read (50%, over enqueue_shards_max_fail_percentage"
        f" 0): app2 ({written}): b not checked or restarted. Fix what each host said and run the playbook again (it "
        "restarts only what is still stale), or raise enqueue_shards_max_fail_percentage to go on without them"]


def test_batch_sizes_count_hosts_as_ansible_serial_writes_them():
    before = CHANGE_AT - 60
    hosts = [systemd_host(f"app{index}", {"a": unit("a", started=before), "b": unit("b", started=before)},
                          READ_AT + 2) for index in (1, 2, 3, 4, 5)]
    result = plan(hosts, batch_size=[1, "50%"])
    assert [len({host for host, dummy in batch}) for batch in result["batches"]] == [1, 2, 2]
    assert result["headline"] == (
        "Restarting 10 producer service(s) on 5 host(s) in 3 batch(es) of 1, 2, 2 host(s) (enqueue_shards_batch_size "
        "1, 50%): [app1/a, app1/b] then [app2/a, app2/b, app3/a, app3/b] then [app4/a, app4/b, app5/a, app5/b]")
    assert [len(batch) for batch in plan(hosts, batch_size="25%")["batches"]] == [2, 2, 2, 2, 2]


# -- enqueue_shards_service_queues: a change restarts only the services it concerns -----------------------------

def declared_host(host: str, units: dict[str, str], declared: dict[str, list[str]]) -> dict:
    """A systemd host whose services declare the queues they enqueue into."""
    return host_state(dict(settings(host, list(units)), service_queues=declared), systemd_result(units, READ_AT + 2))


def test_a_raise_leaves_the_services_that_declare_other_queues_untouched_and_their_runtimes_out_of_the_waits():
    before = CHANGE_AT - 60
    read = dict(UNCONVERGED, runtimes=[runtime(101, before, converged=False), runtime(102, before, converged=False)])
    hosts = [declared_host("app1", {"a": unit("a", started=before, pid=101), "b": unit("b", started=before, pid=102)},
                           {"b": ["billing"]})]
    result = plan(hosts, read=read)
    assert result["batches"] == [[["app1", "a"]]]
    assert result["untouched"] == ["app1/b"]
    # The waits leave out the runtimes of app1/b (window_services, concerned false).
    started = float(int(before))  # systemd's whole seconds
    assert window_services(result) == [
        {"reports_as": [{"pid": 101, "hostname": None}], "started_at": started, "concerned": True},
        {"reports_as": [{"pid": 102, "hostname": None}], "started_at": started, "concerned": False}]
    assert ("app1/b: untouched - it enqueues only into billing, which this change does not concern "
            "(enqueue_shards_service_queues)") in result["detail"]


def test_a_lowering_restarts_every_service_whatever_it_declares():
    """A producer left on the old, higher count would refill the shards being drained: declarations are not used."""
    before = CHANGE_AT - 60
    lowered = json.loads(json.dumps(UNCONVERGED))
    lowered["queues"]["demo"]["last_change"]["demo"].update(from_shards=8, to_shards=6)
    lowered["runtimes"] = [runtime(101, before, converged=False), runtime(102, before, converged=False)]
    hosts = [declared_host("app1", {"a": unit("a", started=before, pid=101), "b": unit("b", started=before, pid=102)},
                           {"b": ["billing"]})]
    result = plan(hosts, read=lowered, batch_size=2)
    assert result["batches"] == [[["app1", "a"], ["app1", "b"]]]
    assert result["untouched"] == [] and all(service["concerned"] for service in window_services(result))
    assert ("enqueue_shards_service_queues is not applied: the change lowers demo, so every producer service is "
            "concerned (one that kept the old count would refill the old shards).") in result["detail"]


def test_a_lowering_in_check_mode_is_told_by_the_change_s_result():
    before = CHANGE_AT - 60
    change = {"queues": {"demo": {"shards": 2, "previous_shards": {"demo": 4}}}}
    hosts = [declared_host("app1", {"a": unit("a", started=before, pid=101), "b": unit("b", started=before, pid=102)},
                           {"b": ["billing"]})]
    result = plan(hosts, read=CONVERGED, change=change, check_mode=True, batch_size=2)
    assert sorted(member[1] for batch in result["batches"] for member in batch) == ["a", "b"]
    assert result["untouched"] == []


def test_a_host_whose_only_service_declares_other_queues_keeps_its_runtime_out_of_the_waits():
    """0.5.0's regression: the host's runtime was taken for one outside the inventory, and the waits waited for it."""
    before = CHANGE_AT - 60
    read = dict(UNCONVERGED, runtimes=[runtime(101, before, converged=False), runtime(301, before, converged=False)])
    hosts = [declared_host("app1", {"a": unit("a", started=before, pid=101)}, {}),
             declared_host("app3", {"w1": unit("w1", started=before, pid=301)}, {"w1": ["elsewhere"]})]
    result = plan(hosts, read=read)
    assert result["batches"] == [[["app1", "a"]]] and result["untouched"] == ["app3/w1"]
    assert not any("outside the change window" in line for line in result["detail"]), result["detail"]
    window = window_services(result)
    assert [service["concerned"] for service in window] == [True, False]
    assert window[1]["reports_as"] == [{"pid": 301, "hostname": None}], "its runtime is tied to it, not waited for"


def test_a_service_that_only_enqueues_restarts_when_it_started_before_the_change_even_once_every_runtime_runs_it():
    before, after = CHANGE_AT - 60, CHANGE_AT + 30
    converged = read_later(UNCONVERGED, 90)
    converged["queues"] = {name: dict(view, converged=True) for name, view in converged["queues"].items()}
    converged["runtimes"] = [runtime(101, after)]

    def host(web_started: float) -> dict:
        units = {"a": unit("a", started=after, pid=101), "web": unit("web", started=web_started, pid=102)}
        return host_state(settings("app1", list(units), {"web": 0}), systemd_result(units, CHANGE_AT + 92))

    # A re-run after a dead controller: the worker's runtime runs the count, the web application was not restarted.
    result = plan([host(before)], read=converged)
    assert result["batches"] == [[["app1", "web"]]]
    assert "app1/web: restart - it started before the change of demo" in result["lines"]
    assert plan([host(after + 5)], read=converged)["batches"] == []
    assert "app1/web: left alone - it started after the change, so it runs the count" in plan(
        [host(after + 5)], read=converged)["lines"]


def test_a_service_whose_processes_lack_the_hostname_of_its_environment_file_is_said_not_to_load_it():
    before = CHANGE_AT - 60
    units = {"a": unit("a", started=before, pid=101, hostname="app1"), "b": unit("b", started=before, pid=102)}
    host = host_state(dict(settings("app1", list(units)), runtime_hostname="app1"), systemd_result(units, READ_AT + 2))
    lines = plan([host])["detail"]
    assert ("app1/b: its processes do not show HOSTNAME=app1, which its environment file sets: it does not load the "
            "file (a systemd unit needs EnvironmentFile=), so its runtimes report no host name of their own") in lines
    assert not any(line.startswith("app1/a: its processes") for line in lines)
    # A file written in this run: the processes predate it, and their restart loads it.
    changed = dict(host, environment_changed=True)
    assert not any("do not show HOSTNAME" in line for line in plan([changed])["detail"])
