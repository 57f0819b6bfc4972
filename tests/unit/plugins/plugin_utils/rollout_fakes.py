# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the role's filters read, built by hand: systemd's words for a unit, host reports, runtime rows.

Shapes follow the real sources: ``systemctl show --timestamp=unix`` output,
the host report the role builds from it (rollout_services.host_services), and
a runtime of the info module's ``runtimes`` (see fixtures/ for recorded ones).
"""

from __future__ import annotations

import datetime

from ansible_collections.awa.operations.plugins.plugin_utils.rollout_services import host_services


def unit(name: str, state: str = "active", sub: str = "running", started: float | None = None, pid: int = 100,
         load_state: str = "loaded", result: str = "success") -> str:
    lines = [f"Id={name}.service", f"LoadState={load_state}", f"ActiveState={state}", f"SubState={sub}",
             f"Result={result}", f"MainPID={pid}", f"ActiveEnterTimestamp={'' if started is None else '@%d' % started}"]
    return "\n".join(lines) + "\n"


def systemd_host(host: str, units: dict[str, str], clock: float | None = None, environment_changed: bool = False,
                 reachable: bool = True) -> dict:
    """A host report as the role builds it from a registered `systemctl show` and the host's epoch fact."""
    return host_services(list(units), host, "systemd", {"stdout": "\n".join(units.values())}, None,
                         None if clock is None else str(int(clock)), environment_changed, reachable=reachable)


def iso(unix: float) -> str:
    return datetime.datetime.fromtimestamp(unix, tz=datetime.timezone.utc).isoformat()


def runtime(pid: int, started: float, *, live: bool = True, converged: bool = True, healthy: bool = True,
            hostname: str | None = None, instance: str | None = None, pending: list[str] | None = None) -> dict:
    """One runtime of the info module's ``runtimes``."""
    return {"instance_id": instance or f"instance-{pid}-{int(started)}", "hostname": hostname, "pid": pid,
            "started_at": iso(started), "live": live, "healthy": healthy, "converged": converged,
            "pending_queues": pending if pending is not None else ([] if converged else ["demo"])}
