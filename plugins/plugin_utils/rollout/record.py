# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The change window's record, on every ending after the change: its JSON report and the outcome it publishes.

A window ends at its summary (done, or not done for the inventory), or
stops before it: a batch that did not come back, a wait that timed out, a
failure in between. Whichever it is, the record says what was done and what
is left - each queue's count before and after, converged and drained; the
services restarted, skipped and left - with the back-out and the window's
start and end, in two shapes declared here once (style item 16):

* ``WindowReport``, the run's JSON report on the controller
  (enqueue_shards_report_dir): everything, for the change ticket;
* ``WindowOutcome``, published with ansible.builtin.set_stats as
  ``awa_enqueue_shards_outcome``, the value an AWX workflow's next node
  gates on (docs/execution_environment.md; docs/public_interface.yml lists
  its keys). It holds no secret: the back-out masks the run's inline ones.

The window's times are the database's clock: ``started`` when preflight read
the queues before the change, ``ended`` at the last read.

Both are made from what the phases read (``WindowReads``, vars/main.yml's
``_enqueue_shards_window_reads``): the queues before the change, the
change's result (the queues right after it), the pickup's read when no change
ran before it, the waits' last reads, and the read after a stop. The last
read of each queue is the newest of them that ran; the summary
(``window_summary``) and the record (``window_record``) are made from it,
with the window's state (rollout.state.Window) for the inventory's services
and what stopped it, and what the rollout is asked (rollout.state.RolloutSettings)
for the queues and check mode. The reads up to the change make the
rollout's plan (``rollout_plan``). The back-out repeats the command line that
runs the role: Ansible's context.CLIARGS, read here where the plan, the
summary and the record need it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

from ansible import context

from ansible_collections.awa.operations.plugins.module_utils.wording import DETAILED_QUEUES, LISTED, names_text
from ansible_collections.awa.operations.plugins.module_utils.change.result import queue_changes
from ansible_collections.awa.operations.plugins.module_utils.info.drain_time import seconds_text
from ansible_collections.awa.operations.plugins.module_utils.info.result import QueueView
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import match, state, summary, verdicts
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.backout import backout_command, previous_counts
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.state import RolloutSettings, StopRecord, Verdict, Window

# The task whose verdict ends a window that is not done (tasks/phases/7_summary.yml).
SUMMARY_TASK = "Summary | stop unless every queue runs the count asked, converged, and every service of the inventory is done"
# The steps after which a window's record is written (window_record's ``step``): the change, each batch, the end.
CHANGE, BATCH, END = "the change", "a batch", "the end"
# The set_stats key: outside the role's enqueue_shards_* names, so a workflow's next run of the role, which receives
# it as an extra variable, does not take it for a variable of its own.
OUTCOME_KEY = "awa_enqueue_shards_outcome"


class QueueOutcome(TypedDict):
    """One queue at the window's end: the count asked, before and in force (None: unknown, or its physical queues
    differ), converged (every expected runtime live on it) and drained (None: the last read had no depths)."""

    asked: int
    before: int | None
    after: int | None
    converged: bool
    drained: bool | None
    # The recorded change (its ledger id and time) that set the count this window found already so - an earlier run
    # of it, cut short, say: ``before`` is the count that change switched from. None when this window set it.
    set_by: dict[str, Any] | None


class ServicesOutcome(TypedDict):
    """The producer services (``host/service``) the window restarted, skipped (not checked or restarted: their host
    was unreachable, or its run failed before it read them) and left: planned to restart and not done - not
    restarted (a later batch, a restart that failed), or restarted without a live runtime on the count."""

    restarted: list[str]
    skipped: list[str]
    left: list[str]


class _BackoutQueueAlways(TypedDict):
    queue: str
    shards: int


class BackoutQueue(_BackoutQueueAlways, total=False):
    """An entry of enqueue_shards_queues that puts a queue's previous count back."""

    stripes: int


class WindowOutcome(TypedDict):
    """What the window publishes with set_stats (``OUTCOME_KEY``)."""

    # Every queue on the count asked, converged (drained after a lowering), every service of the inventory done.
    done: bool
    check_mode: bool
    # The task that stopped the window; None when it ran to its end.
    stopped_at: str | None
    # The step after which this record was written: "the change", "batch N of M", or "the end" (the record is written
    # as the window goes, so an interrupted window leaves the record of its last step).
    last_step: str
    message: str
    queues: dict[str, QueueOutcome]
    services: ServicesOutcome
    backout: str
    backout_queues: list[BackoutQueue]
    # ISO 8601, the database's clock; None when not read (a run started past preflight); and the seconds between.
    started: str | None
    ended: str | None
    total_seconds: float | None


class WindowReport(TypedDict):
    """The run's JSON report (enqueue_shards_report_dir): the outcome, then every queue, service and verdict."""

    check_mode: bool
    outcome: WindowOutcome
    stopped: StopRecord | None
    # Each queue's entry (``requested``), its ``summary`` row, its ``change``, its last ``read`` and its ``inventory``
    # match.
    queues: dict[str, dict[str, Any]]
    preflight: dict[str, Any] | None
    plan: dict[str, Any] | None
    services: list[dict[str, Any]] | None
    batches: list[Verdict] | None
    inventory: dict[str, Any] | None


def _failure_text(result: Mapping[str, Any]) -> str:
    """A failed task's message; a loop's, from its failed items."""
    items = [str(item.get("msg", "")).strip() for item in result.get("results") or []
             if isinstance(item, Mapping) and item.get("failed")]
    return "; ".join(dict.fromkeys(text for text in items if text)) or str(result.get("msg") or "no message").strip()


def stop(hosts: list[str], hostvars: Mapping[str, Mapping[str, Any]]) -> StopRecord:
    """What stopped the window, from the ``ansible_failed_task`` and ``ansible_failed_result`` Ansible gives each
    play host that failed in a block with a rescue: the failed task, its messages (said once for the hosts that
    share one), and those hosts. Only the messages are kept: a failed result may carry a module's arguments."""
    failed = [(host, task, result) for host in hosts
              for task, result in [(hostvars[host].get("ansible_failed_task"), hostvars[host].get("ansible_failed_result"))]
              if isinstance(task, Mapping) and isinstance(result, Mapping)]
    if not failed:
        return {"task": None, "hosts": [], "message": (
            "A host stopped answering during the window and Ansible stopped running tasks on it")}
    by_message = summary.grouped((_failure_text(result), host) for host, dummy, result in failed)
    return {"task": str(failed[0][1].get("name") or "an unnamed task"), "hosts": [each[0] for each in failed],
            "message": next(iter(by_message)) if len(by_message) == 1 else " | ".join(
                f"{names_text(names)}: {text}" for text, names in by_message.items())}


def services_outcome(rollout: Mapping[str, Any] | None, matched: dict[str, Any] | None) -> ServicesOutcome:
    """The services restarted so far, skipped, and left: planned to restart and not done - not restarted, or
    (``matched``: the inventory's runtimes at the end, rollout.match) restarted without a live runtime on the count."""
    rollout = rollout or {}
    restarted = list(rollout.get("restarted", []))
    live = None if matched is None else {f"{entry['host']}/{entry['service']}" for entry in matched["services"]
                                         if entry["status"] in match.DONE}
    planned = [f"{host}/{service}" for batch in rollout.get("batches", []) for host, service in batch]
    return {"restarted": restarted, "skipped": list(rollout.get("skipped", [])),
            "left": [name for name in planned if name not in restarted or live is not None and name not in live]}


def times_text(started: str | None, ended: str | None) -> str:
    """``The window: 2026-12-05 10:15:02 -> 10:21:40 UTC (7 min, the database's clock).``"""
    if not ended:
        return "The window's end was not read."
    last = summary.utc(ended)
    if not started:
        return (f"The window ended {last:%Y-%m-%d %H:%M:%S} UTC (the database's clock); its start was not read: "
                "this run did not read the queues before the change.")
    first = summary.utc(started)
    end = f"{last:%H:%M:%S}" if last.date() == first.date() else f"{last:%Y-%m-%d %H:%M:%S}"
    return (f"The window: {first:%Y-%m-%d %H:%M:%S} -> {end} UTC "
            f"({seconds_text((last - first).total_seconds())}, the database's clock).")


# What the phases left (a registered result each; None, or a skipped result, when it did not run): preflight's read
# (``before``), the change's (``change``: its ``observed`` is the queues right after it), the pickup's when no change
# ran (``now``), the waits' (``converged``, ``drained``); for the record, the read after a stop (``at_stop``), the
# summary's verdict (``verdict``), the report task's result once it ran (``written``), the step after which it is
# written (``step``: CHANGE, BATCH - the last one judged - or END) and whether Validate's facts are there
# (``validated``: false when the run started past it, --start-at-task).
WindowReads = Mapping[str, Any]


def _read(reads: WindowReads, name: str) -> Mapping[str, Any]:
    value = reads.get(name)
    return value if isinstance(value, Mapping) else {}


def after_change(reads: WindowReads) -> dict[str, Any]:
    """The queues right after the change: the change's result carries them; the pickup's read stands in when no
    change ran before it (the rollout entry point); {} when neither ran."""
    return dict(_read(reads, "now") if reads.get("change") is None else _read(reads, "change").get("observed") or {})


def rollout_plan(reads: WindowReads, hosts: list[list[dict[str, Any]]], asked: RolloutSettings) -> Window:
    """The window's state before its first batch: the rollout's plan (rollout.state.plan), from the queues read up to
    the change (``before``, ``change``, ``now``) and each play host's own reads, in play order (``hosts``: its
    settings, its reach and its read after its environment file was written) - and no stop."""
    return {"rollout": state.plan(hosts, read=after_change(reads), change=reads.get("change"),  # type: ignore[arg-type]
                                  before=reads.get("before"), settings=asked, cli_args=dict(context.CLIARGS)),
            "stop": None}


def last_read(reads: WindowReads) -> tuple[dict[str, Any], dict[str, QueueView]]:
    """The last read of the queues - the read after a stop (``at_stop``) when it ran, else the drain wait's, else
    the convergence wait's, else (check mode, or an entry point without the waits) the read with the change; {}
    when none ran (a run started past them) - and each queue as last read: the read with the change, updated by
    each read after it."""
    candidates = [_read(reads, name) for name in ("at_stop", "drained", "converged")] + [after_change(reads)]
    views = {name: view for candidate in reversed(candidates) for name, view in candidate.get("queues", {}).items()}
    return next((dict(candidate) for candidate in candidates if "queues" in candidate), {}), views


def _ending(reads: WindowReads, window: Window, asked: RolloutSettings) -> tuple[
        dict[str, Any], dict[str, QueueView], dict[str, Any] | None, str, dict[str, tuple[Any, QueueOutcome, Any]]]:
    """What the summary and the record are made of: the last read and each queue's (last_read); the inventory's
    match for every queue - the producer hosts' services as the rollout last saw them (none without a rollout), with
    that read's runtimes; the back-out, with the options of the command line that runs the role (Ansible's
    context.CLIARGS); and each queue at the window's end: its row of the summary's table (summary.queue_row; None
    when it was not read), its QueueOutcome, and what the report keeps of it - its entry, its row, its change, its
    last read and its inventory match."""
    read, views = last_read(reads)
    served = {**cast(Mapping[str, Any], window["rollout"] or {}), "runtimes": read.get("runtimes") or []}
    backout = backout_command(asked["queues"], read, dict(context.CLIARGS), changes=reads.get("change") is not None)
    changes, check_mode, made = queue_changes(reads.get("change")), asked["check_mode"], {}
    header = summary.CHECK_MODE_HEADER if check_mode else summary.SUMMARY_HEADER
    for entry in asked["queues"]:
        name, view, matched = entry["queue"], views.get(entry["queue"]), summary.queue_inventory(entry["queue"], served)
        row, outcome = (None, {"asked": int(entry["shards"]), "before": None, "after": None, "converged": False,
                               "drained": None, "set_by": None}) if view is None else summary.queue_row(
            entry, view, changes.get(name), check_mode, matched)
        made[name] = (row, cast(QueueOutcome, outcome), {
            "requested": entry, "summary": None if row is None else dict(zip(header, row)),
            "change": changes.get(name), "read": view, "inventory": matched})
    return read, views, summary.queue_inventory(None, served), backout, made


def window_summary(reads: WindowReads, window: Window, asked: RolloutSettings) -> dict[str, Any]:
    """The summary of the window from its last reads: its ``lines`` - the table, the inventory's runtimes, each
    queue's own summary lines, then (a real run) the window's start and end and the back-out - and its ``verdict``
    (None in check mode: nothing was waited for): whether it is done, every queue on the count asked, converged,
    every service of the inventory done (summary.window_verdict).

    Past wording.LISTED queues, queues with the same counts and verdict share
    a row (summary.grouped_rows); past wording.DETAILED_QUEUES, each queue's
    own lines are left to the run's report.
    """
    read, views, matched, backout, made = _ending(reads, window, asked)
    queues, check_mode = asked["queues"], asked["check_mode"]
    rows = [row for row, dummy_outcome, dummy_kept in made.values() if row is not None]
    lines = summary.table(summary.CHECK_MODE_HEADER if check_mode else summary.SUMMARY_HEADER,
                          rows if len(rows) <= LISTED else summary.grouped_rows(rows)) + [""]
    lines += [] if check_mode else summary.inventory_lines(matched, read.get("runtimes") or [])
    lines += [line for entry in queues if len(queues) <= DETAILED_QUEUES
              for line in views[entry["queue"]]["summary_lines"]]
    if check_mode:
        return {"verdict": None, "lines": lines + [
            f"{summary.CHECK_MODE_NOTE} \"now\" is what runs now; \"planned\" is what the playbook would set."]}
    # A count this run did not set (it started past the change) is not this run's to back out.
    lines += ["", times_text(_read(reads, "before").get("read_at"), read.get("read_at"))] + (
        [] if summary.count_problems(queues, views) else [backout])
    return {"lines": lines, "verdict": summary.window_verdict(
        queues, views=views, inventory_verdict=verdicts.inventory_verdict(matched, backout) if matched else None)}


def window_record(reads: WindowReads, window: Window, asked: RolloutSettings) -> dict[str, Any]:
    """The window's ``report`` (WindowReport), its ``outcome`` (WindowOutcome) and its last word: ``ok`` - it
    neither stopped nor failed to write its report - and ``message``: after a stop, what stopped it, what is done
    and left, the report and the back-out; otherwise where its report is.

    The queues stand where the read after a stop (``at_stop``) left them when it ran, else at the summary's last
    read; the summary's ``verdict`` (one that fails ends the window as a stop does), the window's state (its
    rollout, and what stopped it: a batch's verdict, or a failure after the change) and what it was asked (its
    queues, check mode) say the rest; ``validated`` false: the run started past Validate (--start-at-task).
    """
    read, views, matched, backout, made = _ending(reads, window, asked)
    queues, check_mode = asked["queues"], asked["check_mode"]
    rollout, stopped, verdict = window["rollout"] or None, window["stop"] or None, reads.get("verdict")
    step, preflight = reads.get("step") or END, reads.get("before")
    # A step as the record names it: a batch by its number among the batches.
    last_step = f"batch {len(rollout['verdicts'])} of {len(rollout['batches'])}" if step == BATCH and rollout else step
    counts_differ = bool(summary.count_problems(queues, views))
    if verdict and not verdict["ok"] and not stopped:
        # The summary's verdict: the window is not done, and ends as a stop does.
        stopped = {"task": SUMMARY_TASK, "message": verdict["message"], "hosts": []}
    if stopped:
        message = stopped["message"]
    elif check_mode:
        message = summary.CHECK_MODE_NOTE
    elif verdict:
        message = verdict["message"]
    elif step != END:
        message = (f"The window had run up to {last_step} when this record was written: if it ends here, the window "
                   f"was interrupted. {summary.RESUME}.")
    else:
        message = ("The rollout ended without the wait: whether the count has taken effect is for the wait entry "
                   "point (or the playbook's summary) to say.")
    started, ended = (preflight or {}).get("read_at"), read.get("read_at")
    outcome: WindowOutcome = {
        "done": bool(verdict) and not stopped and not check_mode, "check_mode": check_mode,
        "stopped_at": stopped["task"] if stopped else None, "last_step": last_step, "message": message,
        "queues": {name: outcome for name, (dummy_row, outcome, dummy_kept) in made.items()},
        "services": services_outcome(rollout, matched), "backout": backout,
        # previous_counts keeps only queue, shards and stripes of each entry.
        "backout_queues": cast("list[BackoutQueue]", previous_counts(queues, read)[0]),
        "started": started, "ended": ended,
        "total_seconds": round((summary.utc(ended) - summary.utc(started)).total_seconds(), 3) if started and ended
        else None}
    report: WindowReport = {
        "check_mode": check_mode, "outcome": outcome, "stopped": stopped,
        "queues": {name: kept for name, (dummy_row, dummy_outcome, kept) in made.items()},
        "preflight": None if preflight is None else {key: preflight.get(key) for key in (
            "summary_lines", "findings", "health", "msg") if key in preflight},
        "plan": None if rollout is None else {
            **{key: rollout.get("shown", {}).get(key) for key in ("headline", "detail")},
            **{key: rollout.get(key) for key in ("batches", "skipped", "problems", "pid_hosts")}},
        "services": None if rollout is None else rollout.get("hosts"),
        "batches": None if rollout is None else rollout.get("verdicts"),
        "inventory": matched}
    # Where the report is, from its task's result (None, or skipped: no report was asked for).
    written = reads.get("written") or {}
    unwritten = bool(written) and not written.get("skipped") and "path" not in written
    where = ("No report was written (enqueue_shards_report_dir is empty)." if not written or written.get("skipped")
             else f"The window's report could not be written: {str(written.get('msg') or 'no message').rstrip('.')}."
             if unwritten else f"The window's report: {written['path']}.")
    if stopped:
        # After a stop: its own message, what was done and what is left, the report, and (unless a queue is not on
        # the count asked: a count this run did not set is not its to back out) the back-out, last, to copy.
        said = stopped["message"].replace(backout, "").strip()
        if reads.get("validated") is False and not counts_differ:
            said = (f"This run started past the window's first phases (--start-at-task), so '{stopped['task']}' "
                    f"lacked what they hand on ({said.rstrip('.')}). Nothing more was done. "
                    f"{summary.RESUME.replace('again', 'again without --start-at-task', 1)}.")
        services = outcome["services"]
        so_far = [f"{label}: {names_text(names)}" for label, names in (
            ("restarted", services["restarted"]), ("not done", services["left"]),
            ("skipped, not checked or restarted", services["skipped"])) if names]
        parts = [said if said.endswith(".") else said + ".", "So far " + "; ".join(so_far) + "." if so_far else "",
                 where, "" if counts_differ else backout]
        last = " ".join(part for part in parts if part)
    else:
        last = f"{where} Its outcome is published as {OUTCOME_KEY} (set_stats)."
    return {"report": report, "outcome": outcome, "ok": not stopped and not unwritten, "message": last}
