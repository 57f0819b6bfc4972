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

Before a restart (and in its check mode) the programs of the restart and
status commands are looked up as they would run; a program that is not there
restarts nothing. The status command exits as an init script's status action
does (and ``supervisorctl status`` and ``systemctl status``): 0 running, 3
not running, 4 no such service. A service that does not exist - the status
command exits 4, or systemd does not know the unit - is ``missing``, with a
``problem``; so is one whose state cannot be read as configured (the status
command cannot run, exit 126 or 127, or prints something else than its
contract). Another non-zero exit (3: stopped, failed) only leaves its state
unknown: a restart can start it.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.producer import commands, identities

RUNNING, FAILED, STOPPED, STARTING, MISSING, UNKNOWN, UNREACHABLE = (
    "running", "failed", "stopped", "starting", "missing", "unknown", "unreachable")

METHODS = ("auto", "systemd", "command")
SYSTEMCTL_PROPERTIES = "Id,LoadState,ActiveState,SubState,Result,MainPID,ActiveEnterTimestamp,ControlGroup"
# A unit's state by its ActiveState (a unit that waits to be started again, SubState auto-restart, has failed).
SYSTEMD_STATES = {"active": RUNNING, "failed": FAILED, "activating": STARTING, "reloading": STARTING,
                  "inactive": STOPPED}
# systemctl before systemd 248 (Debian 11's 247, Ubuntu 20.04's 245, RHEL 8's 239) has no --timestamp=unix and says
# so; there a unit's start is read on the monotonic clock (microseconds since boot) and put on the host's clock.
NO_UNIX_TIMESTAMPS = "Invalid value: unix"
MONOTONIC_START = "ActiveEnterTimestampMonotonic"
STATUS_CONTRACT = ("exit 0 and print START or START PID (the start in unix seconds, then optionally the pid), then "
                   "optionally a line HOSTNAME or HOSTNAME PID for each runtime that runs elsewhere (a replica)")
# After a restart, what the services' processes report is read again until it holds still: this far apart, this
# many times at most (a container's process chain execs within a second).
SETTLE_SECONDS, SETTLE_READS = 0.5, 10
# The status command's exit statuses that say something, as the LSB status action (supervisorctl status, systemctl
# status) gives them: 3 the service does not run, 4 there is no such service (LSB: its status is unknown).
NOT_RUNNING, NO_SUCH_SERVICE = 3, 4


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
    # Why its state cannot be read as configured (the status command cannot run, or breaks its contract).
    problem: str | None = None
    # What its processes report to Awa as a runtime's pid and host name (producer/identities.py).
    reports_as: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class HostServices:
    """What one run found on the host: how it restarts, its services, its clock."""

    service_manager: str
    method: str
    services: list[ServiceState] = field(default_factory=list)
    clock: float = 0.0
    hostname: str = ""
    problems: list[str] = field(default_factory=list)
    # The programs looked up before a restart: {"command": restart | status, "program": ..., "path": ...}.
    programs: list[dict[str, str]] = field(default_factory=list)

    def result(self) -> dict[str, Any]:
        """The module's result (RETURN): ``restart_failures``, since ``failed`` is Ansible's own key."""
        failures = [{"service": state.service, "message": state.restart_error}
                    for state in self.services if state.restart_error is not None]
        return {**asdict(self), "restarted": [state.service for state in self.services if state.restarted],
                "restart_failures": failures}

    def restart_failure(self, asked: list[str], check_mode: bool) -> str | None:
        """Why a run asked to restart ``asked`` fails, if it does: a problem restarted nothing; a restart failed; or
        a service's state cannot be read as configured, so no restart of it can be followed."""
        if not asked:
            return None
        if self.problems:
            return "Nothing was restarted: " + "; ".join(self.problems)
        failed = [f"{state.service}: {state.restart_error}" for state in self.services if state.restart_error]
        unreadable = [f"{state.service}: {state.problem}" for state in self.services if state.problem]
        parts = [f"The restart of {len(failed)} of {len(asked)} service(s) failed: {'; '.join(failed)}"] if failed else []
        if unreadable:
            after = "in check mode, nothing was restarted" if check_mode else "after the restarts"
            parts.append(f"How {len(unreadable)} of {len(self.services)} service(s) run cannot be read ({after}): "
                         + "; ".join(unreadable))
        return ". ".join(parts) or None


def service_manager(root: str = "/") -> str:
    """``systemd`` when systemd runs this host (as sd_booted() tells), else the name of process 1."""
    if os.path.isdir(os.path.join(root, "run/systemd/system")):
        return "systemd"
    return (identities.read(os.path.join(root, "proc/1/comm")) or b"").decode("utf-8", "replace").strip() or "unknown"


def restart_via(method: str, manager: str | None) -> str:
    """systemd or command: how a host whose service manager is ``manager`` restarts its services."""
    return "systemd" if method == "systemd" or (method == "auto" and manager == "systemd") else "command"


def configuration_problems(method: str, manager: str, restart_command: str, restarts: bool) -> list[str]:
    """Why this host cannot restart its services as configured (nothing when it can, or restarts nothing)."""
    if restarts and method == "systemd" and manager != "systemd":
        return [f"enqueue_shards_restart_method is systemd but this host runs {manager}: use "
                "enqueue_shards_restart_method: command with enqueue_shards_restart_command"]
    if restarts and restart_via(method, manager) == "command" and not restart_command.strip():
        return [f"this host does not run systemd (service manager: {manager}) and enqueue_shards_restart_command "
                'is empty: give the command that restarts one service, e.g. "supervisorctl restart {service}"']
    return []


def _unix_time(text: str) -> float | None:
    """systemd's --timestamp=unix value (``@1764520916``) or plain seconds; None when unset."""
    try:
        value = float(text.strip().lstrip("@"))
    except ValueError:
        return None
    return value if value > 0 else None


def parse_systemctl_show(output: str) -> list[dict[str, str]]:
    """``systemctl show`` of several units: one property dict per unit (blocks separated by blank lines)."""
    return [dict(line.partition("=")[::2] for line in block)
            for filled, block in itertools.groupby(output.splitlines(), key=lambda line: bool(line.strip())) if filled]


def systemd_state(service: str, properties: dict[str, str], boot: float | None = None) -> ServiceState:
    """A unit's state from its properties; with ``boot`` (the host's clock when the monotonic one read 0), its start
    is read on the monotonic clock (MONOTONIC_START) and put on the host's clock."""
    if not properties:
        return ServiceState(service, UNKNOWN, detail="systemctl show did not report it")
    if properties.get("LoadState") == "not-found":
        missing = "systemd does not know this unit (LoadState=not-found)"
        return ServiceState(service, MISSING, detail=missing, problem=missing)
    active, sub, result = properties.get("ActiveState", ""), properties.get("SubState", ""), properties.get("Result")
    detail = f"{active}/{sub}" + (f", result {result}" if result not in (None, "", "success") else "")
    state = FAILED if sub == "auto-restart" and active != "active" else SYSTEMD_STATES.get(active, UNKNOWN)
    entered = int(properties.get(MONOTONIC_START) or 0)
    started = (_unix_time(properties.get("ActiveEnterTimestamp", "")) if boot is None
               else round(boot + entered / 1e6, 6) if entered else None)
    return ServiceState(service, state, started, int(properties.get("MainPID") or 0) or None, detail)


def status_command_state(run: commands.Runner, service: str, status_command: str) -> ServiceState:
    """The restart contract's status command, run for ``service``: exit 0 and ``START [PID]`` on stdout (START in
    unix seconds).

    Messages name the command as it runs, ``{service}`` replaced. Exit 4 says
    the service does not exist (``missing``). Exiting 126 or 127 (it, or a
    program it runs, cannot run), or 0 with other output, is a problem; another
    non-zero exit (3: not running) is not - the service is restarted like any
    whose start is unknown. Each line after the first names a replica:
    ``HOSTNAME [PID]``.
    """
    command = commands.for_service(status_command, service)
    try:
        rc, stdout, stderr = commands.run_argv(run, commands.argv(command))
    except ValueError as error:  # argv's: it cannot be split
        return ServiceState(service, UNKNOWN, detail=f"status command cannot be split: {error}",
                            problem=f"the status command {command} cannot be split into words: {error}")
    said = commands.outcome_text(rc, stdout, stderr)
    if rc == NO_SUCH_SERVICE:
        return ServiceState(service, MISSING, detail=f"no such service (status command {said})",
                            problem=f"the status command {command} says there is no such service ({said})")
    if rc != 0:
        output = (stderr or stdout or "").strip().splitlines()
        detail = (("not running, " if rc == NOT_RUNNING else "") + f"status command exited {rc}"
                  + (f": {output[-1].strip()}" if output else ""))
        problem = (f"the status command {command} cannot run here ({said})"
                   if rc in (commands.CANNOT_EXECUTE, commands.NOT_FOUND) else None)
        return ServiceState(service, UNKNOWN, detail=detail, problem=problem)
    lines = [line.split() for line in stdout.splitlines() if line.strip()] or [[]]
    started = _unix_time(lines[0][0]) if lines[0] else None
    if started is None or not all(len(line) == 1 or (len(line) == 2 and line[1].isdigit()) for line in lines):
        text = stdout.strip()
        # What it printed, quoted and cut after 200 characters.
        printed = repr(text if len(text) <= 200 else text[:200] + "...") if text else "nothing"
        return ServiceState(service, UNKNOWN, detail=f"status command printed {printed}, not unix seconds "
                                                     "(and optionally a pid)",
                            problem=f"the status command {command} printed {printed}, not its contract: it must "
                                    f"{STATUS_CONTRACT}")
    return ServiceState(service, RUNNING, started, int(lines[0][1]) if len(lines[0]) == 2 else None, reports_as=[
        {"hostname": line[0], "pid": int(line[1]) if len(line) == 2 else None} for line in lines[1:]])


def read_states(run: commands.Runner, method: str, services: list[str], status_command: str,
                clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                root: str = "/") -> list[ServiceState]:
    """Every service's state, in one ``systemctl show`` or one status command per service, with what the processes
    of each that runs report as a runtime's identity (a unit's control group, or the main pid and its
    descendants; then the replicas a status command printed)."""
    # No unit: systemctl show would print its own properties.
    if method == "systemd" and services:
        show = ["systemctl", "show", "--timestamp=unix", f"--property={SYSTEMCTL_PROPERTIES}", "--", *services]
        rc, stdout, stderr = commands.run_argv(run, show)
        boot = None
        if rc != 0 and NO_UNIX_TIMESTAMPS in stderr:
            show[2:4] = [f"--property={SYSTEMCTL_PROPERTIES},{MONOTONIC_START}"]
            rc, stdout, stderr = commands.run_argv(run, show)
            boot = clock() - monotonic()
        if rc != 0:
            detail = f"systemctl show failed: {commands.outcome_text(rc, stdout, stderr)}"
            return [ServiceState(service, UNKNOWN, detail=detail, problem=detail) for service in services]
        units = {unit.get("Id", ""): unit for unit in parse_systemctl_show(stdout)}
        read = [(systemd_state(service, unit, boot), unit.get("ControlGroup", "")) for service in services
                for unit in [units.get(service) or units.get(f"{service}.service") or {}]]
    elif status_command.strip():
        read = [(status_command_state(run, service, status_command), "") for service in services]
    else:
        return [ServiceState(service, UNKNOWN, detail="no status command") for service in services]
    below = identities.children(root) if any(state.main_pid and not cgroup for state, cgroup in read) else {}
    return [replace(state, reports_as=identities.reports_as(state.main_pid, cgroup, below, root) + state.reports_as)
            if state.state == RUNNING else state for state, cgroup in read]


def program_checks(what: str, command: str, services: list[str], path: str | None,
                   user: str | None) -> tuple[list[str], list[dict[str, str]]]:
    """Whether the program of ``command`` (the ``what`` command: restart or status) can run for each service, as
    run_command would run it (``path`` and ``user``: commands.locate's): the problems (each once), and the programs
    found (each once)."""
    problems: list[str] = []
    found: dict[str, dict[str, str]] = {}
    for service in services:
        try:
            program = commands.argv(commands.for_service(command, service))[0]
        except ValueError as error:
            problems.append(f"the {what} command {command} cannot be split into words: {error}")
            continue
        located, problem = commands.locate(program, path, user)
        if located is None:
            problems.append(f"the {what} command {command} cannot run here: {problem}")
        else:
            found.setdefault(located, {"command": what, "program": commands.expanded(program), "path": located})
    return list(dict.fromkeys(problems)), list(found.values())


def operate(run: commands.Runner, services: list[str], to_restart: list[str], *, method: str,
            restart_command: str = "", status_command: str = "", check_mode: bool = False, manager: str | None = None,
            clock: Callable[[], float] = time.time, hostname: str = "", path: str | None = None,
            user: str | None = None, root: str = "/", sleep: Callable[[float], None] = time.sleep) -> HostServices:
    """Restart ``to_restart`` (one after the other; none in check mode), then read every service and the clock.

    A restart that fails does not stop the others: each service reports its
    own outcome. Configuration problems (no systemd where it is asked for, no
    restart command where one is needed) and programs that cannot run (looked
    up on ``path``, the module's PATH, for ``user``) restart nothing and are
    reported - in check mode too, which proves that the real run can restart.
    """
    manager = manager or service_manager()
    via = restart_via(method, manager)
    found = HostServices(manager, via, hostname=hostname,
                         problems=configuration_problems(method, manager, restart_command, bool(to_restart)))
    status_problems: list[str] = []
    if to_restart and via == "command" and not found.problems:
        found.problems, found.programs = program_checks("restart", restart_command, to_restart, path, user)
        if status_command.strip():
            status_problems, status_programs = program_checks("status", status_command, services, path, user)
            found.problems += status_problems
            found.programs += status_programs
    # Each restart's outcome: None, or its exit status and last lines of error output when it failed.
    outcomes: dict[str, str | None] = {}
    for service in [] if found.problems or check_mode else to_restart:
        words = (["systemctl", "restart", "--", service] if via == "systemd"
                 else commands.argv(commands.for_service(restart_command, service)))
        rc, stdout, stderr = commands.run_argv(run, words)
        outcomes[service] = None if rc == 0 else commands.outcome_text(rc, stdout, stderr)
    # A status command whose program cannot run (a problem of the host, above) is not run for every service only to
    # say so again.
    no_systemd = via == "systemd" and manager != "systemd"
    unread = (f"this host does not run systemd (service manager: {manager})" if no_systemd
              else "the status command cannot run here" if status_problems else None)
    states = ([ServiceState(service, UNKNOWN, detail=unread) for service in services] if unread
              else read_states(run, via, services, status_command, clock, root=root))
    # A restarted service's processes are still starting when its restart returns (a shell that runs a container
    # that runs a program, each executing the next with an environment of its own): read again until two reads,
    # SETTLE_SECONDS apart, agree on what they report (there is no restart where the services are not read).
    for dummy in range(SETTLE_READS if None in outcomes.values() else 0):
        sleep(SETTLE_SECONDS)
        before, states = states, read_states(run, via, services, status_command, clock, root=root)
        if [state.reports_as for state in states] == [state.reports_as for state in before]:
            break
    found.services = [replace(state, restarted=state.service in outcomes and outcomes[state.service] is None,
                              restart_error=outcomes.get(state.service)) for state in states]
    found.clock = clock()
    return found
