# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the role enqueue_shards prints: the change, the queues to drain, and the summary table.

In check mode nothing was changed, so every line says what is planned and
what is true now, never a planned state as if it had happened. With the
producer hosts' services, "N of M" counts the inventory's runtimes live on
the count against what the inventory expects (rollout.match), next to the
runtimes outside it, and "converged" is never said while fewer are live or
a host was left out.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.compact import DETAILED_QUEUES, LISTED, counted, names_text
from ansible_collections.awa.operations.plugins.module_utils.change.result import (
    EnqueueShardsResult,
    QueueChange,
    queue_changes,
)
from ansible_collections.awa.operations.plugins.module_utils.info.result import QueueView, StateRead
from ansible_collections.awa.operations.plugins.module_utils.info.views import ready_by_shard
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import match

# Over this many shards the table shows a queue's total ready depth instead of one entry per shard.
SHARDS_LISTED = 16
SUMMARY_HEADER = ("queue", "S before -> after", "runtimes on S", "ready jobs by shard", "beyond S",
                  "converged / drained")
CHECK_MODE_HEADER = ("queue", "S now -> planned", "runtimes on planned S", "ready jobs by shard", "beyond S",
                     "converged / drained")


def _counts_text(counts: dict[str, Any] | list[Any]) -> str:
    values = counts.values() if isinstance(counts, dict) else counts
    return "/".join(str(value) for value in sorted(set(values)))


def switches(result: QueueChange) -> bool:
    """Whether a queue's change result switched (in check mode: would switch) the count."""
    return any(previous != result["shards"] for previous in result["previous_shards"].values())


def _change_outcome(result: QueueChange, check_mode: bool) -> str:
    if not result["changed"]:
        return "already so, nothing written"
    if check_mode:
        return (f"check mode, would create {result['lanes_created']} lanes and add {result['grants_added']} grants "
                "in one transaction")
    ledger = result.get("ledger")
    return (f"changed in one transaction: {result['lanes_created']} lanes created, {result['grants_added']} grants "
            f"added, recorded as change #{ledger['id'] if ledger else '-'}")


def change_lines(change: EnqueueShardsResult, queues: list[dict[str, Any]], check_mode: bool) -> list[str]:
    """Two lines per queue: what was done (in check mode, what would be) and the ordering it gives; past
    compact.DETAILED_QUEUES queues, one line per kind of change (the counts and the outcome) and per ordering."""
    if len(queues) <= DETAILED_QUEUES:
        lines = []
        for entry in queues:
            result = change["queues"][entry["queue"]]
            lines.append(f"{entry['queue']}: enqueue_shards {_counts_text(result['previous_shards'])} -> "
                         f"{entry['shards']} on {', '.join(result['physical_queues'])} - "
                         f"{_change_outcome(result, check_mode)}")
            lines.append(f"  ordering: {result['ordering']}")
        return lines
    kinds: dict[tuple[str, int, str], list[str]] = {}
    orderings: dict[str, list[str]] = {}
    for entry in queues:
        result = change["queues"][entry["queue"]]
        outcome = "already so" if not result["changed"] else "would change" if check_mode else "changed"
        kinds.setdefault((_counts_text(result["previous_shards"]), entry["shards"], outcome), []).append(entry["queue"])
        orderings.setdefault(result["ordering"], []).append(entry["queue"])
    results = [change["queues"][entry["queue"]] for entry in queues]
    lanes, grants = sum(r["lanes_created"] for r in results), sum(r["grants_added"] for r in results)
    lines = [f"{counted(len(names), 'queue')} ({names_text(names, 3)}): enqueue_shards {before} -> {after} - {outcome}"
             for (before, after, outcome), names in kinds.items()]
    lines.append(("check mode: would create " if check_mode else "in one transaction per queue: created ")
                 + f"{lanes} lanes and added {grants} grants in all (-v, or the run's report, has each queue)")
    return lines + [f"  ordering of {counted(len(names), 'queue')}: {ordering}" for ordering, names in orderings.items()]


def lowered_queues(read: StateRead) -> list[str]:
    """Queues whose latest recorded change lowered the count: they must drain."""
    return [name for name, view in read.get("queues", {}).items()
            if any(change["from_shards"] > change["to_shards"] for change in view["last_change"].values())]


def _ready_cell(view: QueueView) -> str:
    """The table's "ready jobs by shard": each physical queue's (``#n`` before each stripe's)."""
    parts = []
    for physical in view["physical_queues"]:
        text = ready_by_shard(view["shards"], physical, SHARDS_LISTED)
        parts.append(text if len(view["physical_queues"]) == 1 else f"#{physical.rsplit('#', 1)[-1]} {text}")
    return " | ".join(parts) or "-"


def _yes_no(value: bool) -> str:
    return "yes" if value else "no"


def _inventory(queue: str | None, inventory: dict[str, Any] | None) -> dict[str, Any] | None:
    """The inventory's match for one queue, or every queue read (None without the producer hosts' services)."""
    if not inventory or not any(host["services"] for host in inventory.get("hosts") or []):
        return None
    return match.match(inventory["hosts"], inventory["runtimes"], inventory["runtimes_per_service"],
                       pid_hosts=inventory.get("pid_hosts", []), queue=queue, queues=inventory.get("queues"))


def _runtimes_text(view: QueueView, matched: dict[str, Any] | None) -> str:
    if matched is None:
        return f"{view['runtimes_converged']} of {view['runtimes_live']}"
    return match.inventory_text(matched)


def _done(view: QueueView, matched: dict[str, Any] | None) -> bool:
    """Converged for the queue, and (with the inventory) every expected runtime live on the count, no host left out."""
    return view["converged"] and (matched is None or (matched["on_count"] >= matched["expected"]
                                                      and not matched["unreachable_hosts"]))


def summary_row(entry: dict[str, Any], view: QueueView, change: EnqueueShardsResult | None, check_mode: bool,
                matched: dict[str, Any] | None = None) -> list[str]:
    result = queue_changes(change).get(entry["queue"])
    now = _counts_text(view["enqueue_shards"])
    beyond = view["depth_beyond_count"]
    row = [entry["queue"], "", "", _ready_cell(view), "unknown" if beyond is None else str(beyond), ""]
    if check_mode:
        planned_switch = result is not None and switches(result)
        row[1] = f"{now} -> {entry['shards']}"
        if planned_switch:
            expected = view["runtimes_live"] if matched is None else matched["expected"]
            row[2] = f"0 of {expected} (they restart)" if expected else "0 of 0"
            row[5] = "not yet (check mode)"
        else:
            row[2] = _runtimes_text(view, matched)
            row[5] = f"{_yes_no(_done(view, matched))} / {_yes_no(view['drained'] and _done(view, matched))}"
        return row
    if result is not None:
        before = _counts_text(result["previous_shards"])
    else:
        before = _counts_text([change["from_shards"] for change in view["last_change"].values()]) or "?"
    row[1] = f"{before} -> {now}"
    row[2] = _runtimes_text(view, matched)
    row[5] = f"{_yes_no(_done(view, matched))} / {_yes_no(view['drained'] and _done(view, matched))}"
    return row


def _inventory_lines(matched: dict[str, Any] | None, runtimes: list[Any]) -> list[str]:
    if matched is None:
        return []
    lines = [f"inventory: {match.inventory_text(matched)} runtimes of the producer services live on the "
             f"count; {match.how_judged(matched, brief=True)}"]
    if matched["outside_runtimes"]:
        lines.append("  " + match.outside_text(matched, runtimes))
    if matched["unreachable_hosts"]:
        skipped = [f"{entry['host']}/{entry['service']}" for entry in matched["services"]
                   if entry["status"] == match.NOT_READ]
        lines.append(f"  skipped, not checked or restarted (host unreachable): {', '.join(skipped)}")
    missing = [f"{entry['host']}/{entry['service']}" for entry in matched["services"]
               if entry["status"] in (match.NO_RUNTIME, match.STALE_RUNTIMES,
                                      match.SHORT_BY_COUNT)
               or (entry["status"] == match.NOT_RUNNING and entry["state"] != "stopped")]
    if missing:
        lines.append(f"  without a live runtime on the count: {', '.join(missing)}")
    return lines


def table(header: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    """Rows as aligned text columns under a header and a rule."""
    cells = [list(header)] + rows
    widths = [max(len(row[column]) for row in cells) for column in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "-" * (sum(widths) + 3 * (len(widths) - 1)))
    return lines


def _grouped_rows(rows: list[list[str]]) -> list[list[str]]:
    """Rows past compact.LISTED, one per set of queues with the same counts and verdict: their names as ranges,
    their ready jobs summed."""
    groups: dict[tuple[str, ...], list[list[str]]] = {}
    for row in rows:
        groups.setdefault((row[1], row[2], row[5]), []).append(row)
    grouped = []
    for (counts, runtimes, verdict), members in groups.items():
        beyond = [row[4] for row in members]
        beyond_text = ("unknown" if "unknown" in beyond else str(sum(int(value) for value in beyond)))
        grouped.append([f"{counted(len(members), 'queue')} {names_text([row[0] for row in members], 3)}", counts,
                        runtimes, "-v, or the report", beyond_text, verdict])
    return grouped


def summary(queues: list[dict[str, Any]], *, views: dict[str, QueueView], change: EnqueueShardsResult | None, check_mode: bool,
            inventory: dict[str, Any] | None = None) -> list[str]:
    """The change window's table, the inventory's runtimes, then each queue's own summary lines.

    ``inventory`` (optional) holds the producer hosts' states (``hosts``),
    the last read's ``runtimes``, ``runtimes_per_service``, ``pid_hosts`` and
    the ``queues`` whose change concerns a service (the plan's).
    Past compact.LISTED queues, queues with the same counts and verdict share
    a row; past compact.DETAILED_QUEUES, each queue's own lines are left to
    the run's report.
    """
    matched = {entry["queue"]: _inventory(entry["queue"], inventory) for entry in queues}
    rows = [summary_row(entry, views[entry["queue"]], change, check_mode, matched[entry["queue"]])
            for entry in queues]
    lines = table(CHECK_MODE_HEADER if check_mode else SUMMARY_HEADER,
                  rows if len(rows) <= LISTED else _grouped_rows(rows)) + [""]
    if not check_mode:
        lines += _inventory_lines(_inventory(None, inventory), (inventory or {}).get("runtimes", []))
    if len(queues) <= DETAILED_QUEUES:
        for entry in queues:
            lines += views[entry["queue"]]["summary_lines"]
    if check_mode:
        lines.append("Check mode: nothing was changed, restarted or waited for. \"now\" is what runs now; "
                     "\"planned\" is what the playbook would set.")
    return lines


def report(queues: list[dict[str, Any]], *, views: dict[str, QueueView], change: EnqueueShardsResult | None, check_mode: bool,
           inventory: dict[str, Any] | None, rollout: dict[str, Any] | None, preflight: dict[str, Any] | None) -> dict[str, Any]:
    """The run's whole record, for its JSON report file: every queue, every service, every verdict."""
    matched = {entry["queue"]: _inventory(entry["queue"], inventory) for entry in queues}
    return {
        "check_mode": check_mode,
        "queues": {entry["queue"]: {
            "requested": entry,
            "summary": dict(zip(CHECK_MODE_HEADER if check_mode else SUMMARY_HEADER,
                                summary_row(entry, views[entry["queue"]], change, check_mode, matched[entry["queue"]]))),
            "change": queue_changes(change).get(entry["queue"]),
            "read": views[entry["queue"]], "inventory": matched[entry["queue"]]} for entry in queues},
        "preflight": None if preflight is None else {key: preflight.get(key) for key in (
            "summary_lines", "findings", "health", "msg") if key in preflight},
        "plan": None if rollout is None else {key: rollout.get(key) for key in (
            "headline", "detail", "batches", "skipped", "problems", "pid_hosts")},
        "services": None if rollout is None else rollout.get("hosts"),
        "batches": None if rollout is None else rollout.get("verdicts"),
        "inventory": _inventory(None, inventory),
    }
