# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which services the role restarts, in which batches, and whether a batch came back."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.awa.operations.plugins.plugin_utils.rollout_restarts import (
    batch_verdict,
    host_services,
    interleave,
    parse_systemctl_show,
    restart_outcome,
    restart_plan,
)
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.recorded import load


UNCONVERGED = load("info-unconverged")  # 0 of 3 runtimes on the count after change #2 (demo 4 -> 6)
CONVERGED = load("info-converged")  # 2 of 2 after change #1
CHANGE_AT = datetime.datetime.fromisoformat(UNCONVERGED["queues"]["demo"]["last_change"]["demo"]["changed_at"]).timestamp()
READ_AT = datetime.datetime.fromisoformat(UNCONVERGED["read_at"]).timestamp()


def read_later(read: dict, seconds_after_change: float) -> dict:
    """The same state, read ``seconds_after_change`` after the change committed (a re-run, say)."""
    when = datetime.datetime.fromtimestamp(CHANGE_AT + seconds_after_change, tz=datetime.timezone.utc)
    return dict(read, read_at=when.isoformat())


def unit(name: str, state: str = "active", sub: str = "running", started: float | None = None, pid: int = 100,
         load_state: str = "loaded", result: str = "success") -> str:
    lines = [f"Id={name}.service", f"LoadState={load_state}", f"ActiveState={state}", f"SubState={sub}",
             f"Result={result}", f"MainPID={pid}", f"ActiveEnterTimestamp={'' if started is None else '@%d' % started}"]
    return "\n".join(lines) + "\n"


def systemd_host(host: str, units: dict[str, str], clock: float, environment_changed: bool = False) -> dict:
    """A host report as the role builds it from `systemctl show` and the host's epoch fact."""
    return host_services(list(units), host, "systemd", "\n".join(units.values()), None, str(int(clock)),
                         environment_changed)


def plan(hosts: list[dict], read: dict = UNCONVERGED, change: dict | None = None, batch_size: int = 1,
         check_mode: bool = False) -> dict:
    return restart_plan(hosts, read, change, batch_size, 1, check_mode)


def test_systemctl_show_of_several_units_is_read_per_unit():
    output = unit("a", started=1764520916) + "\n" + unit("b", state="failed", sub="failed", result="exit-code", pid=0)
    assert [properties["Id"] for properties in parse_systemctl_show(output)] == ["a.service", "b.service"]
    report = host_services(["a", "b", "c"], "app1", "systemd", output, clock="1764520999")
    states = {service["service"]: service for service in report["services"]}
    assert (states["a"]["state"], states["a"]["started_at"], states["a"]["main_pid"]) == ("running", 1764520916, 100)
    assert (states["b"]["state"], states["b"]["detail"]) == ("failed", "failed/failed, result exit-code")
    assert states["c"]["state"] == "unknown"
    assert report["clock"] == 1764520999.0


def test_services_started_before_the_change_restart_in_batches_that_span_hosts():
    before = CHANGE_AT - 60
    hosts = [systemd_host("app1", {"a": unit("a", started=before), "b": unit("b", started=before)}, READ_AT + 2),
             systemd_host("app2", {"a": unit("a", started=before)}, READ_AT + 2)]
    result = plan(hosts, batch_size=2)
    assert result["batches"] == [[["app1", "a"], ["app2", "a"]], [["app1", "b"]]]
    assert result["restarts"] == 3 and result["problems"] == []
    assert "app1/b: restart - it started before the change of demo" in result["lines"]
    assert result["headline"].startswith("Restarting 3 producer service(s) in 2 batch(es) of at most 2")


def test_services_that_started_after_the_change_are_left_alone_and_outside_runtimes_reported():
    # A re-run 60 s after the change: both services were restarted 30 s after it, yet 3 runtimes lag.
    after = CHANGE_AT + 30
    hosts = [systemd_host("app1", {"a": unit("a", started=after), "b": unit("b", started=after)}, CHANGE_AT + 62)]
    result = plan(hosts, read=read_later(UNCONVERGED, 60))
    assert result["batches"] == [] and result["headline"] == "No producer service to restart."
    assert "app1/a: left alone - it started after the change, so it runs the count" in result["lines"]
    outside = [line for line in result["lines"] if "outside the inventory" in line]
    assert len(outside) == 1 and "at least 3 runtime(s) run outside the inventory. On an older count: " in outside[0]
    assert "pid 15653 " in outside[0]


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
    assert plan(hosts, read=read_later(UNCONVERGED, 60))["batches"] == [[["app1", "a"]]]


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
    assert result["batches"] == [[["app1", "failed"]], [["app1", "ok"]]]
    assert any(line.startswith("app1/stopped: left alone - it is stopped") for line in result["lines"])
    assert result["problems"] == ["app1/gone: systemd does not know this unit (LoadState=not-found); correct "
                                  "enqueue_shards_services for this host"]


def test_when_every_runtime_runs_the_count_only_a_changed_environment_restarts():
    before = datetime.datetime.fromisoformat(CONVERGED["read_at"]).timestamp() - 3600
    clock = datetime.datetime.fromisoformat(CONVERGED["read_at"]).timestamp() + 2
    quiet = systemd_host("app1", {"a": unit("a", started=before)}, clock)
    changed = systemd_host("app2", {"a": unit("a", started=before)}, clock, environment_changed=True)
    result = plan([quiet, changed], read=CONVERGED)
    assert result["batches"] == [[["app2", "a"]]]
    assert result["lines"] == ["app2/a: restart - its environment file changed"]


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
    report = host_services(["p1", "p2"], "localhost", "command", status_results=[], clock="1")
    result = plan([report])
    assert result["batches"] == [[["localhost", "p1"]], [["localhost", "p2"]]]
    assert "its start time is unknown (no enqueue_shards_status_command)" in result["lines"][0]


def test_the_status_command_contract():
    results = [{"item": "p1", "rc": 0, "stdout": f"{CHANGE_AT + 30:.3f}\n"},
               {"item": "p2", "rc": 0, "stdout": f"{CHANGE_AT - 30:.3f}"},
               {"item": "p3", "rc": 1, "stdout": "", "stderr": "p3 is not running"},
               {"item": "p4", "rc": 0, "stdout": "yesterday"}]
    report = host_services(["p1", "p2", "p3", "p4"], "localhost", "command", status_results=results,
                           clock=str(int(CHANGE_AT + 62)))
    states = {service["service"]: service for service in report["services"]}
    assert states["p3"]["detail"] == "status command exited 1: p3 is not running"
    assert states["p4"]["detail"] == "status command printed 'yesterday', not unix seconds"
    assert plan([report], read=read_later(UNCONVERGED, 60))["batches"] == [[["localhost", "p2"]], [["localhost", "p3"]], [["localhost", "p4"]]]


def test_interleave_takes_one_service_of_each_host_in_turn():
    assert interleave([[("h1", "a"), ("h1", "b"), ("h1", "c")], [], [("h3", "a")]]) == [
        ("h1", "a"), ("h3", "a"), ("h1", "b"), ("h1", "c")]


def test_restart_outcome_reads_items_and_whole_task_failures():
    systemd = {"results": [{"item": "a", "changed": True},
                           {"item": "b", "failed": True, "msg": "Unable to restart service b: Job for b.service failed"}]}
    skipped = {"skipped": True, "results": [{"item": "a", "skipped": True}, {"item": "b", "skipped": True}]}
    assert restart_outcome([systemd, skipped], ["a", "b"], "app1") == {
        "host": "app1", "restarted": ["a"], "failed": [{"service": "b", "message": "Unable to restart service b: Job for b.service failed"}]}
    # ansible.builtin.command's own words on a non-zero exit: 2.19 and 2.20, then 2.21. Only stderr says why.
    for boilerplate in ("non-zero return code", "The command exited with a non-zero return code."):
        command = {"results": [{"item": "a", "failed": True, "rc": 7, "msg": boilerplate, "stderr": "no such program\n"}]}
        assert restart_outcome([command], ["a"], "app1")["failed"] == [{"service": "a", "message": "no such program"}]
    silent = {"results": [{"item": "a", "failed": True, "rc": 7, "msg": "non-zero return code", "stderr": ""}]}
    assert restart_outcome([silent], ["a"], "app1")["failed"] == [{"service": "a", "message": "exit status 7"}]
    whole = {"failed": True, "msg": "the loop could not be templated"}
    assert restart_outcome([whole], ["a", "b"], "app1")["failed"] == [
        {"service": "a", "message": "the loop could not be templated"},
        {"service": "b", "message": "the loop could not be templated"}]


def _states(host: str, units: dict[str, str]) -> dict:
    return host_services(list(units), host, "systemd", "\n".join(units.values()))


def test_a_batch_whose_services_all_came_back_passes():
    verdict = batch_verdict([["app1", "a"], ["app2", "a"]], 0, 2,
                            [{"host": "app1", "restarted": ["a"], "failed": []}, {"host": "app2", "restarted": ["a"], "failed": []}],
                            [_states("app1", {"a": unit("a", pid=11)}), _states("app2", {"a": unit("a", pid=12)})],
                            {"new_runtimes": [{"pid": 11}, {"pid": 12}]}, 1)
    assert verdict == {"ok": True, "message": "Batch 1 of 2 is back: 2 of 2 restarted runtimes live and healthy."}


def test_a_failed_restart_stops_the_rollout_naming_host_and_unit_and_its_neighbour_is_still_checked():
    verdict = batch_verdict([["app1", "a"], ["app2", "b"]], 1, 3,
                            [{"host": "app1", "restarted": ["a"], "failed": []},
                             {"host": "app2", "restarted": [], "failed": [{"service": "b", "message": "Job for b.service failed"}]}],
                            [_states("app1", {"a": unit("a", pid=11)}),
                             _states("app2", {"b": unit("b", state="failed", sub="failed", result="exit-code")})],
                            {"new_runtimes": [{"pid": 11}]}, 1)
    assert not verdict["ok"]
    message = verdict["message"]
    assert message.startswith("Rollout stopped at batch 2 of 3 (app1/a, app2/b): app2/b did not come back: the "
                              "restart failed: Job for b.service failed")
    assert "app1/a did not come back" not in message and "app1/a runs as" not in message
    assert "No later batch was restarted" in message and "run the playbook again" in message


def test_a_unit_that_crashes_after_a_successful_restart_is_named():
    verdict = batch_verdict([["app1", "a"], ["app1", "b"]], 0, 1,
                            [{"host": "app1", "restarted": ["a", "b"], "failed": []}],
                            [_states("app1", {"a": unit("a", pid=11),
                                              "b": unit("b", state="activating", sub="auto-restart", pid=0)})],
                            {"new_runtimes": [{"pid": 11}], "msg": "Timed out after 10s waiting until restarted"}, 1)
    assert not verdict["ok"]
    assert "app1/b did not come back: it is failed (activating/auto-restart) after its restart" in verdict["message"]
    assert "1 of 2 restarted runtimes are live and healthy in Awa" in verdict["message"]
    assert "app1/a did not" not in verdict["message"]


def test_a_running_unit_without_a_healthy_runtime_is_named_by_its_pid():
    verdict = batch_verdict([["app1", "a"]], 0, 1, [{"host": "app1", "restarted": ["a"], "failed": []}],
                            [_states("app1", {"a": unit("a", pid=42)})], {"new_runtimes": []}, 1)
    assert "app1/a runs as pid 42, but no new live and healthy Awa runtime has that pid" in verdict["message"]


def test_a_failed_wait_is_reported_with_the_module_message():
    verdict = batch_verdict([["app1", "a"]], 0, 1, [{"host": "app1", "restarted": ["a"], "failed": []}],
                            [_states("app1", {"a": unit("a", pid=42)})],
                            {"msg": "could not connect to database 'app' on db1:5432 as 'awa_migrator'"}, 1)
    assert "the wait for the new runtimes failed: could not connect to database 'app'" in verdict["message"]
