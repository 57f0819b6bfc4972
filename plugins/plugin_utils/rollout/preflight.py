# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight of the role enqueue_shards: what the read before the change found, and what it refuses.

Every refusal is one complete message for the operator: which queue, why,
that nothing was changed, and what to do. A read that failed (the database
unreachable, bad credentials, queue storage not active, an unknown runtime
role, a broken stripe layout) is a refusal carrying the module's own message.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.compact import DETAILED_QUEUES, counted, kind_lines, names_text
from ansible_collections.awa.operations.plugins.module_utils.info.result import QueueView, ShardsInfo

NOTHING_CHANGED = "nothing was changed"


def _refusal(queue: str | None, reason: str) -> str:
    subject = f"Preflight refused queue {queue}" if queue else "Preflight refused"
    return f"{subject}, {NOTHING_CHANGED}: {reason}"


def read_failure(read: ShardsInfo | dict[str, Any]) -> str | None:
    """The module's message when the read failed (its result has no queues), else None."""
    if isinstance(read.get("queues"), dict):
        return None
    message = str(read.get("msg") or "the info module returned no queues").strip()
    return _refusal(None, message)


def _current_count(view: QueueView) -> int:
    return max(view["enqueue_shards"].values())


def queue_refusals(entry: dict[str, Any], view: QueueView, repair: bool) -> list[str]:
    """Why the change must not touch this queue, if it must not."""
    name = entry["queue"]
    if not view["known"]:
        if entry.get("new_queue"):
            return []
        # Its first finding says the database has never seen it, with the known queues closest to its name.
        return [_refusal(name, (
            f"{view['findings'][0].removeprefix(f'{name}: ')}. A change window changes queues that exist: correct its name "
            "in enqueue_shards_queues, or - to prepare a new queue before its first producer - set new_queue: true "
            "on its entry."))]
    refusals = []
    stripes = entry.get("stripes")
    if stripes not in (None, "") and int(stripes) != view["stripes"]:
        refusals.append(_refusal(name, (
            f"enqueue_shards_queues sets stripes: {stripes}, but the queue is stored with {view['stripes']} "
            f"stripe(s) ({', '.join(view['physical_queues'])}). Set stripes to the runtimes' "
            "queue_storage_queue_stripe_count, or leave it out to use the stored layout.")))
    if not repair and (view["lanes_missing"] or view["grants"]["missing"]):
        refusals.append(_refusal(name, (
            "lanes or runtime-role grants are missing and enqueue_shards_repair is false. "
            + " ".join(view["findings"]) + " Set enqueue_shards_repair: true to let the change provision and "
            "grant them (run with --check --diff to see exactly what), or fix them first.")))
    shards = int(entry["shards"])
    unreadable = [lane for lane in view["lanes"] if lane["shard"] >= shards and not lane["readable"]]
    if _current_count(view) > shards and unreadable:
        refusals.append(_refusal(name, (
            f"lowering to {shards} needs the ready depth of shards {shards} and above to know when they have "
            f"drained, but {len(unreadable)} of those lanes have sequences the connected role cannot read "
            "(another role owns them). Connect as their owner or a member of it (GRANT <owner> TO <migrator>).")))
    return refusals


def queue_notes(entry: dict[str, Any], view: QueueView, repair: bool) -> list[str]:
    """What the operator should know before the change, without refusing it."""
    name = entry["queue"]
    notes = []
    if view.get("paused"):
        lowering = _current_count(view) > int(entry["shards"])
        notes.append(
            f"{name} is paused: its workers claim nothing until it is resumed (awa queue resume {name})"
            + (", so after this lowering its old shards cannot drain and the drain wait would time out"
               if lowering else ""))
    if not view["known"]:
        notes.append(f"{name} is new to the database: the change prepares it - its lanes, grants and count "
                     "(new_queue)")
    elif repair and (view["lanes_missing"] or view["grants"]["missing"]):
        notes.append(f"{name}: the change provisions the missing lanes and grants found (enqueue_shards_repair)")
    return notes


def preflight(read: ShardsInfo | dict[str, Any], queues: list[dict[str, Any]], repair: bool) -> dict[str, Any]:
    """``lines`` to print and ``refusals`` (each a whole message) from the info read before the change.

    ``read`` is the info module's result, or a failed task's (``msg``, no ``queues``). Past
    compact.DETAILED_QUEUES queues, each queue's own lines give way to one line for them all.
    """
    failure = read_failure(read)
    if failure:
        return {"lines": [], "refusals": [failure]}
    if len(queues) <= DETAILED_QUEUES:
        lines = list(read.get("summary_lines", []))
    else:
        views = [read["queues"][entry["queue"]] for entry in queues]
        counts = sorted({count for view in views for count in view["enqueue_shards"].values()})
        lines = [f"{counted(len(queues), 'queue')} read ({names_text([entry['queue'] for entry in queues], 3)}): "
                 f"enqueue_shards {'/'.join(map(str, counts))}; {len(read.get('runtimes', []))} runtime(s)"]
    refusals, notes = [], []
    for entry in queues:
        view = read["queues"][entry["queue"]]
        refusals += queue_refusals(entry, view, repair)
        notes += queue_notes(entry, view, repair)
    return {"lines": lines + kind_lines(list(read.get("findings", [])), "finding") + kind_lines(notes, "note"),
            "refusals": refusals}
