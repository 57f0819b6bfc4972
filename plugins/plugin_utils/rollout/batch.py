# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One batch of the role enqueue_shards's rolling restart: whom it restarts, what it waits for, what it found.

The rollout's state is the restart plan (restarts.restart_plan):
the host states, each host's restart contract, the runtimes known so far,
the hosts gone. A batch restarts its services with one run of
awa_producer_services on each of its hosts (the registered loop result
``restarts``), waits for their new runtimes on the database, and then
``after_batch`` takes what the restarts reported into the host states and
judges the batch (verdicts.batch_verdict).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.awa.operations.plugins.plugin_utils.rollout import health_gates
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.services import host_state, read_error
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.verdicts import batch_verdict


def batch_members(rollout: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """The batch's hosts still in the rollout, each with its services of the batch and its restart contract."""
    services: dict[str, list[str]] = {}
    for host, service in rollout["batches"][index]:
        if host not in rollout["gone"]:
            services.setdefault(host, []).append(service)
    return [{"host": host, "services": names, **rollout["contracts"][host]} for host, names in services.items()]


def restart_outcomes(restarts: dict[str, Any]) -> list[dict[str, Any]]:
    """Each host's restarts in the batch, from the registered loop over awa_producer_services.

    A host the run could not reach restarted nothing there: ``unreachable``
    carries the connection error.
    """
    outcomes = []
    for result in restarts.get("results", []):
        error = read_error(result)
        if error is not None:
            outcomes.append({"host": result["item"]["host"], "restarted": [],
                             "failed": [] if result.get("unreachable") else [
                                 {"service": service, "message": error} for service in result["item"]["services"]],
                             "unreachable": error if result.get("unreachable") else None})
            continue
        outcomes.append({"host": result["item"]["host"], "restarted": list(result["restarted"]),
                         "failed": [dict(failure) for failure in result["restart_failures"]]
                         + [{"service": service, "message": problem} for problem in result["problems"]
                            for service in result["item"]["services"]],
                         "unreachable": None})
    return outcomes


def expected_new_runtimes(restarts: dict[str, Any], runtimes_per_service: int) -> int:
    """How many new runtimes the batch's wait expects: one set per service that restarted."""
    return sum(len(outcome["restarted"]) for outcome in restart_outcomes(restarts)) * runtimes_per_service


def gates_of(read: dict[str, Any], gates: dict[str, Any]) -> dict[str, Any]:
    """The health gates evaluated on a read; ``gates`` holds the ``baseline``, the ``queues`` and the ``limits``."""
    return health_gates.evaluate(read.get("health"), baseline=gates["baseline"], queues=gates["queues"],
                                 limits=gates["limits"])


def pause_seconds(rollout: dict[str, Any], index: int, read: dict[str, Any], gates: dict[str, Any], canary_pause: float | None,
                  batch_pause: float | None) -> int:
    """How long to watch the batch before the next one: 0 when it is the last, did not come back or crossed a gate."""
    seconds = float(canary_pause if index == 0 and canary_pause is not None else batch_pause or 0)
    came_back = "new_runtimes" in read and len(read["new_runtimes"]) >= read.get("expected_new_runtimes", 0)
    if seconds <= 0 or index + 1 >= len(rollout["batches"]) or not came_back or gates_of(read, gates)["crossed"]:
        return 0
    return int(-(-seconds // 1))


def _updated_hosts(rollout: dict[str, Any], restarts: dict[str, Any]) -> list[dict[str, Any]]:
    """The host states, with what each host of the batch reported after its restarts."""
    by_host = {state["host"]: state for state in rollout["hosts"]}
    for result in restarts.get("results", []):
        host = result["item"]["host"]
        state = by_host[host]
        settings = {"host": host, "names": state["names"],
                    "services": [service["service"] for service in state["services"]],
                    "service_queues": {service["service"]: service["queues"] for service in state["services"]
                                       if service.get("queues") is not None}}
        if result.get("unreachable"):
            by_host[host] = host_state(settings, result)
            continue
        if read_error(result) is not None:
            continue
        fresh = {service["service"]: service for service in host_state(settings, result)["services"]}
        by_host[host] = dict(state, clock=result["clock"],
                             services=[fresh.get(service["service"], service) for service in state["services"]])
    return [by_host[state["host"]] for state in rollout["hosts"]]


def after_batch(rollout: dict[str, Any], *, index: int, restarts: dict[str, Any], read: dict[str, Any], gates: dict[str, Any], backout: str) -> dict[str, Any]:
    """The rollout's state after batch ``index``, with the batch's verdict (``verdict``: ``ok`` and ``message``)."""
    outcomes = restart_outcomes(restarts)
    hosts = _updated_hosts(rollout, restarts)
    gone = sorted(set(rollout["gone"]) | {outcome["host"] for outcome in outcomes if outcome["unreachable"]})
    verdict = batch_verdict(
        rollout["batches"][index], index=index, count=len(rollout["batches"]), outcomes=outcomes, states=hosts,
        read=read, gates=gates_of(read, gates), runtimes_per_service=rollout["runtimes_per_service"],
        pid_hosts=rollout["pid_hosts"], later=rollout["batches"][index + 1:], gone=gone,
        hosts_total=len(hosts), max_fail_percentage=rollout["max_fail_percentage"], backout=backout)
    known = list(dict.fromkeys(rollout["known_runtimes"]
                               + [runtime["instance_id"] for runtime in read.get("runtimes", [])]))
    # The services restarted so far (host/service): the window's record says them, and those left.
    restarted = rollout.get("restarted", []) + [f"{outcome['host']}/{service}" for outcome in outcomes
                                                for service in outcome["restarted"]]
    return dict(rollout, hosts=hosts, gone=gone, known_runtimes=known, verdict=verdict,
                verdicts=rollout["verdicts"] + [verdict], restarted=restarted)
