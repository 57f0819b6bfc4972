# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a service's processes report to Awa as a runtime's identity, read from /proc and the control groups: a
root of files laid out as Linux lays them out, and this machine's own processes."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from ansible_collections.awa.operations.plugins.module_utils.producer.identities import (
    cgroup_pids,
    children,
    descendants,
    reports_as,
)
from ansible_collections.awa.operations.plugins.module_utils.producer.services import operate, status_command_state


def process(root: Path, pid: int, parent: int, nspid: str, environ: bytes | None = b"PATH=/bin\0") -> None:
    folder = root / "proc" / str(pid)
    folder.mkdir(parents=True)
    (folder / "stat").write_text(f"{pid} (a (b) c) S {parent} 1 1\n", encoding="utf-8")
    (folder / "status").write_text(f"Name:\tpython3\nNSpid:\t{nspid}\n", encoding="utf-8")
    if environ is not None:
        (folder / "environ").write_bytes(environ)


def test_a_container_s_process_reports_its_innermost_pid_and_the_hostname_its_engine_set(tmp_path):
    # conmon (500) runs the container's init (501: pid 1 inside), which runs a worker (502: pid 2 inside).
    process(tmp_path, 500, 1, "500")
    process(tmp_path, 501, 500, "501\t1", b"PATH=/bin\0HOSTNAME=3f9c2a1b7d4e\0")
    process(tmp_path, 502, 501, "502\t2", b"HOSTNAME=3f9c2a1b7d4e\0")
    process(tmp_path, 600, 1, "600")
    below = children(str(tmp_path))
    assert descendants(500, below) == [500, 501, 502]
    assert reports_as(500, "", below, str(tmp_path)) == [
        {"pid": 500, "hostname": None}, {"pid": 1, "hostname": "3f9c2a1b7d4e"}, {"pid": 2, "hostname": "3f9c2a1b7d4e"}]
    assert reports_as(999, "", below, str(tmp_path)) == [], "a process that is gone"


def test_an_environment_that_cannot_be_read_leaves_the_host_name_unknown(tmp_path):
    process(tmp_path, 700, 1, "700", environ=None)
    assert reports_as(700, "", {}, str(tmp_path)) == [{"pid": 700}]


@pytest.mark.parametrize("hierarchy", ["", "systemd/"], ids=["cgroup v2", "cgroup v1 (systemd's)"])
def test_a_unit_s_processes_are_those_of_its_control_group_and_the_groups_below_it(tmp_path, hierarchy):
    unit = tmp_path / "sys/fs/cgroup" / hierarchy / "system.slice/awa-producer@1.service"
    (unit / "libpod-payload-3f9c").mkdir(parents=True)
    (unit / "cgroup.procs").write_text("500\n", encoding="utf-8")
    (unit / "libpod-payload-3f9c" / "cgroup.procs").write_text("501\n502\n", encoding="utf-8")
    assert sorted(cgroup_pids("/system.slice/awa-producer@1.service", str(tmp_path))) == [500, 501, 502]
    assert cgroup_pids("/system.slice/other.service", str(tmp_path)) == []


def test_this_machine_s_own_process_in_a_pid_namespace_of_its_own_reports_pid_1_and_its_hostname():
    if os.geteuid() != 0:
        pytest.skip("a pid namespace of its own needs root here")
    container = subprocess.Popen(["unshare", "--pid", "--fork", "env", "HOSTNAME=ctr-7a1f", "sleep", "30"])
    try:
        found: list = []
        for dummy in range(100):
            found = reports_as(container.pid, "", children(), "/")
            if {"pid": 1, "hostname": "ctr-7a1f"} in found:
                break
            time.sleep(0.05)
        assert {"pid": 1, "hostname": "ctr-7a1f"} in found, found
    finally:
        container.kill()
        container.wait()


def printing(stdout: str):
    """A status command that exits 0 and prints ``stdout``."""
    return lambda words: (0, stdout, "")


def test_a_status_command_may_name_the_runtimes_that_run_elsewhere_a_line_each():
    state = status_command_state(printing("1764520916 4242\napi-7d9f-x2\napi-7d9f-y3 1\n"), "api", "status {service}")
    assert (state.state, state.main_pid) == ("running", 4242)
    assert state.reports_as == [{"hostname": "api-7d9f-x2", "pid": None}, {"hostname": "api-7d9f-y3", "pid": 1}]
    broken = status_command_state(printing("1764520916 4242\napi 1 2\n"), "api", "status {service}")
    assert broken.state == "unknown" and "not its contract" in str(broken.problem)


def test_after_a_restart_what_the_processes_report_is_read_until_it_holds_still(tmp_path):
    # The unit's process execs a program with the container's HOSTNAME a moment after its restart returns.
    process(tmp_path, 500, 1, "500\t1", b"HOSTNAME=fleet-3\0")
    reads, naps = [], []

    def run(argv: list[str]) -> tuple[int, str, str]:
        if argv[1] == "show":
            reads.append(1)
            if len(reads) == 2:
                (tmp_path / "proc" / "500" / "environ").write_bytes(b"HOSTNAME=ctr-7a1f\0")
            return 0, "Id=a.service\nLoadState=loaded\nActiveState=active\nSubState=running\nMainPID=500\n", ""
        return 0, "", ""

    found = operate(run, ["a"], ["a"], method="auto", manager="systemd", root=str(tmp_path), sleep=naps.append)
    assert found.services[0].reports_as == [{"pid": 1, "hostname": "ctr-7a1f"}]
    assert len(reads) == 3 and naps == [0.5, 0.5], "read until two reads agree"
    untouched = operate(run, ["a"], [], method="auto", manager="systemd", root=str(tmp_path), sleep=naps.append)
    assert len(naps) == 2 and untouched.services[0].reports_as == [{"pid": 1, "hostname": "ctr-7a1f"}], "no restart"
