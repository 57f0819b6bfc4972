# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the role's filters read, built by hand: systemd's words for a unit, host states, runtime rows.

Shapes follow the real sources: ``systemctl show --timestamp=unix`` output,
read by the module awa_producer_services's own code (producer/services.py's operate)
into its result, the host's state the role builds from that
(rollout.services.host_state), and a runtime of the info module's
``runtimes`` (see fixtures/ for recorded ones).
"""

from __future__ import annotations

import contextlib
import datetime
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ansible_collections.awa.operations.plugins.module_utils.producer.services import operate
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.services import host_state, unreachable_state


# The HOSTNAME a unit's process was started with (unit's hostname=): not a property systemctl shows, but what the
# fake /proc gives the process's environment.
FAKE_HOSTNAME = "X-Fake-Hostname"


def unit(name: str, state: str = "active", sub: str = "running", started: float | None = None, pid: int = 100,
         load_state: str = "loaded", result: str = "success", hostname: str | None = None) -> str:
    lines = [f"Id={name}.service", f"LoadState={load_state}", f"ActiveState={state}", f"SubState={sub}",
             f"Result={result}", f"MainPID={pid}", f"ActiveEnterTimestamp={'' if started is None else '@%d' % started}"]
    return "\n".join(lines + ([f"{FAKE_HOSTNAME}={hostname}"] if hostname else [])) + "\n"


@contextlib.contextmanager
def proc(processes: dict[int, str | None]) -> Iterator[str]:
    """A root whose /proc holds only ``processes`` (pid -> the HOSTNAME of its environment; None: none set), each a
    child of pid 1 in the root's pid namespace: what awa_producer_services reads of a service's processes."""
    with tempfile.TemporaryDirectory() as root:
        for pid, hostname in processes.items():
            folder = Path(root, "proc", str(pid))
            folder.mkdir(parents=True)
            (folder / "stat").write_text(f"{pid} (python3) S 1 {pid}\n", encoding="utf-8")
            (folder / "status").write_text(f"Name:\tpython3\nNSpid:\t{pid}\n", encoding="utf-8")
            (folder / "environ").write_bytes(b"PATH=/usr/bin\0" + (f"HOSTNAME={hostname}\0".encode() if hostname else b""))
        yield root


def settings(host: str, services: list[str], runtimes: dict[str, int] | None = None, **contract) -> dict:
    """A host's settings, as rollout.input_rules.host_settings builds them (``runtimes``: each service's, else 1)."""
    return {"host": host, "problems": [], "services": services, "service_queues": {},
            "service_runtimes": {service: (runtimes or {}).get(service, 1) for service in services},
            "restart_method": contract.get("restart_method", "auto"),
            "restart_command": contract.get("restart_command", ""),
            "status_command": contract.get("status_command", "")}


def systemd_result(units: dict[str, str], clock: float | None = None, restart: tuple[str, ...] = (),
                   failing: dict[str, str] | None = None) -> dict:
    """awa_producer_services's result on a systemd host whose ``systemctl show`` prints ``units``; the services in
    ``restart`` are restarted (those in ``failing`` fail with their message)."""
    output = "\n".join(units.values())

    def run(argv: list[str]) -> tuple[int, str, str]:
        if argv[1] == "restart":
            return (1, "", (failing or {})[argv[-1]]) if argv[-1] in (failing or {}) else (0, "", "")
        return 0, output, ""

    processes = {int(unit_pid): (re.findall(f"^{FAKE_HOSTNAME}=(.*)$", text, re.M) or [None])[0]
                 for text in units.values() for unit_pid in re.findall(r"^MainPID=(\d+)$", text, re.M) if unit_pid != "0"}
    with proc(processes) as root:
        result = operate(run, list(units), list(restart), method="auto", manager="systemd",
                         clock=lambda: 0.0 if clock is None else clock, root=root, sleep=lambda seconds: None).result()
    return dict(result, clock=clock)


def systemd_host(host: str, units: dict[str, str], clock: float | None = None, environment_changed: bool = False,
                 reachable: bool = True, runtimes: dict[str, int] | None = None) -> dict:
    """A host's state as the role builds it from awa_producer_services on a systemd host (``runtimes``: each
    service's count of runtimes, else 1)."""
    if not reachable:
        return unreachable_state(settings(host, list(units), runtimes), "unreachable earlier in this run")
    result = systemd_result(units, clock)
    if environment_changed:
        result["env_file"] = {"path": "/etc/awa/producer.env", "changed": True}
    return host_state(settings(host, list(units), runtimes), result)


def iso(unix: float) -> str:
    return datetime.datetime.fromtimestamp(unix, tz=datetime.timezone.utc).isoformat()


def runtime(pid: int, started: float, *, live: bool = True, converged: bool = True, healthy: bool = True,
            hostname: str | None = None, instance: str | None = None, pending: list[str] | None = None,
            up: float = 60.0) -> dict:
    """One runtime of the info module's ``runtimes`` (``up``: its seconds since start, as the database read it)."""
    return {"instance_id": instance or f"instance-{pid}-{int(started)}", "hostname": hostname, "pid": pid,
            "started_at": iso(started), "live": live, "healthy": healthy, "converged": converged,
            "pending_queues": pending if pending is not None else ([] if converged else ["demo"]),
            "seconds_since_start": up}


def command_host(host: str, printed: dict[str, object], clock: float | None = None,
                 status_command: str = "status {service}") -> dict:
    """A host's state from awa_producer_services on a host without systemd: ``printed`` maps each service to what its
    status command prints (stdout, or (rc, stdout, stderr)); no status command when ``status_command`` is empty."""
    def run(argv: list[str]) -> tuple[int, str, str]:
        answer = printed[argv[-1]]
        return answer if isinstance(answer, tuple) else (0, str(answer), "")  # type: ignore[return-value]

    pids = [int(line.split()[1]) for answer in printed.values() if not isinstance(answer, tuple)
            for line in str(answer).splitlines()[:1] if len(line.split()) == 2 and line.split()[1].isdigit()]
    with proc(dict.fromkeys(pids)) as root:
        result = operate(run, list(printed), [], method="auto", manager="supervisord", status_command=status_command,
                         clock=lambda: 0.0 if clock is None else clock, root=root).result()
    return host_state(settings(host, list(printed)), dict(result, clock=clock))
