# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the producer services of one host are, as the role enqueue_shards reads them on that host.

systemd reports each unit's state, main pid and when it entered it
(``systemctl show``); hosts without systemd answer through the restart
contract's status command, which prints the start of the service's process
as unix seconds and, optionally, the pid of the process that runs its Awa
runtime. A host the read could not reach is reported as such, with every
service unread.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

RUNNING, FAILED, STOPPED, STARTING, MISSING, UNKNOWN, UNREACHABLE = (
    "running", "failed", "stopped", "starting", "missing", "unknown", "unreachable")


@dataclass(frozen=True)
class ServiceState:
    """One producer service on one host, as its service manager (or status command) reports it."""

    host: str
    service: str
    state: str
    started_at: float | None = None  # unix time on the host's clock
    main_pid: int | None = None
    detail: str = ""


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
    units, current = [], {}
    for line in output.splitlines() + [""]:
        if not line.strip():
            if current:
                units.append(current)
                current = {}
            continue
        key, dummy, value = line.partition("=")
        current[key] = value
    return units


def systemd_state(host: str, service: str, properties: dict[str, str]) -> ServiceState:
    if not properties:
        return ServiceState(host, service, UNKNOWN, detail="systemctl show did not report it")
    active, sub = properties.get("ActiveState", ""), properties.get("SubState", "")
    pid = int(properties.get("MainPID") or 0) or None
    detail = f"{active}/{sub}" + (f", result {properties['Result']}" if properties.get("Result") not in (None, "", "success") else "")
    if properties.get("LoadState") == "not-found":
        return ServiceState(host, service, MISSING, detail="systemd does not know this unit (LoadState=not-found)")
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
    return ServiceState(host, service, state, _unix_time(properties.get("ActiveEnterTimestamp", "")), pid, detail)


def status_command_state(host: str, service: str, result: dict) -> ServiceState:
    """The restart contract's status command: exit 0 and ``START [PID]`` on stdout (START in unix seconds)."""
    if result.get("skipped") or "rc" not in result:
        return ServiceState(host, service, UNKNOWN, detail="no enqueue_shards_status_command")
    if result["rc"] != 0:
        error = (result.get("stderr") or result.get("stdout") or "").strip().splitlines()
        return ServiceState(host, service, UNKNOWN,
                            detail=f"status command exited {result['rc']}" + (f": {error[-1]}" if error else ""))
    words = (result.get("stdout") or "").split()
    started = _unix_time(words[0]) if len(words) in (1, 2) else None
    pid = int(words[1]) if started is not None and len(words) == 2 and words[1].isdigit() else None
    if started is None or (len(words) == 2 and pid is None):
        return ServiceState(host, service, UNKNOWN, detail=f"status command printed {result.get('stdout', '')!r}, "
                                                           "not unix seconds (and optionally a pid)")
    return ServiceState(host, service, RUNNING, started, pid)


def _unreachable(result: dict | None) -> str | None:
    """The connection error of a read that could not reach its host, else None."""
    for candidate in [result or {}, *((result or {}).get("results") or [])]:
        if isinstance(candidate, dict) and candidate.get("unreachable"):
            return str(candidate.get("msg") or "unreachable").strip()
    return None


def host_services(services: list[str], host: str, method: str, systemctl_show: dict | str | None = None,
                  status_results: dict | list[dict] | None = None, clock: object = None,
                  environment_changed: bool = False, names: list[str] | None = None, reachable: bool = True,
                  unreachable_message: str | None = None) -> dict:
    """One host's report: its services' states, its clock, its names, and whether its environment file changed.

    ``systemctl_show`` is the registered ``systemctl show`` result (or its
    stdout), ``status_results`` the registered status-command loop (or its
    ``results``). ``names`` are the names a runtime of this host may report as
    its host name (the inventory name, its short form, ``ansible_host``). A
    host known to be out of reach (``reachable`` false), or whose read could
    not reach it, reports every service as unreachable.
    """
    read = systemctl_show if method == "systemd" else status_results
    error = _unreachable(read) if isinstance(read, dict) else None
    if not reachable:
        error = unreachable_message or "unreachable earlier in this run"
    if error is not None:
        states = [ServiceState(host, service, UNREACHABLE, detail=error) for service in services]
    elif method == "systemd":
        output = systemctl_show.get("stdout", "") if isinstance(systemctl_show, dict) else systemctl_show or ""
        units = {unit.get("Id", ""): unit for unit in parse_systemctl_show(output)}
        states = [systemd_state(host, service, units.get(service) or units.get(f"{service}.service") or {})
                  for service in services]
    else:
        results = status_results.get("results", []) if isinstance(status_results, dict) else status_results or []
        by_service = {result.get("item"): result for result in results}
        states = [status_command_state(host, service, by_service.get(service, {})) for service in services]
    return {"host": host, "method": method, "clock": float(clock) if clock not in (None, "") else None,
            "environment_changed": bool(environment_changed), "reachable": error is None,
            "names": sorted({host, host.split(".")[0], *(name for name in names or [] if name)}),
            "services": [asdict(state) for state in states]}
