# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling restart's state: one record, made by the plan and carried on by every batch.

The role's tasks hold it as the fact ``_enqueue_shards_rollout`` (Ansible
keeps a fact as plain dicts and lists, so the record is a TypedDict): the
plan, fixed once made (the batches, the hosts judged by pid, the settings a
batch reads, the back-out); what is done, which each batch carries on (the
hosts as they last reported, the runtimes seen, the hosts gone, the services
restarted, each batch's verdict); and, apart, what is only for display. Two
functions over it make the pickup's steps: ``plan`` and ``after_batch``
(what one batch restarts and waits for is rollout.batch's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ansible_collections.awa.operations.plugins.module_utils.info.result import StateRead
from ansible_collections.awa.operations.plugins.module_utils.change.result import EnqueueShardsResult
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import backout, batch, estimate, restarts, services, verdicts


# The task a batch's stop names (the window's outcome, stopped_at): the batch's step on the database in 5_pickup_batch.yml.
STOPPED_AT_BATCH = "Batch | wait for the runtimes of the services it restarted, watch it for its pause, and judge it"


class _Verdict(TypedDict):
    ok: bool
    message: str


class Verdict(_Verdict, total=False):
    """Whether the rollout may go on, and why (verdicts); a batch's also when it was judged (the database's clock)
    and its seconds since the batch before it (or the plan) - what the next window's estimate reads."""

    read_at: str
    seconds: float


class _Asked(TypedDict):
    """What the rollout is asked that its state keeps for every batch: how many may fail, and how long to watch."""

    max_fail_percentage: float
    canary_pause: float | None
    batch_pause: float | None


class Rollout(_Asked):
    """The rollout's state (the module's docstring)."""

    # The plan, fixed once made: whom each batch restarts ([host, service]) and its hosts, what stops the rollout
    # before any restart, the services of hosts left out, the hosts whose runtimes are told apart by pid, the queues
    # the change concerns and the services it leaves untouched, and what every batch reads: how long to watch it
    # (_Asked), and its health gates: each reading of the gates' ``queues`` against the one before the change
    # (``baseline``), and its limit (``limits``).
    batches: list[list[list[str]]]
    batch_hosts: list[list[str]]
    problems: list[str]
    skipped: list[str]
    pid_hosts: list[str]
    concerned_queues: list[str]
    untouched: list[str]
    gates: dict[str, Any]
    # When the plan's read (the queues right after the change) was taken, by the database's clock.
    read: str
    backout: str
    # What is done: each host as it last reported, every runtime seen so far, the hosts gone, the services restarted
    # (host/service) and each batch's verdict.
    hosts: list[dict[str, Any]]
    known_runtimes: list[str]
    gone: list[str]
    restarted: list[str]
    verdicts: list[Verdict]
    # Only for display: what the plan prints (its task's message: ``headline`` and ``lines``), says when it refuses
    # (``refusal``), and what the window's report keeps (``detail``).
    shown: dict[str, Any]


class RolloutSettings(_Asked):
    """What the rollout is asked: the role's variables the plan and the batches read (5_pickup.yml)."""

    queues: list[dict[str, Any]]
    pickup: str
    batch_size: object
    # The window's timing, for its estimate (rollout.estimate): the pauses (_Asked), timeouts, the report directory.
    restart_timeout: float
    converge_timeout: float
    drain_timeout: float
    report_dir: str
    limits: dict[str, Any]
    check_mode: bool


class StopRecord(TypedDict):
    """What stopped a window: the task that failed, its message, the hosts it failed on (record.stop)."""

    task: str | None
    message: str
    hosts: list[str]


class Window(TypedDict):
    """What the plays of a change window share (the fact ``_enqueue_shards_window_state`` on localhost): the
    rollout's state once planned, and what stopped the window - a batch's verdict, or a task that failed after the
    change (StopRecord) - once something did."""

    rollout: Rollout | None
    stop: StopRecord | None


def plan(hosts: Sequence[Sequence[dict[str, Any]]], *, read: StateRead, change: EnqueueShardsResult | None,
         before: Mapping[str, Any] | None, settings: RolloutSettings, cli_args: dict[str, Any] | None) -> Rollout:
    """The rollout's state before its first batch, from each play host's settings (validation), its probe (the
    reach) and its read after its environment file was written (``hosts``: the three of each, in play order; a host
    left out since the reach keeps its probe's why); ``read`` is the queues right after the change, ``before``
    preflight's read (the gates' baseline)."""
    states = [services.host_state(host, probe if found.get("skipped") else found) for host, probe, found in hosts]
    made = restarts.restart_plan(states, read=read, change=change, settings=settings)
    lowered = made.pop("lowered")
    back_out = backout.backout_command(settings["queues"], read, cli_args, changes=change is not None)
    made["shown"]["refusal"] = (f"Nothing was restarted: {' | '.join(made['problems'])}. "
                                f"{'' if settings['check_mode'] else back_out}")
    # Said again, after the headline, only when the plan restarts fewer batches than the estimate before the change
    # counted (a re-run).
    every_host = estimate.every_host_batches([host[0] for host in hosts], settings["batch_size"])
    if made["batches"] and len(made["batches"]) != every_host:
        made["shown"]["lines"].insert(1, estimate.estimate(len(made["batches"]), settings, lowered)["line"])
    # What every batch reads: the pauses, the share of hosts that may fail (_Asked), and the gates.
    return {**made, **{key: settings[key] for key in ("max_fail_percentage", "canary_pause", "batch_pause")},  # type: ignore[typeddict-item]
            "read": read["read_at"], "backout": back_out, "restarted": [], "verdicts": [],
            "gates": {"baseline": before.get("health") if before else None,
                      "queues": [entry["queue"] for entry in settings["queues"]], "limits": settings["limits"]}}


def after_batch(window: Window, restarts_by_host: Mapping[str, Any], reads: Sequence[Mapping[str, Any] | None]) -> Window:
    """The window's state after its next batch (batch.next_batch; ``restarts_by_host``: every play host's restart):
    the host states with what each host reported after its restarts, and the batch's verdict last of its
    ``verdicts``, judged on its last read of ``reads`` that ran (its wait, then the watch after its pause), with the
    read's time and its seconds since the batch before it (or the plan): what the next window's estimate reads. A
    batch whose verdict fails stops the window."""
    rollout: Rollout = window["rollout"]  # type: ignore[assignment]
    index, ran = batch.next_batch(rollout, restarts_by_host)
    read = dict([found for found in reads if found and not found.get("skipped")][-1])
    done = batch.restart_outcomes(rollout, index, ran)
    # The services restarted so far (host/service): the window's record says them, and those left.
    judged: Rollout = {**rollout, "hosts": batch.updated_hosts(rollout, ran), "known_runtimes": list(dict.fromkeys(
        rollout["known_runtimes"] + [runtime["instance_id"] for runtime in read.get("runtimes", [])])),
        "gone": sorted({*rollout["gone"], *done["unreachable"]}), "restarted": rollout["restarted"] + done["restarted"]}
    verdict = verdicts.batch_verdict(judged, index, done, read, batch.gates_of(rollout, read))
    # A batch's seconds count from the last read that judged a batch before it, or from the plan's read.
    times = [rollout["read"], *(earlier.get("read_at") for earlier in rollout["verdicts"])]
    since = [restarts.db_time(time) for time in times if time]
    if read.get("read_at") and since:
        verdict.update(read_at=read["read_at"], seconds=round(restarts.db_time(read["read_at"]) - since[-1], 3))
    stopped: StopRecord | None = None if verdict["ok"] else {"task": STOPPED_AT_BATCH, "message": verdict["message"],
                                                             "hosts": sorted(batch.batch_services(rollout, index))}
    judged["verdicts"] = [*rollout["verdicts"], verdict]  # type: ignore[list-item]
    return {"rollout": judged, "stop": window["stop"] or stopped}
