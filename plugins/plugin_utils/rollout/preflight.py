# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight of the role enqueue_shards: what the read before the change found, and what it refuses.

Every refusal is one complete message for the operator: which queue, why,
that nothing was changed, and what to do. A read that failed (the database
unreachable, bad credentials, queue storage not active, an unknown runtime
role, a broken stripe layout) is a refusal carrying the module's own message.
What else preflight finds of a queue is a note, said before the change
without refusing it, or - a lowering's backlog that may not drain in time -
a warning.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.wording import DETAILED_QUEUES, counted, kind_lines, names_text
from ansible_collections.awa.operations.plugins.module_utils.info.convergence import ready_beyond
from ansible_collections.awa.operations.plugins.module_utils.info.drain_time import claim_rate, seconds_text
from ansible_collections.awa.operations.plugins.module_utils.info.result import QueueView, ShardsInfo

# What preflight finds, as the kind each finding is said as.
REFUSAL, NOTE, WARNING = "refusal", "note", "warning"


def _refusal(queue: str | None, reason: str) -> str:
    return f"Preflight refused{f' queue {queue}' if queue else ''}, nothing was changed: {reason}"


def _lowered(entry: dict[str, Any], view: QueueView) -> bool:
    return max(view["enqueue_shards"].values(), default=0) > int(entry["shards"])


def _queue_findings(entry: dict[str, Any], view: QueueView, repair: bool) -> Iterator[tuple[str, str]]:
    """Why the change must not touch this queue (each a REFUSAL), and what the operator should know before it."""
    name, shards, stripes = entry["queue"], int(entry["shards"]), entry.get("stripes")
    if view.get("paused"):
        yield NOTE, (f"{name} is paused: its workers claim nothing until it is resumed (awa queue resume {name})"
                     + (", so after this lowering its old shards cannot drain and the drain wait would time out"
                        if _lowered(entry, view) else ""))
    if not view["known"]:
        yield NOTE, f"{name} is new to the database: the change prepares it - its lanes, grants and count (new_queue)"
        if not entry.get("new_queue"):
            # Its first finding says the database has never seen it, with the known queues closest to its name.
            yield REFUSAL, _refusal(name, (
                f"{view['findings'][0].removeprefix(f'{name}: ')}. A change window changes queues that exist: correct "
                "its name in enqueue_shards_queues, or - to prepare a new queue before its first producer - set "
                "new_queue: true on its entry."))
        return
    if stripes not in (None, "") and int(stripes) != view["stripes"]:
        yield REFUSAL, _refusal(name, (
            f"enqueue_shards_queues sets stripes: {stripes}, but the queue is stored with {view['stripes']} "
            f"stripe(s) ({', '.join(view['physical_queues'])}). Set stripes to the runtimes' "
            "queue_storage_queue_stripe_count, or leave it out to use the stored layout."))
    missing = view["lanes_missing"] or view["grants"]["missing"]
    if missing and repair:
        yield NOTE, f"{name}: the change provisions the missing lanes and grants found (enqueue_shards_repair)"
    elif missing:
        yield REFUSAL, _refusal(name, (
            "lanes or runtime-role grants are missing and enqueue_shards_repair is false. "
            + " ".join(view["findings"]) + " Set enqueue_shards_repair: true to let the change provision and "
            "grant them (run with --check --diff to see exactly what), or fix them first."))
    unreadable = [lane for lane in view["lanes"] if lane["shard"] >= shards and not lane["readable"]]
    if _lowered(entry, view) and unreadable:
        yield REFUSAL, _refusal(name, (
            f"lowering to {shards} needs the ready depth of shards {shards} and above to know when they have "
            f"drained, but {len(unreadable)} of those lanes have sequences the connected role cannot read "
            "(another role owns them). Connect as their owner or a member of it (GRANT <owner> TO <migrator>)."))


def _drain_findings(read: ShardsInfo | dict[str, Any], watched: dict[str, Any], lowered: dict[str, int],
                    drain_timeout: float) -> Iterator[tuple[str, str]]:
    """Whether the backlog of each queue ``lowered`` (to its new count) beyond that count can drain within the drain
    timeout (a WARNING when it cannot, or may not), at the rate workers claimed the queue's jobs between the read and
    ``watched`` (the read again, or a failed read's result)."""
    limit = f"enqueue_shards_drain_timeout ({seconds_text(drain_timeout)})"
    why = str(watched.get("msg") or "a lane's sequences cannot be read").strip()
    for name, shards in lowered.items():
        view, later = read["queues"][name], (watched.get("queues") or {}).get(name)
        backlog = ready_beyond(view.get("lanes", []), shards) or 0
        if view["paused"]:
            continue  # its note says it cannot drain while paused
        rate = claim_rate(view, read["read_at"], later, watched["read_at"]) if later else None
        lowering = f"lowering {name} to {shards} leaves {backlog} ready jobs on shards {shards} and above"
        if rate is None:
            yield WARNING, (f"{lowering}; how long they take to drain is unknown: preflight could not read how fast "
                            f"the queue's jobs are claimed ({why}), so it cannot tell whether they drain within "
                            f"{limit}")
        elif rate <= 0:
            yield WARNING, (f"{lowering}, and none of its jobs was claimed while preflight watched it: no worker "
                            f"serves it, so they cannot drain within {limit} and the drain wait would time out. Start "
                            "its workers first, or raise enqueue_shards_drain_timeout")
        elif backlog / rate > drain_timeout:
            yield WARNING, (f"{lowering}: at the rate its jobs were claimed before the change ({rate:.1f} jobs/s, the "
                            f"new shards' jobs among them) they need at least {seconds_text(backlog / rate)}, more "
                            f"than {limit}, and the drain wait would time out. Raise enqueue_shards_drain_timeout, or "
                            "give the queue more workers")
        else:
            yield NOTE, (f"{lowering}: about {seconds_text(backlog / rate)} to drain at the rate its jobs were claimed "
                         f"before the change ({rate:.1f} jobs/s), within {limit}")


def preflight(read: ShardsInfo | dict[str, Any], watched: dict[str, Any] | None,
              asked: Mapping[str, Any]) -> dict[str, Any]:
    """``lines`` to print and ``refusals`` (each a whole message) from the info read before the change, for the
    ``queues`` ``asked`` (and its ``repair`` and ``drain_timeout``), and the ``backlog``: the queues whose lowering
    leaves ready jobs on the shards at and above the new count, which preflight reads again a few seconds later
    (``watched``), for how fast their jobs are claimed - whether they drain in time (_drain_findings).

    ``read`` is the info module's result, or a failed task's (``msg``, no ``queues``). Past
    wording.DETAILED_QUEUES queues, each queue's own lines give way to one line for them all.
    """
    queues = asked["queues"]
    if not isinstance(read.get("queues"), dict):
        failure = str(read.get("msg") or "the info module returned no queues").strip()
        return {"lines": [], "refusals": [_refusal(None, failure)], "backlog": []}
    views = [read["queues"][entry["queue"]] for entry in queues]
    counts = sorted({count for view in views for count in view["enqueue_shards"].values()})
    lines = list(read.get("summary_lines", [])) if len(queues) <= DETAILED_QUEUES else [
        f"{counted(len(queues), 'queue')} read ({names_text([entry['queue'] for entry in queues], 3)}): "
        f"enqueue_shards {'/'.join(map(str, counts))}; {len(read.get('runtimes', []))} runtime(s)"]
    found = [finding for entry, view in zip(queues, views) for finding in _queue_findings(entry, view, asked["repair"])]
    backlog = {entry["queue"]: int(entry["shards"]) for entry, view in zip(queues, views)
               if _lowered(entry, view) and (ready_beyond(view.get("lanes", []), int(entry["shards"])) or 0) > 0}
    found += _drain_findings(read, watched or {}, backlog, float(asked["drain_timeout"]))
    said = {kind: [text for each, text in found if each == kind] for kind in (REFUSAL, NOTE, WARNING)}
    return {"lines": lines + kind_lines(list(read.get("findings", [])), "finding") + kind_lines(said[NOTE], NOTE)
            + kind_lines(said[WARNING], WARNING), "refusals": said[REFUSAL], "backlog": list(backlog)}
