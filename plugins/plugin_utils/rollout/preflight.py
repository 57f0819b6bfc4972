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

from ansible_collections.awa.operations.plugins.module_utils.wording import DETAILED_QUEUES, counted, kind_lines, names_text
from ansible_collections.awa.operations.plugins.module_utils.info.drain_time import backlog_beyond, claim_rate, seconds_text
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


def backlog_queues(read: ShardsInfo | dict[str, Any], queues: list[dict[str, Any]]) -> list[str]:
    """The queues whose lowering leaves ready jobs on the shards at and above the new count: preflight reads them
    again a few seconds later, for how fast their jobs are claimed (drain_warnings)."""
    if read_failure(read):
        return []
    return [entry["queue"] for entry in queues
            for view in [read["queues"][entry["queue"]]]
            if _current_count(view) > int(entry["shards"]) and (backlog_beyond(view, int(entry["shards"])) or 0) > 0]


def drain_warnings(read: ShardsInfo | dict[str, Any], watched: dict[str, Any] | None, queues: list[dict[str, Any]],
                   drain_timeout: float) -> tuple[list[str], list[str]]:
    """(warnings, notes): whether each lowering's backlog beyond the new count can drain within the drain timeout, at
    the rate workers claimed the queue's jobs between the read and ``watched`` (the read again, or None)."""
    warnings, notes = [], []
    entries = {entry["queue"]: entry for entry in queues}
    watched = watched or {}
    for name in backlog_queues(read, queues):
        view, shards = read["queues"][name], int(entries[name]["shards"])
        if view["paused"]:
            continue  # queue_notes says it cannot drain while paused
        backlog = backlog_beyond(view, shards) or 0
        later = (watched.get("queues") or {}).get(name)
        rate = claim_rate(view, read["read_at"], later, watched["read_at"]) if later else None
        lowering = f"lowering {name} to {shards} leaves {backlog} ready jobs on shards {shards} and above"
        limit = f"enqueue_shards_drain_timeout ({seconds_text(drain_timeout)})"
        if rate is None:
            why = watched.get("msg") or "a lane's sequences cannot be read"
            warnings.append(f"{lowering}; how long they take to drain is unknown: preflight could not read how fast "
                            f"the queue's jobs are claimed ({str(why).strip()}), so it cannot tell whether they drain "
                            f"within {limit}")
        elif rate <= 0:
            warnings.append(f"{lowering}, and none of its jobs was claimed while preflight watched it: no worker "
                            f"serves it, so they cannot drain within {limit} and the drain wait would time out. Start "
                            "its workers first, or raise enqueue_shards_drain_timeout")
        elif backlog / rate > drain_timeout:
            warnings.append(f"{lowering}: at the rate its jobs were claimed before the change ({rate:.1f} jobs/s, "
                            f"the new shards' jobs among them) they need at least {seconds_text(backlog / rate)}, more "
                            f"than {limit}, and the drain wait would time out. Raise enqueue_shards_drain_timeout, or "
                            "give the queue more workers")
        else:
            notes.append(f"{lowering}: about {seconds_text(backlog / rate)} to drain at the rate its jobs were "
                         f"claimed before the change ({rate:.1f} jobs/s), within {limit}")
    return warnings, notes


def preflight(read: ShardsInfo | dict[str, Any], queues: list[dict[str, Any]], repair: bool, *,
              watched: dict[str, Any] | None = None, drain_timeout: float | None = None) -> dict[str, Any]:
    """``lines`` to print and ``refusals`` (each a whole message) from the info read before the change.

    ``read`` is the info module's result, or a failed task's (``msg``, no ``queues``). Past
    wording.DETAILED_QUEUES queues, each queue's own lines give way to one line for them all. With
    ``drain_timeout``, each lowering's backlog is weighed against it (drain_warnings; ``watched``, the second read).
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
    warnings, drain_notes = ([], []) if drain_timeout is None else drain_warnings(
        read, watched, queues, float(drain_timeout))
    return {"lines": lines + kind_lines(list(read.get("findings", [])), "finding")
            + kind_lines(notes + drain_notes, "note") + kind_lines(warnings, "warning"),
            "refusals": refusals}
