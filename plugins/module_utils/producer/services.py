# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The producer services of one host: restart them, then say how each runs and what the host's clock reads.

Runs on the producer host (the module awa_producer_services). systemd
reports each unit's state, main pid and when it entered it (``systemctl
show``); hosts without systemd answer through the restart contract: a restart
command run once per service, and an optional status command that prints the
start of the service's process as unix seconds and, optionally, the pid of
the process that runs its Awa runtime. The host's clock is read last, after
every state, so a start it reports is never later than the clock.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

RUNNING, FAILED, STOPPED, STARTING, MISSING, UNKNOWN, UNREACHABLE = (
    "running", "failed", "stopped", "starting", "missing", "unknown", "unreachable")

METHODS = ("auto", "systemd", "command")
SERVICE_PLACEHOLDER = "{service}"
SYSTEMCTL_PROPERTIES = "Id,LoadState,ActiveState,SubState,Result,MainPID,ActiveEnterTimestamp"

# run(command) -> (rc, stdout, stderr): AnsibleModule.run_command, or any function like it. A list runs as argv; a
# string is split like a shell would split it, and runs without a shell (as ansible.builtin.command does).
Runner = Callable[[object], "tuple[int, str, str]"]


@dataclass(frozen=True)
class ServiceState:
    """One producer service, as its service manager (or status command) reports it."""

    service: str
    state: str
    started_at: float | None = None  # unix time on the host's clock
    main_pid: int | None = None
    detail: str = ""
    restarted: bool = False
    restart_error: str | None = None


@dataclass
class HostServices:
    """What one run found on the host: how it restarts, its services, its clock."""

    service_manager: str
    method: str
    services: list[ServiceState] = field(default_factory=list)
    clock: float = 0.0
    hostname: str = ""
    problems: list[str] = field(default_factory=list)

    def restarted_services(self) -> list[str]:
        return [state.service for state in self.services if state.restarted]

    def result(self) -> dict:
        """The module's result (RETURN): ``restart_failures``, since ``failed`` is Ansible's own key."""
        failures = [{"service": state.service, "message": state.restart_error}
                    for state in self.services if state.restart_error is not None]
        return {"service_manager": self.service_manager, "method": self.method, "clock": self.clock,
                "hostname": self.hostname, "services": [asdict(state) for state in self.services],
                "restarted": self.restarted_services(), "restart_failures": failures,
                "problems": list(self.problems)}


def service_manager(root: str = "/") -> str:
    """``systemd`` when systemd runs this host (as sd_booted() tells), else the name of process 1."""
    if os.path.isdir(os.path.join(root, "run/systemd/system")):
        return "systemd"
    try:
        with open(os.path.join(root, "proc/1/comm"), encoding="utf-8") as comm:
            return comm.read().strip() or "unknown"
    except OSError:
        return "unknown"


def restart_via(method: str, manager: str | None) -> str:
    """systemd or command: how a host whose service manager is ``manager`` restarts its services."""
    if method == "systemd" or (method == "auto" and manager == "systemd"):
        return "systemd"
    return "command"


def configuration_problems(method: str, manager: str, restart_command: str, restarts: bool) -> list[str]:
    """Why this host cannot restart its services as configured (nothing when it can, or restarts nothing)."""
    if not restarts:
        return []
    if method == "systemd" and manager != "systemd":
        return [f"enqueue_shards_restart_method is systemd but this host runs {manager}: use "
                "enqueue_shards_restart_method: command with enqueue_shards_restart_command"]
    if restart_via(method, manager) == "command" and not restart_command.strip():
        return [f"this host does not run systemd (service manager: {manager}) and enqueue_shards_restart_command "
                'is empty: give the command that restarts one service, e.g. "supervisorctl restart {service}"']
    return []


def _unix_time(text: str) -> float | None:
    """systemd's --timestamp=unix value (``@1764520916``) or plain seconds; None when unset."""
    text = text.strip().lstrip("@")
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 else None


def parse_systemctl_show(output: str) -> list[dict[str, str]]:
    """``systemctl show`` of several units: one property dict per unit (blocks separated by blank lines)."""
    units: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in output.splitlines() + [""]:
        if not line.strip():
            if current:
                units.append(current)
                current = {}
            continue
        key, dummy, value = line.partition("=")
        current[key] = value
    return units


def systemd_state(service: str, properties: dict[str, str]) -> ServiceState:
    if not properties:
        return ServiceState(service, UNKNOWN, detail="systemctl show did not report it")
    active, sub = properties.get("ActiveState", ""), properties.get("SubState", "")
    pid = int(properties.get("MainPID") or 0) or None
    result = properties.get("Result")
    detail = f"{active}/{sub}" + (f", result {result}" if result not in (None, "", "success") else "")
    if properties.get("LoadState") == "not-found":
        return ServiceState(service, MISSING, detail="systemd does not know this unit (LoadState=not-found)")
    if active == "active":
        state = RUNNING
    elif active == "failed" or sub == "auto-restart":
        state = FAILED
    elif active in ("activating", "reloading"):
        state = STARTING
    elif active == "inactive":
        state = STOPPED
    else:
        state = UNKNOWN
    return ServiceState(service, state, _unix_time(properties.get("ActiveEnterTimestamp", "")), pid, detail)


def status_command_state(service: str, rc: int, stdout: str, stderr: str) -> ServiceState:
    """The restart contract's status command: exit 0 and ``START [PID]`` on stdout (START in unix seconds)."""
    if rc != 0:
        error = (stderr or stdout or "").strip().splitlines()
        return ServiceState(service, UNKNOWN, detail=f"status command exited {rc}" + (f": {error[-1]}" if error else ""))
    words = stdout.split()
    started = _unix_time(words[0]) if len(words) in (1, 2) else None
    pid = int(words[1]) if started is not None and len(words) == 2 and words[1].isdigit() else None
    if started is None or (len(words) == 2 and pid is None):
        return ServiceState(service, UNKNOWN, detail=f"status command printed {stdout.strip()!r}, not unix seconds "
                                                     "(and optionally a pid)")
    return ServiceState(service, RUNNING, started, pid)


def for_service(command: str, service: str) -> str:
    """A restart or status command for one service: ``{service}`` replaced by the quoted name."""
    return command.replace(SERVICE_PLACEHOLDER, shlex.quote(service))


def _failure_text(rc: int, stdout: str, stderr: str) -> str:
    text = (stderr or "").strip() or (stdout or "").strip()
    return text.splitlines()[-1] if text else f"exit status {rc}"


def restart(run: Runner, method: str, service: str, restart_command: str) -> str | None:
    """Restart one service; the reason when it failed, else None."""
    command: object = (["systemctl", "restart", "--", service] if method == "systemd"
                       else for_service(restart_command, service))
    rc, stdout, stderr = run(command)
    return None if rc == 0 else _failure_text(rc, stdout, stderr)


def read_states(run: Runner, method: str, services: list[str], status_command: str) -> list[ServiceState]:
    """Every service's state, in one ``systemctl show`` or one status command per service."""
    if not services:
        return []
    if method == "systemd":
        rc, stdout, stderr = run(["systemctl", "show", "--timestamp=unix", f"--property={SYSTEMCTL_PROPERTIES}",
                                  "--", *services])
        if rc != 0:
            detail = f"systemctl show failed: {_failure_text(rc, stdout, stderr)}"
            return [ServiceState(service, UNKNOWN, detail=detail) for service in services]
        units = {unit.get("Id", ""): unit for unit in parse_systemctl_show(stdout)}
        return [systemd_state(service, units.get(service) or units.get(f"{service}.service") or {})
                for service in services]
    if not status_command.strip():
        return [ServiceState(service, UNKNOWN, detail="no enqueue_shards_status_command") for service in services]
    return [status_command_state(service, *run(for_service(status_command, service))) for service in services]


def operate(run: Runner, services: list[str], to_restart: list[str], *, method: str, restart_command: str = "",
            status_command: str = "", check_mode: bool = False, manager: str | None = None,
            clock: Callable[[], float] = time.time, hostname: str = "") -> HostServices:
    """Restart ``to_restart`` (one after the other; none in check mode), then read every service and the clock.

    A restart that fails does not stop the others: each service reports its
    own outcome. Configuration problems (no systemd where it is asked for, no
    restart command where one is needed) restart nothing and are reported.
    """
    manager = manager or service_manager()
    via = restart_via(method, manager)
    found = HostServices(manager, via, hostname=hostname,
                         problems=configuration_problems(method, manager, restart_command, bool(to_restart)))
    outcomes: dict[str, str | None] = {}
    if not found.problems and not check_mode:
        outcomes = {service: restart(run, via, service, restart_command) for service in to_restart}
    states = read_states(run, via, services, status_command)
    found.services = [ServiceState(**{**asdict(state), "restarted": service_restarted(state.service, outcomes),
                                      "restart_error": outcomes.get(state.service)})
                      for state in states]
    found.clock = clock()
    return found


def service_restarted(service: str, outcomes: dict[str, str | None]) -> bool:
    return service in outcomes and outcomes[service] is None
