# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the rollout of the role enqueue_shards may go on: hosts at the start, each batch, the inventory at the end.

Every verdict is ``ok`` and one ``message``. A stop names what stopped it
(the hosts and services, the gate with its reading and limit) and, once the
change is committed, ends with the command that backs it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.wording import names_text
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import match
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.restarts import unreachable_message
from ansible_collections.awa.operations.plugins.module_utils.producer.services import (
    MISSING,
    RUNNING,
    UNKNOWN,
    configuration_problems,
)
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.services import (
    failed_before_reading,
    read_error,
    service_problem,
    unreachable_state,
)

COMMITTED = ("The new count is committed: the runtimes restarted so far use it, the others keep the old count until "
             "they restart.")
RE_RUN = ("run the playbook again: it changes nothing more and restarts only the services that do not run the count "
          "yet")


PROGRAM_FIX = ("correct enqueue_shards_restart_command or enqueue_shards_status_command for this host, or install "
               "the program there (one named without a folder is looked up on the PATH shown)")


def _host_refusals(settings: dict[str, Any], probe: dict[str, Any], restarts: bool) -> list[str]:
    """Why this host's services cannot be restarted as configured, from what the host answered (nothing when they
    can): the input (no way to restart, a unit systemd does not know), then what the host could not run."""
    host, method = settings["host"], probe.get("method")
    configured = configuration_problems(settings["restart_method"], probe.get("service_manager") or "unknown",
                                        settings["restart_command"], restarts and bool(settings["services"]))
    problems = [(service["state"] == MISSING, text) for service in probe.get("services", [])
                for text in [service_problem(host, service, method)] if text]
    invalid = configured + [text for missing, text in problems if missing]
    # Where the restart can be asked at all: the programs the module looked up before the restart it was asked to
    # check, then each service it could not read.
    cannot_run = [] if not restarts or configured else [
        f"{host} ({names_text(settings['services'])}): {problem}; {PROGRAM_FIX}" for problem in probe.get("problems", [])
    ] + [text for missing, text in problems if not missing]
    return ([f"Invalid input for {host}, nothing was changed: {' | '.join(invalid)}"] if invalid else []) + (
        [f"{host} cannot restart its producer services as configured, nothing was changed: " + " | ".join(cannot_run)]
        if cannot_run else [])


def reachability(hosts: list[dict[str, Any]], probes: list[dict[str, Any]], asked: Mapping[str, Any]) -> dict[str, Any]:
    """At the start, before anything is changed: may the change window go on without the hosts it cannot reach,
    can every host that answered restart its services as configured, and could its environment file be written?

    ``hosts`` are the hosts' settings (input_rules.host_settings), ``probes``
    their awa_producer_services results, in the same order: a check-mode run
    asked to restart every service when ``asked``'s pickup is restart, which
    looks up the programs of the restart and status commands and reads every
    service with them; ``asked``'s max_fail_percentage lets it go on without
    hosts that do not answer (rollout.state.RolloutSettings).
    """
    restarts = asked["pickup"] == "restart"
    max_fail_percentage = max_fail_percentage_problem(asked["max_fail_percentage"])
    if isinstance(max_fail_percentage, str):
        return {"ok": False, "message": f"Invalid input, nothing was changed: {max_fail_percentage}"}
    gone, invalid = [], []
    by_way: dict[str, list[str]] = {}
    for settings, probe in zip(hosts, probes):
        unwritable, error = ((probe or {}).get("env_file") or {}).get("error"), read_error(probe)
        if unwritable:
            # The reach checks the environment file in check mode: it would fail after the change, so it stops here.
            invalid.append(f"Invalid input for {settings['host']}, nothing was changed: its environment file "
                           f"{unwritable}; correct enqueue_shards_env_file, enqueue_shards_env_file_owner or "
                           "enqueue_shards_env_file_group for this host, or prepare the host")
        elif failed_before_reading(probe):
            # The host answered, but its module failed before it read anything (no Python, say).
            invalid.append(f"{settings['host']} answered, but awa.operations.awa_producer_services failed there before "
                           f"it read its services, nothing was changed: {str(probe.get('msg') or 'no message').strip()}. "
                           "Make the module run there (the message says what is missing), then run the playbook again")
        elif error is not None:
            gone.append(unreachable_state(settings, error))
        else:
            invalid += _host_refusals(settings, probe, restarts)
            # What the reach proved on a host that answered: how it restarts and reads its services.
            way = ("systemd knows every unit" if probe["method"] == "systemd" else "the restart command's program is found"
                   + (" and the status command reads every service" if settings["status_command"].strip() else ""))
            if restarts and settings["services"]:
                by_way.setdefault(way, []).append(settings["host"])
    if invalid:
        return {"ok": False, "message": " || ".join(invalid)}
    if not gone:
        proved = "; ".join(f"{way} on {names_text(names)}" for way, names in by_way.items())
        checked = f" and can restart their services: {proved}" if proved else ""
        return {"ok": True, "message": f"All {len(hosts)} producer host(s) answered{checked}."}
    if len(gone) * 100 > max_fail_percentage * len(hosts):
        gone_message = unreachable_message(gone, len(hosts), max_fail_percentage)
        return {"ok": False, "message": f"Nothing was changed: {gone_message}."}
    listed = "; ".join(f"{state['host']}: {', '.join(s['service'] for s in state['services']) or 'no service'}"
                       for state in gone)
    return {"ok": True, "message": f"Going on without {len(gone)} of {len(hosts)} producer host(s) "
                                   f"(within enqueue_shards_max_fail_percentage {max_fail_percentage:g}); their "
                                   f"services are not checked or restarted, and the change window cannot be "
                                   f"converged for the inventory: {listed}."}


def max_fail_percentage_problem(value: object) -> float | str:
    """The percentage as a number, or why it is not one."""
    try:
        share = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        share = -1.0
    if isinstance(value, bool) or not 0 <= share <= 100:
        return ("enqueue_shards_max_fail_percentage must be a percentage of the producer hosts from 0 to 100, got "
                f"{value!r}")
    return share


def _service_problem(name: str, failure: str | None, state: dict[str, Any] | None, status: str | None,
                     wait_failed: bool) -> str | None:
    """Why one service of a batch did not come back, if its own evidence says so. ``status`` is its match's where
    its host's runtimes are told apart by pid (None elsewhere): there a service that cannot be told to run has no pid
    the batch's wait could wait for."""
    if failure is not None:
        return f"{name} did not come back: the restart failed: {failure}"
    if state is not None and state["state"] not in (RUNNING, UNKNOWN):
        return f"{name} did not come back: it is {state['state']} ({state['detail']}) after its restart"
    if state is not None and state["state"] == UNKNOWN and (wait_failed or status is not None):
        return f"{name} did not come back: it cannot be told to run after its restart ({state['detail']})"
    pid = (state or {}).get("main_pid")
    if status == match.NO_RUNTIME:
        return f"{name} did not come back: {match.WHY_NOT_DONE[status].format(pid=pid)} - {match.HANGS}"
    if status == match.STALE_RUNTIMES:
        return f"{name} did not come back: its runtime (pid {pid}) does not run the count"
    return None


def batch_verdict(rollout: Mapping[str, Any], index: int, done: dict[str, Any], read: dict[str, Any],
                  gates: dict[str, Any]) -> dict[str, Any]:
    """Did every service of batch ``index`` come back, and do the health gates allow the next one?

    ``rollout`` is the rollout's state after the batch (rollout.state.after_batch: the host states read after it,
    every host left out so far, unreachable now or before, in ``gone``), ``done`` what the batch's restarts did
    (rollout.batch.restart_outcomes), ``read`` the info module's last read of the batch (its wait, or the read after
    the pause), ``gates`` the evaluated health gates.
    """
    states, batch, gone = rollout["hosts"], rollout["batches"][index], rollout["gone"]
    count, hosts_total, max_fail_percentage = len(rollout["batches"]), len(states), rollout["max_fail_percentage"]
    state_of = {f"{service['host']}/{service['service']}": service for host in states for service in host["services"]}
    matched = match.match([host for host in states if host["reachable"]], read.get("runtimes", []),
                          pid_hosts=rollout["pid_hosts"])
    status_of = {f"{entry['host']}/{entry['service']}": entry["status"] for entry in matched["services"]
                 if entry["judged_by"] == match.BY_PID}
    expected = sum(state_of.get(name, {}).get("runtimes", 1) for name in done["restarted"])
    # The batch-wide check: as many new live, healthy runtimes as restarted services times runtimes each.
    new = read.get("new_runtimes")
    healthy = len(new or [])
    wait_problem = (f"the wait for the new runtimes failed: {read.get('msg', 'no result')}" if new is None
                    else f"{healthy} of {expected} restarted runtimes are live and healthy in Awa within "
                    "enqueue_shards_restart_timeout (and any batch pause)" if healthy < expected else None)
    problems = [problem for host, service in batch if host not in gone for name in [f"{host}/{service}"]
                for problem in [_service_problem(name, done["failed"].get(name), state_of.get(name), status_of.get(name),
                                                 wait_problem is not None)] if problem]
    problems += [*filter(None, [wait_problem]), *gates["crossed"]]
    readings = gates["text"]
    left_out = [f"{host}/{service}" for later in rollout["batches"][index:] for host, service in later if host in gone]
    if left_out:
        text = (f"{len(gone)} of {hosts_total} producer host(s) unreachable ({', '.join(gone)}): "
                f"{', '.join(left_out)} not checked or restarted")
        if len(gone) * 100 > max_fail_percentage * hosts_total:
            problems.append(text + f", over enqueue_shards_max_fail_percentage {max_fail_percentage:g}")
        else:
            readings += f"; going on without them ({text}, within enqueue_shards_max_fail_percentage " \
                        f"{max_fail_percentage:g})"
    if not problems:
        return {"ok": True, "message": f"Batch {index + 1} of {count} is back: {healthy} of {expected} restarted "
                                       f"runtimes live and healthy; {readings}."}
    advice = ("The database shows what the change may be doing: look at the producers' logs and the failed jobs, "
              f"then back out, or once it is understood {RE_RUN}" if gates["crossed"]
              else "Fix the services named (systemctl status and journalctl -u on their hosts, or your service "
              f"manager's logs), or bring the hosts back, then {RE_RUN}")
    members = ", ".join(f"{host}/{service}" for host, service in batch)
    message = (f"Rollout stopped at batch {index + 1} of {count} ({members}): " + "; ".join(problems) + ". "
               f"Health readings: {readings}. No later batch was restarted. {COMMITTED} {advice}. {rollout['backout']}")
    return {"ok": False, "message": message}


def inventory_verdict(matched: dict[str, Any], backout: str) -> dict[str, Any]:
    """At the end: is every service of the inventory that the change concerns done - its runtimes live on the count?
    ``matched`` is the inventory's match (summary.queue_inventory, the plan's queues), the one the summary prints."""
    missing = [f"{entry['host']}/{entry['service']} ({why.format(pid=entry['main_pid'], state=entry['state'])})"
               for entry in matched["services"] if entry["status"] not in match.DONE and entry["state"] != "stopped"
               for why in [match.WHY_NOT_DONE.get(entry["status"], entry["status"])]]
    text = f"{match.inventory_text(matched)} inventory runtimes live on the count"
    if not missing and matched["on_count"] >= matched["expected"]:
        return {"ok": True, "message": f"Every service of the inventory is done: {text}; "
                                       f"{match.how_judged(matched, brief=True)}."}
    return {"ok": False, "message": (
        f"The change window is not done for the inventory: {text}; not done: {', '.join(missing) or 'unknown'}; "
        f"{match.how_judged(matched)}. Bring back the hosts and services named, then {RE_RUN}. {backout}")}
