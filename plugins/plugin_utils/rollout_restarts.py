# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which producer services the role enqueue_shards restarts, in which batches, and whether a batch came back.

Awa 0.6 runtimes read a queue's shard count when they start and keep it, and
0.6.9 runtimes publish no host name, so a runtime cannot be tied to a service
by its pid alone. The rule used instead: a service whose current process
started after the change committed already runs the new count. The service's
start comes from its host's clock (systemd's ActiveEnterTimestamp, or the
restart contract's status command), the commit from the database's clock
(the change ledger); both are related through one pair of readings, the
database's clock read before the host's, which bounds the skew from the safe
side: a service is only left alone when it certainly started after the change.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass

from ansible_collections.awa.operations.plugins.module_utils.shards_info_result import ShardsInfo

# systemd timestamps and Ansible's epoch fact are whole seconds.
CLOCK_RESOLUTION = 1.0

RUNNING, FAILED, STOPPED, STARTING, MISSING, UNKNOWN = "running", "failed", "stopped", "starting", "missing", "unknown"


@dataclass(frozen=True)
class ServiceState:
    """One producer service on one host, as its service manager (or status command) reports it."""

    host: str
    service: str
    state: str
    started_at: float | None = None  # unix time on the host's clock
    main_pid: int | None = None
    detail: str = ""

    @property
    def name(self) -> str:
        return f"{self.host}/{self.service}"


def _unix_time(text: str) -> float | None:
    """systemd's --timestamp=unix value (``@1764520916``); None when unset."""
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
    """The restart contract's status command: exit 0 and the process start as unix seconds on stdout."""
    if result.get("skipped") or "rc" not in result:
        return ServiceState(host, service, UNKNOWN, detail="no enqueue_shards_status_command")
    if result["rc"] != 0:
        error = (result.get("stderr") or result.get("stdout") or "").strip().splitlines()
        return ServiceState(host, service, UNKNOWN,
                            detail=f"status command exited {result['rc']}" + (f": {error[-1]}" if error else ""))
    started = _unix_time(result.get("stdout", ""))
    if started is None:
        return ServiceState(host, service, UNKNOWN,
                            detail=f"status command printed {result.get('stdout', '')!r}, not unix seconds")
    return ServiceState(host, service, RUNNING, started)


def host_services(services: list[str], host: str, method: str, systemctl_show: str = "",
                  status_results: list[dict] | None = None, clock: object = None,
                  environment_changed: bool = False) -> dict:
    """One host's report for the restart plan: its services' states, its clock, and its environment file."""
    if method == "systemd":
        units = {unit.get("Id", ""): unit for unit in parse_systemctl_show(systemctl_show)}
        states = [systemd_state(host, service, units.get(service) or units.get(f"{service}.service") or {})
                  for service in services]
    else:
        by_service = {result.get("item"): result for result in status_results or []}
        states = [status_command_state(host, service, by_service.get(service, {})) for service in services]
    return {"host": host, "method": method, "clock": float(clock) if clock not in (None, "") else None,
            "environment_changed": bool(environment_changed),
            "services": [state.__dict__ for state in states]}


def _db_time(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


def pickup_deadlines(read: ShardsInfo, change: dict | None, check_mode: bool) -> dict[str, float]:
    """Queue -> the database time a service must have started after to run its count.

    Only queues some live runtime does not yet run the count of (or, in check
    mode, whose count would switch) need one; ``inf`` means every service.
    """
    deadlines = {}
    for name, view in read.get("queues", {}).items():
        result = (change or {}).get("queues", {}).get(name, {})
        would_switch = check_mode and any(previous != result.get("shards")
                                          for previous in result.get("previous_shards", {}).values())
        if would_switch:
            deadlines[name] = math.inf
        elif not view["converged"]:
            changes = [_db_time(entry["changed_at"]) for entry in view["last_change"].values()]
            deadlines[name] = max(changes) if changes else math.inf
    return deadlines


def started_after(service: dict, clock: float | None, read_at: float, deadline: float) -> bool:
    """Whether the service's current process certainly started after ``deadline`` (database clock).

    The host's clock was read after the database's (``read_at``), so
    host - read_at bounds the skew from above; the bound errs towards a restart.
    """
    if service["started_at"] is None or clock is None or math.isinf(deadline):
        return False
    skew_bound = clock + CLOCK_RESOLUTION - read_at
    return service["started_at"] - skew_bound > deadline


def _reasons_to_restart(service: dict, host: dict, deadlines: dict[str, float], read_at: float) -> list[str]:
    """Why this service must restart (nothing when it runs the count and its environment is unchanged)."""
    if service["state"] == STOPPED:
        return []
    reasons = ["its environment file changed"] if host["environment_changed"] else []
    if not deadlines:
        return reasons
    if service["state"] == FAILED:
        return reasons + [f"it is not running ({service['detail']})"]
    if service["state"] in (UNKNOWN, STARTING):
        return reasons + [f"its start time is unknown ({service['detail']})"]
    late = [queue for queue, deadline in deadlines.items()
            if not started_after(service, host["clock"], read_at, deadline)]
    if late:
        reasons.append(f"it started before the change of {', '.join(sorted(late))}")
    return reasons


def interleave(members: list[list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """[host1 services, host2 services, ...] -> host1/a, host2/a, host1/b, ...: batches span hosts."""
    order = []
    for position in range(max((len(host) for host in members), default=0)):
        order += [host[position] for host in members if position < len(host)]
    return order


def _stragglers(read: ShardsInfo, deadlines: dict[str, float]) -> dict[str, dict]:
    return {straggler["instance_id"]: straggler for name in deadlines
            for straggler in read["queues"][name]["stragglers"]}


def restart_plan(hosts: list[dict], read: dict, change: dict | None, batch_size: int, runtimes_per_service: int,
                 check_mode: bool) -> dict:
    """The services to restart and why, in batches that span hosts, plus problems that stop the rollout first."""
    deadlines = pickup_deadlines(read, change, check_mode)
    read_at = _db_time(read["read_at"])
    problems, lines, members = [], [], []
    for host in hosts:
        chosen = []
        for service in host["services"]:
            name = f"{service['host']}/{service['service']}"
            if service["state"] == MISSING:
                problems.append(f"{name}: {service['detail']}; correct enqueue_shards_services for this host")
                continue
            reasons = _reasons_to_restart(service, host, deadlines, read_at)
            if reasons:
                chosen.append((service["host"], service["service"]))
                lines.append(f"{name}: restart - {'; '.join(reasons)}")
            elif service["state"] == STOPPED:
                lines.append(f"{name}: left alone - it is stopped ({service['detail']}) and starts with the "
                             "current count whenever it is started")
            elif deadlines:
                lines.append(f"{name}: left alone - it started after the change, so it runs the count")
        members.append(chosen)
    order = interleave(members)
    batches = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
    stragglers = _stragglers(read, deadlines) if not check_mode else {}
    outside = len(stragglers) - len(order) * runtimes_per_service
    if stragglers and outside > 0:
        listed = ", ".join(f"pid {s['pid']} (instance {s['instance_id']}, up {s['seconds_since_start']:.0f}s)"
                           for s in list(stragglers.values())[:5])
        lines.append(f"{len(stragglers)} live runtime(s) run an older count but only {len(order)} service(s) of "
                     f"the inventory are restarted: at least {outside} runtime(s) run outside the inventory. "
                     f"On an older count: {listed}. Restart those outside yourselves, or add their hosts to "
                     "awa_producers; the wait names them until they run the count.")
    return {"batches": [[list(member) for member in batch] for batch in batches], "lines": lines,
            "problems": problems, "restarts": len(order), "headline": _headline(batches, batch_size, check_mode)}


def _headline(batches: list[list[tuple[str, str]]], batch_size: int, check_mode: bool) -> str:
    if not batches:
        return "No producer service to restart."
    listed = " then ".join("[" + ", ".join(f"{host}/{service}" for host, service in batch) + "]" for batch in batches)
    count = sum(len(batch) for batch in batches)
    verb = "Check mode: would restart" if check_mode else "Restarting"
    return (f"{verb} {count} producer service(s) in {len(batches)} batch(es) of at most {batch_size}: {listed}"
            + (". Nothing is restarted in check mode." if check_mode else ""))


# What ansible.builtin.command says on any non-zero exit (2.19 and 2.20, then 2.21): it adds nothing to stderr.
_COMMAND_BOILERPLATE = frozenset({"non-zero return code", "The command exited with a non-zero return code."})


def _failure_text(result: dict) -> str:
    parts = [str(result.get(key) or "").strip() for key in ("msg", "stderr")]
    text = " ".join(part for part in parts if part and part not in _COMMAND_BOILERPLATE)
    return text or f"exit status {result.get('rc')}"


def restart_outcome(results: list[dict], services: list[str], host: str) -> dict:
    """``host``'s restarts of ``services`` in a batch, from the registered results of the restart tasks."""
    restarted, failed = [], []
    for result in results:
        for item in result.get("results", []):
            if item.get("skipped"):
                continue
            if item.get("failed"):
                failed.append({"service": item["item"], "message": _failure_text(item)})
            else:
                restarted.append(item["item"])
        if result.get("failed") and not failed:
            # The task failed as a whole (not one of its items): no service of it counts as restarted.
            failed += [{"service": service, "message": _failure_text(result)}
                       for service in services if service not in restarted]
    return {"host": host, "restarted": restarted, "failed": failed}


def _service_problem(name: str, failure: str | None, state: dict | None, new_pids: set | None) -> str | None:
    """Why one service of a batch did not come back, if its own evidence says so."""
    if failure is not None:
        return f"{name} did not come back: the restart failed: {failure}"
    if state is not None and state["state"] not in (RUNNING, UNKNOWN):
        return f"{name} did not come back: it is {state['state']} ({state['detail']}) after its restart"
    if state is not None and state["main_pid"] and new_pids is not None and state["main_pid"] not in new_pids:
        return f"{name} runs as pid {state['main_pid']}, but no new live and healthy Awa runtime has that pid"
    return None


def batch_verdict(batch: list[list[str]], index: int, count: int, outcomes: list[dict], states: list[dict],
                  wait: ShardsInfo | dict | None, runtimes_per_service: int) -> dict:
    """Did every service of the batch come back? ``message`` stops the rollout when not.

    ``outcomes`` and ``states`` hold one entry per play host (``restart_outcome``
    and ``host_services`` after the restart), ``wait`` the info module's
    ``wait: restarted`` result (a failed task's result has ``msg`` and no ``new_runtimes``; None when no
    restart succeeded).
    """
    failures = {(host["host"], failure["service"]): failure["message"]
                for host in outcomes for failure in host["failed"]}
    state_of = {(service["host"], service["service"]): service for host in states for service in host["services"]}
    expected = sum(len(host["restarted"]) for host in outcomes) * runtimes_per_service
    new_runtimes = None if wait is None else wait.get("new_runtimes")
    healthy = len(new_runtimes or [])
    wait_failed = wait is not None and (new_runtimes is None or healthy < expected)
    # Pids tie runtimes to services only as a hint (hosts may share pid numbers): used once the wait failed.
    new_pids = {runtime["pid"] for runtime in new_runtimes} if wait_failed and new_runtimes is not None else None
    problems = [problem for host, service in batch
                for problem in [_service_problem(f"{host}/{service}", failures.get((host, service)),
                                                 state_of.get((host, service)), new_pids)] if problem]
    if wait is not None and new_runtimes is None:
        problems.append(f"the wait for the new runtimes failed: {wait.get('msg', 'no result')}")
    elif wait_failed:
        problems.append(f"{healthy} of {expected} restarted runtimes are live and healthy in Awa within "
                        "enqueue_shards_restart_timeout")
    if not problems:
        return {"ok": True, "message": f"Batch {index + 1} of {count} is back: {healthy} of {expected} restarted "
                                       "runtimes live and healthy."}
    members = ", ".join(f"{host}/{service}" for host, service in batch)
    message = (f"Rollout stopped at batch {index + 1} of {count} ({members}): " + "; ".join(problems) + ". "
               "No later batch was restarted. The new count is committed: the runtimes restarted so far use "
               "it, the others keep the old count until they restart. Fix the services named (systemctl status "
               "and journalctl -u on their hosts, or your service manager's logs), then run the playbook "
               "again: it changes nothing more and restarts only the services that do not run the count yet.")
    return {"ok": False, "message": message}
