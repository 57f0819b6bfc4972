# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the change window's phases read, and what its summary and its record make of it.

The phases hand on their reads as registered results (``WindowReads``, vars/main.yml's
``_enqueue_shards_reads``): the queues before the change, the change's result
(the queues right after it), the read the pickup makes when no change ran
before it, the waits' last reads, and the read after a stop. The last read of
each queue is the newest of them that ran; the summary (``window``) and the
record (``window_record``) are made from it, with the rollout's state
(rollout.state) for the inventory's services.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from ansible_collections.awa.operations.plugins.module_utils.info.result import QueueView
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import backout, record, summary, verdicts
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.state import Rollout, Verdict


class WindowReads(TypedDict, total=False):
    """The phases' reads (a registered result each; None, or a skipped result, when it did not run): preflight's
    (``before``), the change's (``change``: its ``observed`` is the queues right after it), the pickup's when no
    change ran (``now``), the waits' (``converged``, ``drained``) and the record's after a stop (``at_stop``)."""

    before: dict[str, Any] | None
    change: dict[str, Any] | None
    now: dict[str, Any] | None
    converged: dict[str, Any] | None
    drained: dict[str, Any] | None
    at_stop: dict[str, Any] | None


class WindowSummary(TypedDict):
    """The summary's lines, and its verdict (None in check mode: nothing was waited for)."""

    lines: list[str]
    verdict: Verdict | None


def _read(reads: WindowReads, name: str) -> Mapping[str, Any]:
    value = reads.get(name)
    return value if isinstance(value, Mapping) else {}


def after_change(reads: WindowReads) -> dict[str, Any]:
    """The queues right after the change: the change's result carries them; the pickup's read stands in when no
    change ran before it (the rollout entry point); {} when neither ran."""
    if reads.get("change") is not None:
        return dict(_read(reads, "change").get("observed") or {})
    return dict(_read(reads, "now"))


def last_read(reads: WindowReads) -> dict[str, Any]:
    """The last read of the queues: the drain wait's, else the convergence wait's, else (check mode, or an entry
    point without the waits) the read with the change; {} when none ran (a run started past them)."""
    for candidate in (_read(reads, "drained"), _read(reads, "converged"), after_change(reads)):
        if "queues" in candidate:
            return dict(candidate)
    return {}


def last_views(reads: WindowReads) -> dict[str, QueueView]:
    """Each queue as last read: the read with the change, updated by each wait's read after it."""
    return {**after_change(reads).get("queues", {}), **_read(reads, "converged").get("queues", {}),
            **_read(reads, "drained").get("queues", {})}


def inventory(rollout: Rollout | None, read: Mapping[str, Any]) -> dict[str, Any]:
    """The producer hosts' services as the rollout last saw them (none without a rollout), with the read's
    runtimes: the summary's "N of M" and the window's record (summary.queue_inventory)."""
    return {"hosts": rollout["hosts"] if rollout else [], "runtimes": read.get("runtimes") or [],
            "pid_hosts": rollout["pid_hosts"] if rollout else [],
            "queues": rollout["concerned_queues"] if rollout else None}


def window(reads: WindowReads, *, rollout: Rollout | None, queues: list[dict[str, Any]], check_mode: bool, cli_args: dict[str, Any] | None) -> WindowSummary:
    """The summary of the window from its last reads: the table with the window's times and back-out, and (a real
    run) whether it is done - every queue on the count asked, converged, every service of the inventory done."""
    read, views = last_read(reads), last_views(reads)
    services = inventory(rollout, read)
    back_out = backout.backout_command(queues, read, cli_args, changes=reads.get("change") is not None)
    change = reads.get("change")
    lines = summary.summary(queues, views=views, change=change, check_mode=check_mode,  # type: ignore[arg-type]
                            inventory=services, window=record.times_text(_read(reads, "before").get("read_at"),
                                                                         read.get("read_at")),
                            backout=back_out)
    if check_mode:
        return {"lines": lines, "verdict": None}
    inventory_verdict = None if not any(host["services"] for host in services["hosts"]) else verdicts.inventory_verdict(
        services["hosts"], read=read, pid_hosts=services["pid_hosts"],
        queues=services["queues"], backout=back_out)
    verdict = summary.window_verdict(queues, views=views, inventory_verdict=inventory_verdict)
    return {"lines": lines, "verdict": {"ok": verdict["ok"], "message": verdict["message"]}}


def window_record(reads: WindowReads, *, rollout: Rollout | None, queues: list[dict[str, Any]],
                  verdict: dict[str, Any] | None, stopped: record.StopRecord | None,
                  started_past: bool, check_mode: bool, written: dict[str, Any] | None,
                  cli_args: dict[str, Any] | None, step: str = record.END) -> dict[str, Any]:
    """The window's record (record.window_record) where its queues stand now: the read after a stop when it ran,
    else the summary's last read."""
    at_stop = _read(reads, "at_stop")
    read = dict(at_stop) if "queues" in at_stop else last_read(reads)
    return record.window_record(
        queues, views={**last_views(reads), **at_stop.get("queues", {})}, read=read, change=reads.get("change"),
        rollout=rollout, preflight=reads.get("before"), inventory=inventory(rollout, read),
        verdict=verdict, stopped=stopped, started_past=started_past, check_mode=check_mode,
        backout=backout.backout_command(queues, read, cli_args, changes=reads.get("change") is not None),
        written=written, step=step)
