# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which live Awa runtime belongs to which producer service of the inventory, and how many are missing.

A service is done only when its runtimes are live on the count: a process
that is up but never registered its runtime (hung, crash-looping, stuck in
start) runs nothing. Awa 0.6.9 runtimes publish their pid (and a host name
when the runtime reports one; Python runtimes leave it empty), so:

* a runtime belongs to a service by the rule the rollout's waits apply too
  (module_utils/info/service_runtimes.py): its pid is the service's main pid
  (systemd's MainPID, or the pid the status command prints), its host name
  (when reported) is one of the service's host's names, and it started no
  earlier than the service's process. Hosts have their own pid namespaces,
  so one pid can be the main pid of services on several hosts: a runtime
  that reports no host name and could be more than one of them belongs to
  none, and those hosts are judged by count (identical hosts restarted
  together hand out the same pids in the same second);
* on a host where no service's pid is a runtime's pid (runtimes in child
  processes or containers, or a status command that prints no pid), the
  services are judged by count: the live runtimes on the count that no
  service claimed must cover them, else they cannot be told apart.

The expected runtimes are the inventory's: every service that is not
stopped, times ``runtimes_per_service``, unreachable hosts included. Where
every service is judged by pid and every host was read, a live runtime that
no service claimed runs outside the inventory (``outside_runtimes``): another
change window's, or a producer the inventory does not list.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.name_lists import counted, names_text
from ansible_collections.awa.operations.plugins.module_utils.info.result import RuntimeView
from ansible_collections.awa.operations.plugins.module_utils.info.service_runtimes import (
    ServiceProcess,
    WindowService,
    identity,
    is_runtime_view_of,
    left_out,
)
from ansible_collections.awa.operations.plugins.module_utils.info.views import describe_runtime
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.services import (
    FAILED,
    RUNNING,
    STOPPED,
    UNREACHABLE,
)

# What a service's runtimes are, by pid (host and pid where reported) or by count.
HAS_RUNTIMES, STALE_RUNTIMES, NO_RUNTIME = "has_runtimes", "stale_runtimes", "no_runtime"
COVERED_BY_COUNT, SHORT_BY_COUNT, NOT_RUNNING, NOT_READ = "covered_by_count", "short_by_count", "not_running", "not_read"
BY_PID, BY_COUNT = "pid", "count"


def process(host: dict[str, Any], service: dict[str, Any]) -> ServiceProcess:
    """A service of a host state (services.host_state) as the rule that ties runtimes to it reads it."""
    return {"names": host["names"], "pid": service["main_pid"] or None, "started_at": service["started_at"]}


def window(hosts: list[dict[str, Any]], pid_hosts: Collection[str], untouched: Collection[str] = ()) -> list[WindowService]:
    """The services of ``hosts`` as a change window's waits see them (service_runtimes.left_out): each with its
    process where it runs on a host whose runtimes are told apart by pid (``pid_hosts``), else without a pid; and
    whether the change concerns it (``untouched``: host/service names it does not). Stopped and failed services run
    no runtime: left out."""
    services: list[WindowService] = []
    for host in hosts:
        for service in host["services"]:
            if service["state"] in (STOPPED, FAILED):
                continue
            told_apart = host["reachable"] and host["host"] in pid_hosts and service["state"] == RUNNING
            services.append({"names": host["names"], "pid": (service["main_pid"] or None) if told_apart else None,
                             "started_at": service["started_at"],
                             "concerned": f"{host['host']}/{service['service']}" not in untouched})
    return services


def _assign(hosts: list[dict[str, Any]], live: list[RuntimeView]) -> tuple[dict[tuple[str, str], list[RuntimeView]], set[str]]:
    """(host, service) -> the live runtimes that belong to it, each runtime to one service at most; and the hosts
    whose services share a pid with another host's for a runtime that could be either (no host name reported)."""
    claimed: dict[tuple[str, str], list[RuntimeView]] = defaultdict(list[RuntimeView])
    ambiguous: set[str] = set()
    for runtime in live:
        owners = [(host["host"], service["service"]) for host in hosts if host["reachable"]
                  for service in host["services"]
                  if service["state"] == RUNNING and is_runtime_view_of(process(host, service), runtime)]
        if len({owner_host for owner_host, dummy in owners}) > 1:
            ambiguous.update(owner_host for owner_host, dummy in owners)
        elif owners:
            claimed[owners[0]].append(runtime)
    return claimed, ambiguous


def concerns(service: dict[str, Any], queues: Collection[str] | None) -> bool:
    """Whether a change of ``queues`` concerns the service: it declares no queues (enqueue_shards_service_queues),
    or one of them; None: every service."""
    declared = service.get("queues")
    return declared is None or queues is None or bool(set(declared) & set(queues))


def _unconcerned(hosts: list[dict[str, Any]], claimed: dict[tuple[str, str], list[RuntimeView]],
                 queues: Collection[str] | None) -> tuple[list[dict[str, Any]], set[str], list[str]]:
    """The hosts with only the services the change concerns, the runtimes of the others (which count neither for
    nor against the inventory), and the others' names."""
    left_out = {(host["host"], service["service"]) for host in hosts for service in host["services"]
                if not concerns(service, queues)}
    runtimes = {runtime["instance_id"] for owner in left_out for runtime in claimed.get(owner, [])}
    kept = [dict(host, services=[service for service in host["services"]
                                 if (host["host"], service["service"]) not in left_out]) for host in hosts]
    return kept, runtimes, sorted(f"{host}/{service}" for host, service in left_out)


def match(hosts: list[dict[str, Any]], runtimes: Sequence[RuntimeView], runtimes_per_service: int, *, pid_hosts: Collection[str] = (),
          queue: str | None = None, queues: Collection[str] | None = None) -> dict[str, Any]:
    """Each service's runtimes, how they were judged, and the inventory's N of M.

    ``hosts`` are host states (services.host_state), ``runtimes``
    the info module's ``runtimes`` (each with ``live``, ``converged`` and
    ``pending_queues``). ``pid_hosts`` are hosts an earlier match tied to
    runtimes by pid: they stay judged by pid even when none of their
    services has a runtime now. With ``queue``, "on the count" is that
    queue's count; otherwise every queue read. Services that declare they
    enqueue only into other queues than ``queue`` (or ``queues``) are left
    out (``untouched``), with the runtimes tied to them by pid.
    """
    live: list[RuntimeView] = [
        {**runtime, "converged": queue not in runtime.get("pending_queues", []) if queue else runtime["converged"]}
        for runtime in runtimes if runtime["live"]]
    claimed, ambiguous = _assign(hosts, live)
    hosts, theirs, untouched = _unconcerned(hosts, claimed, [queue] if queue else queues)
    live = [runtime for runtime in live if runtime["instance_id"] not in theirs]
    claimed = {owner: owned for owner, owned in claimed.items() if f"{owner[0]}/{owner[1]}" not in untouched}
    # A host with a runtime that could be another host's is judged by count, with every runtime it claimed.
    claimed = {owner: owned for owner, owned in claimed.items() if owner[0] not in ambiguous}
    by_pid_hosts = (set(pid_hosts) | {host["host"] for host in hosts
                                      if any((host["host"], service["service"]) in claimed
                                             for service in host["services"])}) - ambiguous
    claimed_ids = {runtime["instance_id"] for owned in claimed.values() for runtime in owned}
    spare = [runtime for runtime in live if runtime["instance_id"] not in claimed_ids]
    spare_on_count = [runtime for runtime in spare if runtime["converged"]]
    counted = [(host, service) for host in hosts if host["reachable"] and host["host"] not in by_pid_hosts
               for service in host["services"] if service["state"] == RUNNING]
    need = len(counted) * runtimes_per_service
    covered = len(spare_on_count) >= need
    services, expected, on_count = [], 0, 0
    for host in hosts:
        for service in host["services"]:
            if service["state"] != STOPPED:
                expected += runtimes_per_service
            entry = {"host": host["host"], "service": service["service"], "state": service["state"],
                     "main_pid": service["main_pid"], "judged_by": BY_PID if host["host"] in by_pid_hosts else BY_COUNT,
                     "runtimes": [runtime["instance_id"] for runtime in claimed.get((host["host"], service["service"]), [])]}
            owned = claimed.get((host["host"], service["service"]), [])
            if service["state"] == UNREACHABLE or not host["reachable"]:
                entry["status"] = NOT_READ
            elif service["state"] != RUNNING:
                entry["status"] = NOT_RUNNING
            elif host["host"] not in by_pid_hosts:
                entry["status"] = COVERED_BY_COUNT if covered else SHORT_BY_COUNT
            else:
                fresh = sum(1 for runtime in owned if runtime["converged"])
                entry["status"] = (HAS_RUNTIMES if fresh >= runtimes_per_service
                                   else STALE_RUNTIMES if owned else NO_RUNTIME)
                on_count += min(fresh, runtimes_per_service)
            services.append(entry)
    counted_on_count = min(len(spare_on_count), need)
    on_count += counted_on_count
    outside = len(spare) - counted_on_count
    # The live runtimes no service runs, where every service that runs is told apart by pid: the waits' rule.
    outside_runtimes = left_out(window(hosts, by_pid_hosts), [(runtime["instance_id"], *identity(runtime))
                                                              for runtime in live])
    return {"services": services, "expected": expected, "on_count": on_count, "outside": outside,
            "outside_runtimes": [runtime["instance_id"] for runtime in live if runtime["instance_id"] in outside_runtimes],
            "by_count_hosts": sorted(host["host"] for host in hosts
                                     if host["reachable"] and host["host"] not in by_pid_hosts and host["services"]),
            "unreachable_hosts": sorted(host["host"] for host in hosts if not host["reachable"]),
            "untouched": untouched}


def how_judged(matched: dict[str, Any], *, brief: bool = False) -> str:
    """One sentence: how the inventory's runtimes were told apart (``brief``: without the reasons a runtime
    cannot be tied to its service, for the lines that repeat what the plan said)."""
    if not matched["by_count_hosts"]:
        return "runtimes matched to services by pid (and host name where the runtime reports one)"
    hosts = names_text(matched["by_count_hosts"])
    if brief:
        return (f"runtimes matched to services by pid, except on {hosts}, whose services were judged by count (their "
                "runtimes cannot be tied to one service by pid)")
    return (f"runtimes matched to services by pid, except on {hosts}: a runtime there cannot be tied to one service "
            "by its pid (no runtime has a service's pid - runtimes in child processes or containers, or a status "
            "command that prints no pid - or a runtime that reports no host name has the pid of services on several "
            "hosts), so its services were judged by count against the live runtimes no other service claimed")


def inventory_text(matched: dict[str, Any]) -> str:
    """``N of M`` against the inventory, with the runtimes outside it."""
    text = f"{matched['on_count']} of {matched['expected']}"
    return text + (f", {matched['outside']} outside" if matched["outside"] else "")


def outside_text(matched: dict[str, Any], runtimes: Sequence[RuntimeView]) -> str:
    """The live runtimes outside the inventory (``outside_runtimes``), named: a few, then counted."""
    described = [describe_runtime(runtime) for runtime in runtimes if runtime["instance_id"] in matched["outside_runtimes"]]
    listed = "; ".join(described[:3]) + (f"; and {len(described) - 3} more" if len(described) > 3 else "")
    return (f"{counted(len(described), 'live runtime')} outside the change window - no producer service of the "
            "inventory runs them (another window's, on another part of the inventory, or a producer the inventory does "
            f"not list): {listed}. The waits leave them out; their own window or their owner restarts them.")
