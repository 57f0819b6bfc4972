# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which producer services the role enqueue_shards restarts, in which batches, and whether a batch came back.

Awa 0.6 runtimes read a queue's shard count when they start and keep it. A
service is done when its runtimes are live on the count: where a runtime can
be matched to its service (rollout.match), the match decides - a service
whose runtime runs an older count, or that runs but has no live runtime at
all (hung before registering, crash-looping), is restarted. Where it cannot,
a service whose current process started after the change committed is taken
to run the new count: its start comes from its host's clock (systemd's
ActiveEnterTimestamp, or the status command), the commit from the database's
(the change ledger), related through one pair of readings - the database's
clock read before the host's - which bounds the skew from the safe side; and
if the inventory's count of runtimes falls short, those services cannot be
told apart and are restarted.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.wording import LISTED, counted, names_text
from ansible_collections.awa.operations.plugins.module_utils.change.result import (
    EnqueueShardsResult,
    queue_changes,
)
from ansible_collections.awa.operations.plugins.module_utils.info.result import StateRead, StragglerView
from ansible_collections.awa.operations.plugins.module_utils.info.service_runtimes import CLOCK_RESOLUTION, WindowService
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import match, serial, summary
from ansible_collections.awa.operations.plugins.module_utils.producer.services import FAILED, STARTING, STOPPED, UNKNOWN
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.services import service_problem

# A pid in a plan line: services whose lines differ only in it have the same reason.
PID = re.compile(r" \(pid \d+\)")


def db_time(text: str) -> float:
    """An ISO 8601 time of the database's clock, in unix seconds."""
    return datetime.datetime.fromisoformat(text).timestamp()


def pickup_deadlines(read: StateRead, changed: Mapping[str, Any], check_mode: bool) -> tuple[dict[str, float], dict[str, float]]:
    """Queue -> the database time a service must have started after to run its count: for the queues some live
    runtime does not yet run the count of, then for every queue whose count a change set (for services with no
    runtime to say so). In check mode a queue whose count would switch needs ``inf``: every service."""
    pending, started = {}, {}
    for name, view in read["queues"].items():
        would_switch = check_mode and name in changed and summary.switches(changed[name])
        changes = [db_time(entry["changed_at"]) for entry in view["last_change"].values()]
        deadline = math.inf if would_switch or not changes else max(changes)
        if would_switch or not view["converged"]:
            pending[name] = deadline
        if would_switch or not view["converged"] or changes:
            started[name] = deadline
    return pending, started


def unreachable_message(gone: list[dict[str, Any]], total: int, max_fail_percentage: float) -> str:
    """Which hosts could not be reached and which of their services were not checked or restarted."""
    listed = "; ".join(f"{host['host']} ({host['services'][0]['detail'] if host['services'] else 'unreachable'}): "
                       f"{', '.join(service['service'] for service in host['services']) or 'no service'} "
                       "not checked or restarted" for host in gone)
    share = 100 * len(gone) / total if total else 100
    # A host that answered but whose run failed is not unreachable: what it said is its detail, to be fixed there.
    answered = sum(1 for host in gone if host.get("answered"))
    what = ("unreachable" if not answered else "failed before their services were read" if answered == len(gone)
            else "unreachable or failed before their services were read")
    fix = "Bring them back" if not answered else "Fix what each host said"
    return (f"{len(gone)} of {total} producer host(s) {what} ({share:.0f}%, over "
            f"enqueue_shards_max_fail_percentage {max_fail_percentage:g}): {listed}. {fix} and run the "
            "playbook again (it restarts only what is still stale), or raise enqueue_shards_max_fail_percentage to "
            "go on without them")


def restart_plan(hosts: list[dict[str, Any]], *, read: StateRead, change: EnqueueShardsResult | None,
                 settings: Mapping[str, Any]) -> dict[str, Any]:
    """The rollout's plan (rollout.state.Rollout's keys): the services to restart and why, in batches that span
    hosts, and the problems that stop the rollout first; with ``lowered`` (whether the change lowers a count).

    Services of hosts that could not be reached are listed in ``skipped``;
    more of them than ``settings``' max_fail_percentage of the hosts is a
    problem. The rollout's state starts from it (rollout.state.plan): the
    host states, the runtimes known so far and the hosts gone.
    """
    check_mode, max_fail_percentage = settings["check_mode"], settings["max_fail_percentage"]
    changed = queue_changes(change)
    deadlines, started = pickup_deadlines(read, changed, check_mode)
    # The change concerns the services that enqueue into a queue it changes, or declare no queues. A lowering
    # concerns every service: one that still enqueues with the old count would refill the old shards, and a
    # declaration cannot be checked.
    concerned = sorted(deadlines)
    lowered = [name for name in concerned if summary.lowered(read["queues"][name]) or name in changed and any(
        previous > changed[name]["shards"] for previous in changed[name]["previous_shards"].values())]
    matched = match.match(hosts, read.get("runtimes", []), queues=None if lowered else concerned)
    status_of = {(entry["host"], entry["service"]): entry["status"] for entry in matched["services"]}
    problems, lines, members = [], [], []
    for host in hosts:
        chosen = []
        for service in host["services"]:
            name, status = f"{service['host']}/{service['service']}", status_of.get((service["host"], service["service"]))
            # An unreachable host's services were not read: they have no problem (services.unreachable_state).
            problem = name not in matched["untouched"] and service_problem(service["host"], service, host["method"])
            if problem:
                problems.append(problem)
                continue
            # A service that only enqueues has no runtime to say it runs the count: its start does, after each change.
            own = {queue: deadline for queue, deadline in (started if status == match.ENQUEUE_ONLY else deadlines).items()
                   if lowered or service.get("queues") is None or queue in service["queues"]}
            restart, why = _decision(service, host, status, own, read_at=db_time(read["read_at"]), matched=matched,
                                     by_start=bool(deadlines) or status == match.ENQUEUE_ONLY)
            lines.append(f"{name}: {why}")
            chosen += [service] if restart else []
            if name not in matched["untouched"] and _ignores_environment(host, service):
                lines.append(f"{name}: its processes do not show HOSTNAME={host['hostname']}, which its environment "
                             "file sets: it does not load the file (a systemd unit needs EnvironmentFile=), so its "
                             "runtimes report no host name of their own")
        members.append(chosen)
    gone = [host for host in hosts if not host["reachable"]]
    if gone and len(gone) * 100 > max_fail_percentage * len(hosts):
        problems.append(unreachable_message(gone, len(hosts), max_fail_percentage))
    # Batches of hosts, as Ansible's serial cuts a play: each host restarts all of its services in its batch.
    batches = [[[service["host"], service["service"]] for host in batch for service in host]
               for batch in serial.split([chosen for chosen in members if chosen], settings["batch_size"])]
    restarted = [service for chosen in members for service in chosen]
    stragglers: dict[str, StragglerView] = {} if check_mode else {
        straggler["instance_id"]: straggler for name in deadlines for straggler in read["queues"][name]["stragglers"]}
    outside = len(stragglers) - sum(service.get("runtimes", 1) for service in restarted)
    if matched["outside_runtimes"]:
        lines.append(match.outside_text(matched, read.get("runtimes", [])))
    elif outside > 0:
        listed = ", ".join(f"pid {s['pid']} (instance {s['instance_id']}, up {s['seconds_since_start']:.0f}s)"
                           for s in list(stragglers.values())[:5])
        lines.append(f"{len(stragglers)} live runtime(s) run an older count but only {len(restarted)} service(s) of "
                     f"the inventory are restarted: at least {outside} runtime(s) run outside the inventory. "
                     f"On an older count: {listed}. Restart those outside yourselves, or add their hosts to "
                     "awa_producers; the wait names them until they run the count.")
    if lowered and any(service.get("queues") is not None for host in hosts for service in host["services"]):
        lines.append(f"enqueue_shards_service_queues is not applied: the change lowers {names_text(lowered, 3)}, "
                     "so every producer service is concerned (one that kept the old count would refill the old "
                     "shards).")
    if matched["by_count_hosts"]:
        lines.append("How the runtimes were counted: " + match.how_judged(matched) + ".")
    headline, batch_lines = _headline(batches, settings["batch_size"], check_mode)
    # The hosts of the plays of the batches: none in check mode, which restarts nothing.
    return {"batches": batches, "batch_hosts": [] if check_mode else batch_hosts(batches), "problems": problems,
            "skipped": match.not_read(matched),
            "pid_hosts": matched["pid_hosts"], "concerned_queues": concerned, "untouched": matched["untouched"],
            "hosts": hosts, "known_runtimes": [runtime["instance_id"] for runtime in read.get("runtimes", [])],
            "gone": sorted(host["host"] for host in gone), "lowered": bool(lowered),
            "shown": {"headline": headline, "detail": lines, "lines": [headline, *batch_lines, *_services_by_reason(
                lines, sum(len(host["services"]) for host in hosts))]}}


def _decision(service: dict[str, Any], host: dict[str, Any], status: str | None, deadlines: dict[str, float], *,
              read_at: float, matched: dict[str, Any], by_start: bool) -> tuple[bool, str]:
    """Whether the plan restarts a service, and what its line says of it: untouched, not checked or restarted,
    restart and why, or left alone and why (``by_start``: its start, not a count, says whether it runs the count)."""
    if f"{service['host']}/{service['service']}" in matched["untouched"]:
        again = host["environment_changed"] and host["reachable"]
        return again, (f"untouched - it enqueues only into {names_text(service['queues'], 3)}, which this change does "
                       "not concern (enqueue_shards_service_queues)"
                       + ("; restarted all the same: its environment file changed" if again else ""))
    if not host["reachable"]:
        why = "its host's run failed before reading it" if host.get("answered") else "its host is unreachable"
        return False, f"not checked or restarted - {why} ({service['detail']})"
    state, pid, runtimes = service["state"], service["main_pid"], service.get("runtimes", 1)
    reasons = ["its environment file changed"] if host["environment_changed"] and state != STOPPED else []
    stuck = {FAILED: "it is not running", STARTING: "it is stuck in start", UNKNOWN: "its start time is unknown"}
    by_pid = {match.HAS_RUNTIMES: [],
              match.NO_RUNTIME: [f"{match.WHY_NOT_DONE[match.NO_RUNTIME].format(pid=pid)}: {match.HANGS}"],
              match.STALE_RUNTIMES: [f"its runtime (pid {pid}) runs an older count" if runtimes == 1
                                     else f"fewer than {runtimes} of its runtimes (pid {pid}) run the count"]}
    # The host's clock was read after the database's (read_at), so host - read_at bounds the skew from above: the
    # bound errs towards a restart. A service certainly started after a deadline runs its count.
    started_at, clock = service["started_at"], host["clock"]
    late = [queue for queue, deadline in deadlines.items()
            if started_at is None or clock is None or started_at - (clock + CLOCK_RESOLUTION - read_at) <= deadline]
    if state == STOPPED:
        pass  # it starts with the current count whenever it is started
    elif state in (FAILED, STARTING) or (state == UNKNOWN and deadlines):
        reasons.append(f"{stuck[state]} ({service['detail']})")
    # Matched by pid, the match decides - unless the count switches in check mode, where every service would restart.
    elif status in by_pid and not any(math.isinf(deadline) for deadline in deadlines.values()):
        reasons += by_pid[status]
    elif late:
        reasons.append(f"it started before the change of {names_text(sorted(late), 3)}")
    elif status == match.SHORT_BY_COUNT:
        reasons.append(f"the inventory runs {matched['on_count']} of {matched['expected']} runtimes on the count and "
                       "its runtimes cannot be told apart from the others by pid")
    if reasons:
        return True, f"restart - {'; '.join(reasons)}"
    return False, "left alone - " + (
        f"it is stopped ({service['detail']}) and starts with the current count whenever it is started"
        if state == STOPPED else f"its runtime (pid {pid}) runs the count" if status == match.HAS_RUNTIMES
        else "it started after the change, so it runs the count" if by_start
        else "the live runtimes on the count cover the inventory (judged by count)")


def _ignores_environment(host: dict[str, Any], service: dict[str, Any]) -> bool:
    """Whether a running service's processes (on a host that was read), started after its environment file was last
    written (the file did not change in this run), lack the HOSTNAME the file sets - read where their environment
    could be."""
    read = [reported for reported in service.get("reports_as") or [] if "hostname" in reported]
    return bool(host.get("hostname") and service["state"] != STOPPED and not host["environment_changed"] and read
                and all(reported["hostname"] != host["hostname"] for reported in read))


def window_services(rollout: Mapping[str, Any] | None) -> list[WindowService]:
    """The producer services of the change window as the rollout last read them, for its waits (match.window).
    Without a rollout (the wait entry point), none: every runtime is waited for."""
    return match.window(rollout["hosts"], rollout["pid_hosts"], rollout["untouched"]) if rollout else []


def _services_by_reason(lines: list[str], services: int) -> list[str]:
    """The plan's lines as printed: every service's own line for a few services; past LISTED, the services with
    the same reason counted on one line (pids left out), and the lines about the inventory as they are."""
    if services <= LISTED:
        return lines
    about_services = [line for line in lines if re.match(r"^\S+/\S+: ", line)]
    grouped = summary.grouped((PID.sub("", reason), name)
                              for name, dummy, reason in [line.partition(": ") for line in about_services])
    return [f"{counted(len(names), 'service')}: {reason} ({names_text(names, 3)})" for reason, names in grouped.items()] \
        + [line for line in lines if line not in about_services] \
        + ["Every service's own line: -v, or the run's report file."]


def batch_hosts(batches: list[list[list[str]]]) -> list[list[str]]:
    """Each batch's hosts, in order (a batch restarts all of a host's services)."""
    return [list(dict.fromkeys(host for host, dummy in batch)) for batch in batches]


def _headline(batches: list[list[list[str]]], batch_size: object, check_mode: bool) -> tuple[str, list[str]]:
    """The plan's headline, and a line per batch when the headline cannot name them all."""
    if not batches:
        return "No producer service to restart.", []
    count = sum(len(batch) for batch in batches)
    members = [names_text(f"{host}/{service}" for host, service in batch) for batch in batches]
    listed = "one line each below" if count > LISTED else " then ".join(f"[{text}]" for text in members)
    hosts = [len(batch) for batch in batch_hosts(batches)]
    verb = "Check mode: would restart" if check_mode else "Restarting"
    return (f"{verb} {count} producer service(s) on {sum(hosts)} host(s) in {len(batches)} batch(es) "
            f"{serial.describe(batch_size, hosts)}: {listed}" + (". Nothing is restarted in check mode." if check_mode else ""),
            [f"  batch {index + 1}: {text}" for index, text in enumerate(members)] if count > LISTED else [])
