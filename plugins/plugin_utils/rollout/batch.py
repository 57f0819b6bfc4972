# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One batch of the role enqueue_shards's rolling restart: whom it restarts, what it waits for, what it found.

The rollout's state is one record (rollout.state.Rollout): the plan, the
host states, the runtimes known so far, the hosts gone. Each host of a
batch restarts its own services of the batch in its own run of
awa_producer_services, all of them at once (``batch_services`` tells each
host its own); the batch's restarts are each host's registered result
(``restarts``: host -> result). The batch then waits on the database for the
runtimes of exactly the services that restarted (``expectations``), and
``updated_hosts`` takes what the restarts reported into the host states, for
rollout.state.after_batch to judge the batch (verdicts.batch_verdict).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.awa.operations.plugins.plugin_utils.rollout import health_gates, summary
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.match import process
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.services import host_state, read_error


def batch_services(rollout: Mapping[str, Any], index: int | None = None) -> dict[str, list[str]]:
    """Each host of batch ``index`` (by default the next: the first not judged yet) still in the rollout, with its
    services of the batch (a host not named restarts nothing in it)."""
    members = rollout["batches"][len(rollout["verdicts"]) if index is None else index]
    return summary.grouped((host, service) for host, service in members if host not in rollout["gone"])


def next_batch(rollout: Mapping[str, Any], restarts: Mapping[str, Any] | None) -> tuple[int, dict[str, Any]]:
    """The next batch (the first not judged yet): its index, and its hosts' restarts in ``restarts`` (every play
    host's result; none yet before they ran)."""
    return len(rollout["verdicts"]), {host: restarts[host] for host in batch_services(rollout)
                                      if restarts and host in restarts}


def restart_outcomes(rollout: Mapping[str, Any], index: int, restarts: dict[str, Any]) -> dict[str, Any]:
    """What batch ``index``'s restarts did, from each host's run of awa_producer_services (``restarts``: host -> its
    result): the services ``restarted`` and those that ``failed`` (host/service -> why), and the hosts the run could
    not reach (``unreachable``), which restarted nothing."""
    members, errors = batch_services(rollout, index), {host: read_error(result) for host, result in restarts.items()}
    ran = {host: result for host, result in restarts.items() if errors[host] is None}
    unreachable = [host for host, result in restarts.items() if result.get("unreachable")]
    # A run that failed fails each of the host's services of the batch; one that ran, those it reports.
    problems = {host: result["problems"] if host in ran else [errors[host]] for host, result in restarts.items()
                if host not in unreachable}
    return {"restarted": [f"{host}/{service}" for host, result in ran.items() for service in result["restarted"]],
            "failed": {**{f"{host}/{failure['service']}": failure["message"] for host, result in ran.items()
                          for failure in result["restart_failures"]},
                       **{f"{host}/{service}": problem for host, texts in problems.items() for problem in texts
                          for service in members[host]}},
            "unreachable": unreachable}


def expectations(rollout: Mapping[str, Any], restarts: dict[str, Any]) -> dict[str, Any]:
    """What the batch's wait waits for: the runtimes of each service that restarted - its new main pid, on a host
    whose runtimes are told apart by pid (``restarted_services``) - and, for the others, as many new runtimes
    counted (``expected_new_runtimes``)."""
    # A host whose run failed restarted nothing.
    restarted = [(host, service) for host, state in _fresh_states(rollout, restarts).items() if state["reachable"]
                 for service in state["services"] if service["service"] in restarts[host]["restarted"]]
    # A service that only enqueues has no runtime to wait for. One reporting nothing after its restart (it failed, or
    # no process runs) has no runtime that can be told to be its own, and no other may stand in for it: the verdict
    # says what its host reported.
    return {"restarted_services": [{**process(service), "runtimes": service["runtimes"]} for host, service in restarted
                                   if host in rollout["pid_hosts"] and service["runtimes"] and service["reports_as"]],
            "expected_new_runtimes": sum(service["runtimes"] for host, service in restarted
                                         if host not in rollout["pid_hosts"])}


def gates_of(rollout: Mapping[str, Any], read: dict[str, Any]) -> dict[str, Any]:
    """The health gates evaluated on a read (the rollout's ``gates`` hold the ``baseline``, the ``queues`` and the
    ``limits``)."""
    return health_gates.evaluate(read.get("health"), **rollout["gates"])


def pause_seconds(rollout: Mapping[str, Any], index: int, read: dict[str, Any]) -> int:
    """How long to watch the batch before the next one (the rollout's canary's pause, then each batch's): 0 when it
    is the last, did not come back or crossed a gate."""
    canary_pause, batch_pause = rollout["canary_pause"], rollout["batch_pause"]
    seconds = float(canary_pause if index == 0 and canary_pause is not None else batch_pause or 0)
    came_back = "new_runtimes" in read and len(read["new_runtimes"]) >= read.get("expected_new_runtimes", 0)
    if seconds <= 0 or index + 1 >= len(rollout["batches"]) or not came_back or gates_of(rollout, read)["crossed"]:
        return 0
    return int(-(-seconds // 1))


def _fresh_states(rollout: Mapping[str, Any], restarts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each host of the batch's state as its restart reported it (unreachable: every service unread)."""
    services = {state["host"]: state["services"] for state in rollout["hosts"]}
    # The settings host_state reads: the host's services, and what each declares (services._declared).
    return {host: host_state({"host": host, "services": [service["service"] for service in services[host]], **{
        setting: {service["service"]: service[key] for service in services[host]}
        for setting, key in (("service_queues", "queues"), ("service_runtimes", "runtimes"))}}, result)
        for host, result in restarts.items()}


def updated_hosts(rollout: Mapping[str, Any], restarts: dict[str, Any]) -> list[dict[str, Any]]:
    """The host states, with what each host of the batch reported after its restarts (``restarts``: each host of
    the batch -> its restart's result)."""
    by_host = {state["host"]: state for state in rollout["hosts"]}
    for host, state in _fresh_states(rollout, restarts).items():
        if restarts[host].get("unreachable"):
            by_host[host] = state
        elif state["reachable"]:
            fresh = {service["service"]: service for service in state["services"]}
            by_host[host] = dict(by_host[host], clock=state["clock"], services=[
                fresh.get(service["service"], service) for service in by_host[host]["services"]])
    return list(by_host.values())
