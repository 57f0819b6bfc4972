# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How awa_producer_services reads and restarts a host's producer services: systemd's words, the status command's,
and real commands for the restart contract (no systemd runs here; the fleet scenario runs it over SSH)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ansible_collections.awa.operations.plugins.module_utils.producer.services import (
    operate,
    parse_systemctl_show,
    read_states,
    restart_via,
    service_manager,
    status_command_state,
)
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import systemd_result, unit


def shell(command: object) -> tuple[int, str, str]:
    """Run a command as AnsibleModule.run_command does without a shell: argv, or a string split like a shell."""
    import shlex
    argv = command if isinstance(command, list) else shlex.split(str(command))
    process = subprocess.run(argv, capture_output=True, text=True, check=False)
    return process.returncode, process.stdout, process.stderr


def test_systemctl_show_of_several_units_is_read_per_unit():
    output = unit("a", started=1764520916) + "\n" + unit("b", state="failed", sub="failed", result="exit-code", pid=0)
    assert [properties["Id"] for properties in parse_systemctl_show(output)] == ["a.service", "b.service"]
    found = systemd_result({"a": unit("a", started=1764520916),
                            "b": unit("b", state="failed", sub="failed", result="exit-code", pid=0),
                            "c": unit("c", state="inactive", sub="dead", load_state="not-found")}, clock=1764520999)
    states = {service["service"]: service for service in found["services"]}
    assert (states["a"]["state"], states["a"]["started_at"], states["a"]["main_pid"]) == ("running", 1764520916, 100)
    assert (states["b"]["state"], states["b"]["detail"]) == ("failed", "failed/failed, result exit-code")
    assert states["c"]["state"] == "missing"
    assert found["method"] == "systemd" and found["clock"] == 1764520999


def test_a_failed_restart_is_reported_with_its_exit_status_and_last_lines_and_does_not_stop_the_others():
    # What systemctl restart prints: the cause on the first line, where to look on the second.
    failing = {"a": 'Job for a.service failed because the control process exited with error code.\n'
                    'See "systemctl status a.service" and "journalctl -xeu a.service" for details.\n'}
    found = systemd_result({"a": unit("a"), "b": unit("b")}, restart=("a", "b"), failing=failing)
    assert found["restarted"] == ["b"]
    assert found["restart_failures"] == [{"service": "a", "message": (
        'exit status 1: Job for a.service failed because the control process exited with error code. / See '
        '"systemctl status a.service" and "journalctl -xeu a.service" for details.')}]


def test_the_status_command_prints_the_start_and_optionally_the_runtime_pid(tmp_path):
    starts = {"a": "1764520916.25 4242", "b": "1764520916", "c": "1764520916 pid", "d": "1 2 3"}
    for name, printed in starts.items():
        (tmp_path / name).write_text(printed + "\n", encoding="utf-8")
    found = operate(shell, list(starts) + ["e"], [], method="auto", manager="supervisord",
                    status_command=f"cat {tmp_path}/{{service}}").result()
    states = {s["service"]: s for s in found["services"]}
    assert found["method"] == "command"
    assert (states["a"]["state"], states["a"]["started_at"], states["a"]["main_pid"]) == ("running", 1764520916.25, 4242)
    assert (states["b"]["state"], states["b"]["main_pid"]) == ("running", None)
    assert states["c"]["state"] == states["d"]["state"] == "unknown"
    assert states["e"]["state"] == "unknown" and states["e"]["detail"].startswith("status command exited 1: cat: ")


def test_the_restart_command_runs_once_per_service_with_the_name_quoted(tmp_path):
    log = tmp_path / "restarts"
    found = operate(shell, ["web one", "b"], ["web one", "b"], method="command", manager="systemd",
                    restart_command=f"sh -c 'echo \"$0\" >> {log}; [ \"$0\" != b ] || {{ echo no such program >&2; "
                                    "exit 3; }' {service}").result()
    assert log.read_text(encoding="utf-8").splitlines() == ["web one", "b"]
    assert found["restarted"] == ["web one"]
    assert found["restart_failures"] == [{"service": "b", "message": "exit status 3: no such program"}]


def test_check_mode_and_a_missing_restart_command_restart_nothing(tmp_path):
    marker = tmp_path / "restarted"
    command = f"touch {marker}"
    assert operate(shell, ["a"], ["a"], method="command", restart_command=command, manager="x",
                   check_mode=True).result()["restarted"] == []
    assert not marker.exists()
    found = operate(shell, ["a"], ["a"], method="auto", manager="sysvinit")
    assert found.problems == ["this host does not run systemd (service manager: sysvinit) and "
                              "enqueue_shards_restart_command is empty: give the command that restarts one service, "
                              'e.g. "supervisorctl restart {service}"']
    assert operate(shell, ["a"], ["a"], method="systemd", manager="sysvinit").problems[0].startswith(
        "enqueue_shards_restart_method is systemd but this host runs sysvinit")
    assert operate(shell, ["a"], [], method="auto", manager="sysvinit").problems == []


@pytest.mark.parametrize("method, manager, expected", [("auto", "systemd", "systemd"), ("auto", "supervisord", "command"),
                                                       ("command", "systemd", "command"), ("systemd", None, "systemd")])
def test_restart_via(method, manager, expected):
    assert restart_via(method, manager) == expected


def test_the_service_manager_is_systemd_only_where_systemd_runs(tmp_path):
    (tmp_path / "proc" / "1").mkdir(parents=True)
    (tmp_path / "proc" / "1" / "comm").write_text("supervisord\n", encoding="utf-8")
    assert service_manager(str(tmp_path)) == "supervisord"
    (tmp_path / "run" / "systemd" / "system").mkdir(parents=True)
    assert service_manager(str(tmp_path)) == "systemd"


def test_a_restart_by_command_first_finds_its_programs_and_restarts_nothing_when_one_cannot_run(tmp_path):
    marker = tmp_path / "restarted"
    found = operate(shell, ["a", "b"], ["a", "b"], method="command", manager="supervisord",
                    restart_command=f"sh -c 'touch {marker}' {{service}}", status_command="awa-started {service}",
                    path="/usr/bin:/bin", user="awa")
    assert found.problems == ["the status command awa-started {service} cannot run here: awa-started is not on the "
                              "PATH of user awa (/usr/bin:/bin)"]
    assert not marker.exists() and found.result()["restarted"] == []
    # Said once, for the host: the status command is not run for every service only to fail again.
    assert [(state.detail, state.problem) for state in found.services] == [
        ("the status command cannot run here", None)] * 2
    assert found.programs == [{"command": "restart", "program": "sh", "path": shutil.which("sh", path="/usr/bin:/bin")}]
    absolute = operate(shell, ["a"], ["a"], method="command", manager="supervisord", check_mode=True,
                       restart_command="/opt/awa-nowhere/ctl restart {service}", path="/usr/bin:/bin", user="awa")
    assert absolute.problems == ["the restart command /opt/awa-nowhere/ctl restart {service} cannot run here: "
                                 "/opt/awa-nowhere/ctl does not exist"]
    split = operate(shell, ["a"], ["a"], method="command", manager="supervisord", restart_command="sh -c 'x {service}",
                    path="/usr/bin:/bin", user="awa")
    assert split.problems == ["the restart command sh -c 'x {service} cannot be split into words: No closing "
                              "quotation"]


def test_a_status_command_that_cannot_run_or_breaks_its_contract_is_a_problem_a_stopped_service_is_not(tmp_path):
    printed = {"runs": "1764520916 42", "stopped": "", "garbage": "RUNNING pid 42", "silent": ""}
    for name, text in printed.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    status = (f"sh -c '[ \"$0\" != stopped ] || exit 3; [ \"$0\" != gone ] || exec awa-no-such-tool; "
              f"cat {tmp_path}/\"$0\"' {{service}}")
    states = {state.service: state for state in operate(
        shell, [*printed, "gone"], [], method="command", manager="supervisord", status_command=status).services}
    assert (states["runs"].state, states["runs"].problem) == ("running", None)
    assert (states["stopped"].state, states["stopped"].detail, states["stopped"].problem) == (
        "unknown", "not running, status command exited 3", None)
    assert states["gone"].problem == (f"the status command {status.replace('{service}', 'gone')} cannot run here "
                                      "(exit status 127: gone: 1: exec: awa-no-such-tool: not found)")
    assert states["garbage"].problem == (f"the status command {status.replace('{service}', 'garbage')} printed "
                                         "'RUNNING pid 42', not its contract: it must exit 0 and print START or START "
                                         "PID (the start in unix seconds, then optionally the pid), then optionally a "
                                         "line HOSTNAME or HOSTNAME PID for each runtime that runs elsewhere (a replica)")
    assert "printed nothing, not its contract" in str(states["silent"].problem)
    missing = operate(shell, ["a"], [], method="command", manager="supervisord",
                      status_command=f"{tmp_path}/no-such-status {{service}}").services[0]
    assert missing.problem == (f"the status command {tmp_path}/no-such-status a cannot run here (exit status 127: "
                               f"{tmp_path}/no-such-status: No such file or directory)")


@pytest.mark.parametrize("rc, stdout, stderr, state, detail, problem", [
    (0, "1764520916.5 4242\n", "", "running", "", None),
    (3, "", "p1 is not running (STOPPED)\n", "unknown",
     "not running, status command exited 3: p1 is not running (STOPPED)", None),
    (4, "p1: ERROR (no such process)\n", "", "missing",
     "no such service (status command exit status 4: p1: ERROR (no such process))",
     "the status command status p1 says there is no such service (exit status 4: p1: ERROR (no such process))"),
    (4, "", "", "missing", "no such service (status command exit status 4)",
     "the status command status p1 says there is no such service (exit status 4)"),
    (1, "", "supervisord does not answer\n", "unknown", "status command exited 1: supervisord does not answer", None),
    (7, "0\n", "", "unknown", "status command exited 7: 0", None),
], ids=["running", "not-running", "no-such-service", "no-such-service-silent", "cannot-tell", "other"])
def test_the_status_commands_exit_says_running_not_running_or_no_such_service(rc, stdout, stderr, state, detail,
                                                                              problem):
    """LSB's status codes, as init scripts and supervisorctl status exit: 0, 3 (a restart starts it), 4 (refused)."""
    read = status_command_state(lambda words: (rc, stdout, stderr), "p1", "status {service}")
    assert (read.state, read.detail, read.problem) == (state, detail, problem)


def test_systemd_that_does_not_answer_or_know_a_unit_is_a_problem():
    def show_fails(words: list[str]) -> tuple[int, str, str]:
        return 1, "", "Failed to connect to bus: No such file or directory\n"

    states = operate(show_fails, ["a", "b"], [], method="auto", manager="systemd").services
    assert [state.problem for state in states] == [
        "systemctl show failed: exit status 1: Failed to connect to bus: No such file or directory"] * 2
    missing = systemd_result({"a": unit("a", state="inactive", sub="dead", load_state="not-found")})["services"][0]
    assert (missing["state"], missing["problem"]) == ("missing", "systemd does not know this unit (LoadState=not-found)")


def test_systemd_asked_for_on_a_host_without_it_is_not_read_with_systemctl():
    def no_systemctl(words: list[str]) -> tuple[int, str, str]:
        raise AssertionError(f"ran {words}")

    found = operate(no_systemctl, ["a"], ["a"], method="systemd", manager="supervisord", check_mode=True)
    assert found.problems[0].startswith("enqueue_shards_restart_method is systemd but this host runs supervisord")
    assert (found.services[0].state, found.services[0].detail) == (
        "unknown", "this host does not run systemd (service manager: supervisord)")


def test_a_systemctl_without_unix_timestamps_has_each_start_read_on_the_monotonic_clock():
    """systemd before 248 (Debian 11's 247) refuses --timestamp=unix: the start comes from the monotonic clock."""
    calls = []

    def systemctl_247(argv: list[str]) -> tuple[int, str, str]:
        calls.append(argv)
        if "--timestamp=unix" in argv:
            return 1, "", "Invalid value: unix.\n"
        if argv[:2] == ["systemctl", "show"]:
            return 0, ("Id=a.service\nLoadState=loaded\nActiveState=active\nSubState=running\nResult=success\n"
                       "MainPID=100\nActiveEnterTimestamp=Sat 2026-12-05 10:00:00 UTC\n"
                       "ActiveEnterTimestampMonotonic=5000000\n\n"
                       "Id=b.service\nLoadState=loaded\nActiveState=inactive\nSubState=dead\nResult=success\n"
                       "MainPID=0\nActiveEnterTimestamp=\nActiveEnterTimestampMonotonic=0\n"), ""
        raise AssertionError(argv)

    states = {state.service: state for state in read_states(systemctl_247, "systemd", ["a", "b"], "",
                                                            clock=lambda: 1764520900.0, monotonic=lambda: 900.0)}
    # The host's clock read 1764520900 when the monotonic one read 900 s: 5 s after boot is 1764520005.
    assert (states["a"].state, states["a"].started_at, states["a"].main_pid) == ("running", 1764520005.0, 100)
    assert (states["b"].state, states["b"].started_at) == ("stopped", None)
    assert len(calls) == 2 and "ActiveEnterTimestampMonotonic" in calls[1][2]
