# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which live Awa runtime belongs to which producer service of the inventory, and how many are missing.

A service is done only when its runtimes are live on the count: a process
that is up but never registered its runtime (hung, crash-looping, stuck in
start) runs nothing. Each service is judged one of three ways:

* by pid: a runtime is the service's by the rule the rollout's waits apply
  too (module_utils/info/service_runtimes.py) - its pid and host name are
  what one of the service's processes reports (producer/identities.py) and
  it started no earlier than the service. A runtime that two services could
  both claim (hosts booted from one image whose runtimes report no host name,
  containers given one HOSTNAME) belongs to neither: those services are
  judged by count. So are the services of a host where no service claims
  any runtime (runtimes its processes do not show: a container engine's
  processes elsewhere) unless an earlier match there tied them (``pid_hosts``);
* by count: the live runtimes on the count that no service claimed must
  cover them, else they cannot be told apart;
* by start: a service that only enqueues (``runtimes`` 0: no runtime row) -
  whether it started after the change is the plan's to say
  (rollout.restarts), and it counts for no runtime.

The expected runtimes are the inventory's: every service that is not
stopped, each with its own ``runtimes``, unreachable hosts included. Where
every service that runs reports what its runtimes are, a live runtime that no
service claims runs outside the inventory (``outside_runtimes``): another
change window's, or a producer the inventory does not list.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.wording import counted, names_text
from ansible_collections.awa.operations.plugins.module_utils.info.result import RuntimeView
from ansible_collections.awa.operations.plugins.module_utils.info.service_runtimes import (
    ServiceProcess,
    WindowService,
    identity,
    is_runtime_view_of,
    left_out,
)
from ansible_collections.awa.operations.plugins.module_utils.info.views import describe_runtime
from ansible_collections.awa.operations.plugins.module_utils.producer.services import (
    FAILED,
    RUNNING,
    STOPPED,
    UNREACHABLE,
)

# What a service's runtimes are, by pid (host and pid where reported), by count or by its start.
HAS_RUNTIMES, STALE_RUNTIMES, NO_RUNTIME = "has_runtimes", "stale_runtimes", "no_runtime"
COVERED_BY_COUNT, SHORT_BY_COUNT, NOT_RUNNING, NOT_READ = "covered_by_count", "short_by_count", "not_running", "not_read"
ENQUEUE_ONLY = "enqueue_only"
BY_PID, BY_COUNT, BY_START = "pid", "count", "start"
DONE = (HAS_RUNTIMES, COVERED_BY_COUNT, ENQUEUE_ONLY)
# Why a service is not done, by its match's status ({pid}: its main pid), as the inventory's verdict says it; the plan
# and a batch say the same of a service with no runtime, then what it means (HANGS).
WHY_NOT_DONE = {NOT_READ: "its host is unreachable", NOT_RUNNING: "it is {state}",
                NO_RUNTIME: "it runs (pid {pid}) but no live Awa runtime has its pid",
                STALE_RUNTIMES: "its runtime does not run the count",
                SHORT_BY_COUNT: "the runtimes on the count are too few to cover it"}
HANGS = "it hangs before its runtime registers, or it is in a restart loop"


def process(service: dict[str, Any]) -> ServiceProcess:
    """A service of a host state (services.host_state) as the rule that ties runtimes to it reads it."""
    return {"reports_as": list(service.get("reports_as") or []), "started_at": service["started_at"]}


def window(hosts: list[dict[str, Any]], pid_hosts: Collection[str], untouched: Collection[str] = ()) -> list[WindowService]:
    """The services of ``hosts`` as a change window's waits see them (service_runtimes.left_out): each with what its
    processes report where its runtimes are told apart (a running service of a host in ``pid_hosts``), else
    nothing; and whether the change concerns it (``untouched``: host/service names it does not). Stopped and failed
    services, and those that only enqueue, run no runtime: left out."""
    return [{"reports_as": process(service)["reports_as"] if host["reachable"] and host["host"] in pid_hosts
             and service["state"] == RUNNING else [], "started_at": service["started_at"],
             "concerned": f"{host['host']}/{service['service']}" not in untouched}
            for host in hosts for service in host["services"]
            if service["state"] not in (STOPPED, FAILED) and service.get("runtimes", 1) != 0]


def match(hosts: list[dict[str, Any]], runtimes: Sequence[RuntimeView], *, pid_hosts: Collection[str] = (),
          queue: str | None = None, queues: Collection[str] | None = None) -> dict[str, Any]:
    """Each service's runtimes, how they were judged, and the inventory's N of M.

    ``hosts`` are host states (services.host_state), ``runtimes`` the info
    module's ``runtimes`` (each with ``live``, ``converged`` and
    ``pending_queues``). With ``queue``, "on the count" is that queue's count;
    otherwise every queue read. Services that declare they enqueue only into
    other queues than ``queue`` (or ``queues``) are left out (``untouched``),
    with the runtimes they claim.
    """
    live: list[RuntimeView] = [
        {**runtime, "converged": queue not in runtime.get("pending_queues", []) if queue else runtime["converged"]}
        for runtime in runtimes if runtime["live"]]
    # Each service that runs Awa runtimes on a host that was read: (host, service) -> the service.
    active = {(host["host"], service["service"]): service for host in hosts if host["reachable"]
              for service in host["services"] if service["state"] == RUNNING and service.get("runtimes", 1) > 0}
    # Each live runtime's one claimant (host, service), where only one service's processes show it; and the services
    # whose runtime another could claim.
    running = [(owner, process(service)) for owner, service in active.items() if service.get("reports_as")]
    owners = {runtime["instance_id"]: [owner for owner, reported in running if is_runtime_view_of(reported, runtime)]
              for runtime in live}
    sole = {instance: found[0] for instance, found in owners.items() if len(found) == 1}
    shared = {owner for found in owners.values() if len(found) > 1 for owner in found}
    # A service the change does not concern declares queues (enqueue_shards_service_queues) none of which it changes:
    # it is left out with the runtimes it claims.
    asked = [queue] if queue else queues
    untouched = sorted(f"{host['host']}/{service['service']}" for host in hosts for service in host["services"]
                       if service.get("queues") is not None and asked is not None
                       and not set(service["queues"]) & set(asked))
    live = [runtime for runtime in live if "/".join(sole.get(runtime["instance_id"], ())) not in untouched]
    by_pid_hosts = set(pid_hosts) | {host for host, dummy in sole.values()}
    by_pid = {owner for owner, dummy in running if owner[0] in by_pid_hosts and owner not in shared}
    # Only a service judged by pid owns runtimes: the others' are spare, for the services judged by count.
    spare = [runtime for runtime in live if sole.get(runtime["instance_id"]) not in by_pid]
    spare_on_count = [runtime for runtime in spare if runtime["converged"]]
    need = sum(service.get("runtimes", 1) for owner, service in active.items()
               if owner not in by_pid and "/".join(owner) not in untouched)
    by_count = COVERED_BY_COUNT if len(spare_on_count) >= need else SHORT_BY_COUNT
    owned_by: dict[tuple[str, str], list[RuntimeView]] = {}
    for runtime in live:
        if sole.get(runtime["instance_id"]) in by_pid:
            owned_by.setdefault(sole[runtime["instance_id"]], []).append(runtime)
    services, expected, on_count = [], 0, 0
    for host in hosts:
        for service in host["services"]:
            name, per_service = (host["host"], service["service"]), service.get("runtimes", 1)
            if "/".join(name) in untouched:
                continue
            expected += per_service if service["state"] != STOPPED else 0
            # Only a service judged by pid owns runtimes: for the others, fresh is 0.
            owned = owned_by.get(name, [])
            fresh = sum(1 for runtime in owned if runtime["converged"])
            on_count += min(fresh, per_service)
            judged = BY_START if per_service == 0 else BY_PID if name in by_pid else BY_COUNT
            by_judge = {BY_START: ENQUEUE_ONLY, BY_COUNT: by_count,
                        BY_PID: HAS_RUNTIMES if fresh >= per_service else STALE_RUNTIMES if owned else NO_RUNTIME}
            services.append({"host": name[0], "service": name[1], "state": service["state"],
                             "main_pid": service["main_pid"], "judged_by": judged,
                             "runtimes": [runtime["instance_id"] for runtime in owned],
                             "status": NOT_READ if service["state"] == UNREACHABLE or not host["reachable"]
                             else NOT_RUNNING if service["state"] != RUNNING else by_judge[judged]})
    counted_on_count = min(len(spare_on_count), need)
    on_count += counted_on_count
    # The live runtimes no service runs, where every service that runs is told apart: the waits' rule.
    outside_runtimes = left_out(window(hosts, by_pid_hosts), [(runtime["instance_id"], *identity(runtime))
                                                              for runtime in live])
    return {"services": services, "expected": expected, "on_count": on_count,
            "outside": len(spare) - counted_on_count,
            "outside_runtimes": [runtime["instance_id"] for runtime in live if runtime["instance_id"] in outside_runtimes],
            "by_count_hosts": sorted({entry["host"] for entry in services
                                      if entry["judged_by"] == BY_COUNT and entry["status"] != NOT_READ}),
            "enqueue_only": [f"{entry['host']}/{entry['service']}" for entry in services if entry["judged_by"] == BY_START],
            "pid_hosts": sorted(by_pid_hosts),
            "unreachable_hosts": sorted(host["host"] for host in hosts if not host["reachable"]),
            "untouched": untouched}


def how_judged(matched: dict[str, Any], *, brief: bool = False) -> str:
    """One sentence: how the inventory's runtimes were told apart (``brief``: without the reasons a runtime
    cannot be tied to its service, for the lines that repeat what the plan said)."""
    hosts = names_text(matched["by_count_hosts"])
    text = "runtimes matched to services by pid" + (
        " (and host name where the runtime reports one)" if not hosts
        else f", except on {hosts}, whose services were judged by count (their runtimes cannot be tied to one service "
        "by pid)" if brief
        else f", except on {hosts}: a runtime there cannot be tied to one service by the pid and host name it reports "
        "(no process of a service shows a live runtime's - a container engine runs them elsewhere, or the status "
        "command prints no pid - or a runtime that reports no host name, or one HOSTNAME, has the pid of services on "
        "several hosts: set enqueue_shards_runtime_hostname), so its services were judged by count against the live "
        "runtimes no other service claimed")
    if matched.get("enqueue_only"):
        text += f"; judged by when they started, as they only enqueue: {names_text(matched['enqueue_only'], 3)}"
    return text


def not_read(matched: dict[str, Any]) -> list[str]:
    """The services (``host/service``) whose host was not read: not checked or restarted."""
    return [f"{entry['host']}/{entry['service']}" for entry in matched["services"] if entry["status"] == NOT_READ]


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
