# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the producer services of one host are, as the role enqueue_shards learns it from awa_producer_services.

A host's state is what the module read on the host (each service's state,
main pid and start, the host's clock, whether the environment file it wrote
in the same run changed), and what each service's processes report as a
runtime's pid and host name. A host the module could not reach, or whose run failed
without a read, is reported as unreachable, with every service unread.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.producer.services import MISSING, UNREACHABLE

# The keys of a service in a host report (the module's own, plus its host).
SERVICE_KEYS = ("service", "state", "started_at", "main_pid", "detail", "problem", "reports_as")

# What to fix when a service's state cannot be read as configured, by whether the host does not have the service
# (MISSING) and by how the host restarts and reads it: systemd, or the restart contract's commands.
FIXES = {
    (True, "systemd"): "correct enqueue_shards_services for this host, or install the unit there",
    (True, "command"): "correct enqueue_shards_services for this host, or set the service up there",
    (False, "systemd"): "check systemd on this host (systemctl show SERVICE, as the user the play becomes there)",
    (False, "command"): "correct enqueue_shards_status_command for this host, or install what it runs there",
}


def read_error(result: dict[str, Any] | None) -> str | None:
    """Why a run of awa_producer_services gave no read of the host (unreachable, or failed before reading)."""
    if not result:
        # No result at all: the task did not run (--skip-tags, or --start-at-task past it).
        return ("its services were not read after the change (the task that writes the environment file and reads "
                "them, tag enqueue_shards_producer_config, was skipped: run it)")
    if result.get("unreachable"):
        return str(result.get("msg") or "unreachable").strip()
    if result.get("skipped") or "services" not in result:
        if result.get("failed") or result.get("msg"):
            return str(result.get("msg") or "the read failed").strip()
        return "not read"
    return None


def failed_before_reading(result: dict[str, Any] | None) -> bool:
    """The host answered, but the module failed there before it read its services (no Python, an environment file
    it could not write): not unreachable."""
    return bool(result and not result.get("unreachable") and "services" not in result and result.get("failed"))


def _declared(settings: dict[str, Any], service: str) -> dict[str, Any]:
    """What the host's variables declare of a service: the queues it enqueues into (enqueue_shards_service_queues;
    None: every queue) and how many Awa runtimes it runs (0: it only enqueues)."""
    queues = (settings.get("service_queues") or {}).get(service)
    return {"queues": None if queues is None else list(queues),
            "runtimes": int((settings.get("service_runtimes") or {}).get(service, 1))}


def unreachable_state(settings: dict[str, Any], error: str, *, answered: bool = False) -> dict[str, Any]:
    """A host that could not be read: every one of its services is unreachable, with the error. ``answered``: the
    host answered but the run failed before reading its services (the environment file could not be written)."""
    return {"host": settings["host"], "method": None, "clock": None, "environment_changed": False,
            "reachable": False, "answered": answered,
            "services": [{"host": settings["host"], "service": service, "state": UNREACHABLE, "started_at": None,
                          "main_pid": None, "detail": error, "reports_as": [], **_declared(settings, service)}
                         for service in settings["services"]]}


def host_state(settings: dict[str, Any], result: dict[str, Any] | None) -> dict[str, Any]:
    """One host's state from its settings (validation) and its awa_producer_services result."""
    error = read_error(result)
    if error is not None or result is None:
        return unreachable_state(settings, error or "not read", answered=failed_before_reading(result))
    return {"host": settings["host"], "method": result["method"], "clock": result["clock"],
            "environment_changed": bool((result.get("env_file") or {}).get("changed")), "reachable": True,
            "hostname": settings.get("runtime_hostname") or None,
            "services": [{"host": settings["host"], **{key: service.get(key) for key in SERVICE_KEYS},
                          **_declared(settings, service["service"])} for service in result["services"]]}


def service_problem(host: str, service: dict[str, Any], method: str | None) -> str | None:
    """Why a service of ``host`` cannot be restarted as configured - its state cannot be read (the module's
    ``problem``) - with what to fix; None when it can. ``method`` is how the host restarts (systemd, command)."""
    fix = FIXES[(service["state"] == MISSING, method or "command")]
    return f"{host}/{service['service']}: {service['problem']}; {fix}" if service.get("problem") else None
