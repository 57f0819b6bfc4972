# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How awa_producer_services reads and restarts a host's producer services: systemd's words, the status command's,
and real commands for the restart contract (no systemd runs here; the fleet scenario runs it over SSH)."""

from __future__ import annotations

import subprocess

import pytest

from ansible_collections.awa.operations.plugins.module_utils.producer.services import (
    operate,
    parse_systemctl_show,
    restart_via,
    service_manager,
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


def test_a_failed_restart_is_reported_and_does_not_stop_the_others():
    found = systemd_result({"a": unit("a"), "b": unit("b")}, restart=("a", "b"),
                           failing={"a": "Job for a.service failed because the control process exited."})
    assert found["restarted"] == ["b"]
    assert found["restart_failures"] == [{"service": "a",
                                          "message": "Job for a.service failed because the control process exited."}]


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
    assert found["restart_failures"] == [{"service": "b", "message": "no such program"}]


def test_check_mode_and_a_missing_restart_command_restart_nothing(tmp_path):
    marker = tmp_path / "restarted"
    command = f"touch {marker}"
    assert operate(shell, ["a"], ["a"], method="command", restart_command=command, manager="x",
                   check_mode=True).restarted_services() == []
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
