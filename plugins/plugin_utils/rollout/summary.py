# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the role enqueue_shards prints: the change, the queues to drain, the summary table and its verdict.

In check mode nothing was changed, so every line says what is planned and
what is true now, never a planned state as if it had happened. With the
producer hosts' services, "N of M" counts the inventory's runtimes live on
the count against what the inventory expects (rollout.match), next to the
runtimes outside it, and "converged" is never said while fewer are live or
a host was left out. The verdict (window_verdict) never says done while a
queue does not run the count asked: a run resumed past the change
(--start-at-task) did not set it.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.wording import DETAILED_QUEUES, counted, names_text
from ansible_collections.awa.operations.plugins.module_utils.change.result import EnqueueShardsResult, QueueChange
from ansible_collections.awa.operations.plugins.module_utils.info.result import ChangeView, QueueView, StateRead
from ansible_collections.awa.operations.plugins.module_utils.info.views import ready_by_shard
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import match

# Over this many shards the table shows a queue's total ready depth instead of one entry per shard.
SHARDS_LISTED = 16
SUMMARY_HEADER = ("queue", "S before -> after", "runtimes on S", "ready jobs by shard", "beyond S",
                  "converged / drained")
# In check mode the counts are the one in force and the one planned.
CHECK_MODE_HEADER = ("queue", "S now -> planned", "runtimes on planned S") + SUMMARY_HEADER[3:]
CHECK_MODE_NOTE = "Check mode: nothing was changed, restarted or waited for."
NOT_DONE = "The change window is not done"
RESUME = ("To resume, run the same command again: it changes nothing already done and restarts only the services "
          "that do not run the count yet; or, once the count asked is set, only the wait (--tags "
          "enqueue_shards_wait,enqueue_shards_summary, or the role's wait entry point)")


def _counts_text(counts: dict[str, Any] | list[Any]) -> str:
    return "/".join(str(value) for value in sorted(set(counts.values() if isinstance(counts, dict) else counts)))


def switches(result: QueueChange) -> bool:
    """Whether a queue's change result switched (in check mode: would switch) the count."""
    return any(previous != result["shards"] for previous in result["previous_shards"].values())


def set_by(result: QueueChange | None, view: QueueView | None) -> ChangeView | None:
    """The recorded change that set the count a change found already so (an earlier run of the window, cut short,
    say); None when this change set it, or no change is recorded."""
    if result is None or result["changed"] or not view:
        return None
    changes = [change for change in view["last_change"].values() if change["to_shards"] == result["shards"]]
    return max(changes, key=lambda change: change["id"]) if changes else None


def _change_outcome(result: QueueChange, check_mode: bool, view: QueueView | None) -> str:
    if not result["changed"]:
        earlier = set_by(result, view)
        return "already so, nothing written" + (
            f" - change #{earlier['id']} set it from {earlier['from_shards']} at {utc(earlier['changed_at']):%Y-%m-%d %H:%M:%S} UTC"
            if earlier else "")
    if check_mode:
        return (f"check mode, would create {result['lanes_created']} lanes and add {result['grants_added']} grants "
                "in one transaction")
    ledger = result.get("ledger")
    return (f"changed in one transaction: {result['lanes_created']} lanes created, {result['grants_added']} grants "
            f"added, recorded as change #{ledger['id'] if ledger else '-'}")


def grouped(pairs: Iterable[tuple[Any, Any]]) -> dict[Any, list[Any]]:
    """Each key's values, in the order the keys first come."""
    groups: dict[Any, list[Any]] = {}
    for key, value in pairs:
        groups.setdefault(key, []).append(value)
    return groups


def change_lines(change: EnqueueShardsResult, queues: list[dict[str, Any]], check_mode: bool) -> list[str]:
    """Two lines per queue: what was done (in check mode, what would be) and the ordering it gives; past
    wording.DETAILED_QUEUES queues, one line per kind of change (the counts and the outcome) and per ordering."""
    results = [(entry, change["queues"][entry["queue"]]) for entry in queues]
    if len(queues) <= DETAILED_QUEUES:
        views = observed["queues"] if (observed := change.get("observed")) else {}
        return [line for entry, result in results for line in (
            f"{entry['queue']}: enqueue_shards {_counts_text(result['previous_shards'])} -> {entry['shards']} on "
            f"{', '.join(result['physical_queues'])} - "
            f"{_change_outcome(result, check_mode, views.get(entry['queue']))}",
            f"  ordering: {result['ordering']}")]
    kinds = grouped(((_counts_text(result["previous_shards"]), entry["shards"], "already so" if not result["changed"]
                      else "would change" if check_mode else "changed"), entry["queue"]) for entry, result in results)
    orderings = grouped((result["ordering"], entry["queue"]) for entry, result in results)
    totals = (("check mode: would create " if check_mode else "in one transaction per queue: created ")
              + f"{sum(result['lanes_created'] for dummy, result in results)} lanes and added "
              f"{sum(result['grants_added'] for dummy, result in results)} grants in all (-v, or the run's report, "
              "has each queue)")
    return ([f"{counted(len(names), 'queue')} ({names_text(names, 3)}): enqueue_shards {before} -> {after} - {outcome}"
             for (before, after, outcome), names in kinds.items()] + [totals]
            + [f"  ordering of {counted(len(names), 'queue')}: {ordering}" for ordering, names in orderings.items()])


def utc(text: str) -> datetime.datetime:
    """An ISO 8601 time (the database's clock, in its zone) in UTC."""
    return datetime.datetime.fromisoformat(text).astimezone(datetime.timezone.utc)


def lowered(view: QueueView) -> bool:
    """Whether the queue's latest recorded change lowered its count: it must drain."""
    return any(change["from_shards"] > change["to_shards"] for change in view["last_change"].values())


def lowered_queues(read: StateRead) -> list[str]:
    """Queues whose latest recorded change lowered the count: they must drain."""
    return [name for name, view in read.get("queues", {}).items() if lowered(view)]


def _ready_cell(view: QueueView) -> str:
    """The table's "ready jobs by shard": each physical queue's (``#n`` before each stripe's)."""
    if "shards" not in view:
        return "not read"
    return " | ".join(text if len(view["physical_queues"]) == 1 else f"#{physical.rsplit('#', 1)[-1]} {text}"
                      for physical in view["physical_queues"]
                      for text in [ready_by_shard(view["shards"], physical, SHARDS_LISTED)]) or "-"


def queue_inventory(queue: str | None, inventory: dict[str, Any] | None) -> dict[str, Any] | None:
    """The inventory's match for one queue, or every queue read (None without the producer hosts' services):
    ``inventory`` is the rollout's state (its ``hosts``, ``pid_hosts`` and ``concerned_queues``) with the last
    read's ``runtimes``."""
    if not inventory or not any(host["services"] for host in inventory.get("hosts") or []):
        return None
    return match.match(inventory["hosts"], inventory["runtimes"], pid_hosts=inventory.get("pid_hosts", []),
                       queue=queue, queues=inventory.get("concerned_queues"))


def queue_row(entry: dict[str, Any], view: QueueView, result: QueueChange | None, check_mode: bool,
              matched: dict[str, Any] | None = None) -> tuple[list[str], dict[str, Any]]:
    """A queue's row of the table, and the facts the window's record keeps of it (record.QueueOutcome), from its
    last read and its change's result (``result``; None when no change ran).

    The counts before are the window's whole move: where an earlier run of it
    (cut short) made the change this one found already so (set_by), the count
    that change switched from; else the change's; else those before its last
    recorded change. Converged is the queue's, and (with the inventory's match)
    every expected runtime live on the count, no host left out. In check mode,
    a count the change would switch is "not yet" restarted.
    """
    earlier = set_by(result, view)
    before = ([earlier["from_shards"]] if earlier else list(result["previous_shards"].values()) if result
              else [recorded["from_shards"] for recorded in view["last_change"].values()])
    done = view["converged"] and (matched is None or (matched["on_count"] >= matched["expected"]
                                                      and not matched["unreachable_hosts"]))
    now, beyond, drained = _counts_text(view["enqueue_shards"]), view.get("depth_beyond_count"), view.get("drained")
    # In check mode, a count the change would switch: every runtime restarts, none is on it yet.
    restarts = check_mode and result is not None and switches(result)
    expected = view["runtimes_live"] if matched is None else matched["expected"]
    runtimes = ((f"0 of {expected} (they restart)" if expected else "0 of 0") if restarts
                else match.inventory_text(matched) if matched
                else f"{view['runtimes_converged']} of {view['runtimes_live']}")
    # The "converged / drained" a read without the lanes does not know drained.
    verdict = ("not yet (check mode)" if restarts
               else " / ".join("yes" if ok else "no" for ok in (done, done and drained)))
    counts = f"{now} -> {entry['shards']}" if check_mode else f"{_counts_text(before) or '?'} -> {now}"
    row = [entry["queue"], counts, runtimes, _ready_cell(view), "unknown" if beyond is None else str(beyond), verdict]
    # The counts before and after, where the physical queues agree on one.
    single = {key: values[0] if len(set(values)) == 1 else None
              for key, values in (("before", before), ("after", list(view["enqueue_shards"].values())))}
    return row, {"asked": int(entry["shards"]), **single, "converged": done,
                 "drained": None if drained is None else drained and done,
                 "set_by": None if earlier is None else {"id": earlier["id"], "changed_at": earlier["changed_at"]}}


def inventory_lines(matched: dict[str, Any] | None, runtimes: list[Any]) -> list[str]:
    if matched is None:
        return []
    lines = [f"inventory: {match.inventory_text(matched)} runtimes of the producer services live on the "
             f"count; {match.how_judged(matched, brief=True)}"]
    if matched["outside_runtimes"]:
        lines.append("  " + match.outside_text(matched, runtimes))
    if matched["unreachable_hosts"]:
        lines.append(f"  skipped, not checked or restarted (host unreachable): {', '.join(match.not_read(matched))}")
    # Not done, and neither unread (said above) nor stopped (it starts with the count whenever it is started).
    missing = [f"{entry['host']}/{entry['service']}" for entry in matched["services"]
               if entry["status"] not in (*match.DONE, match.NOT_READ) and entry["state"] != "stopped"]
    if missing:
        lines.append(f"  without a live runtime on the count: {', '.join(missing)}")
    return lines


def table(header: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    """Rows as aligned text columns under a header and a rule."""
    cells = [list(header)] + rows
    widths = [max(len(row[column]) for row in cells) for column in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]
    return lines[:1] + ["-" * (sum(widths) + 3 * (len(widths) - 1))] + lines[1:]


def grouped_rows(rows: list[list[str]]) -> list[list[str]]:
    """Rows past wording.LISTED, one per set of queues with the same counts and verdict: their names as ranges,
    their ready jobs summed."""
    groups = grouped(((row[1], row[2], row[5]), row) for row in rows)
    return [[f"{counted(len(members), 'queue')} {names_text([row[0] for row in members], 3)}", counts, runtimes,
             "-v, or the report", "unknown" if any(row[4] == "unknown" for row in members)
             else str(sum(int(row[4]) for row in members)), verdict]
            for (counts, runtimes, verdict), members in groups.items()]


def count_problems(queues: list[dict[str, Any]], views: dict[str, QueueView]) -> list[str]:
    """Each queue whose count in force is not the one asked (a run that started past the change did not set it)."""
    return [f"{entry['queue']} was not read" if view is None else
            f"{entry['queue']} holds enqueue_shards {_counts_text(view['enqueue_shards'])}, not the "
            f"{entry['shards']} asked"
            for entry in queues for view in [views.get(entry["queue"])]
            if view is None or set(view["enqueue_shards"].values()) != {int(entry["shards"])}]


def window_verdict(queues: list[dict[str, Any]], *, views: dict[str, QueueView],
                   inventory_verdict: dict[str, Any] | None = None) -> dict[str, Any]:
    """The summary's verdict (``ok``, ``message``): every queue runs the count asked - a run resumed past the change
    must not claim what it did not do -, every service of the inventory is done (``inventory_verdict``,
    verdicts.inventory_verdict; None without the producer hosts' services), and each queue is converged (and
    drained after a lowering)."""
    counts = count_problems(queues, views)
    if counts:
        return {"ok": False, "message": (
            f"{NOT_DONE}: {'; '.join(counts)}. This run did not set it: it started past the change (--start-at-task, "
            "or --tags without enqueue_shards_change), or another change came after it. Nothing more was done. "
            f"{RESUME.replace('again', 'again without --start-at-task (or those --tags)', 1)}.")}
    # The inventory's verdict names the services and hosts: it speaks first.
    if inventory_verdict is not None and not inventory_verdict["ok"]:
        return inventory_verdict
    waiting = [entry["queue"] for entry in queues for view in [views[entry["queue"]]]
               if not view["converged"] or lowered(view) and not view.get("drained")]
    if waiting:
        return {"ok": False, "message": (
            f"{NOT_DONE}: {names_text(waiting)} not converged (or not drained after a lowering) at the last read, "
            "the summary's table says where each stands. Run the wait: --tags enqueue_shards_wait,"
            "enqueue_shards_summary, or the role's wait entry point.")}
    return inventory_verdict or {"ok": True, "message": (
        "Every queue runs the count asked, converged (and drained after a lowering).")}
