# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A read's views: the result of awa_enqueue_shards_info (info.result), built from observed data. Pure functions."""

from __future__ import annotations

import datetime
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ansible_collections.awa.operations.plugins.module_utils.info import convergence, service_runtimes
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import StripeLayout, ordering_contract
from ansible_collections.awa.operations.plugins.module_utils.info.result import (
    Grants, LaneRef, LaneView, ObservedRead, QueueView, RuntimeIdentity, RuntimeView, ShardsRead, ShardView,
    StragglerView)

if TYPE_CHECKING:
    # The bound of Shown (below), and the lane depths by queue.
    from collections.abc import Mapping

    # For annotations only: the views import no database driver (the role's filters describe runtimes with them).
    from ansible_collections.awa.operations.plugins.module_utils.schema.lanes import LaneDepth, LaneState, QueueState
    from ansible_collections.awa.operations.plugins.module_utils.schema.runtimes import Runtime
    from ansible_collections.awa.operations.plugins.module_utils.schema.ledger import RecordedChange

EXAMPLES_SHOWN = 3

# "Converged" counts live runtimes; with none live it holds because nothing runs, which an operator must be told.
NO_LIVE_RUNTIME = ("no Awa runtime is live on this database, so converged holds only because nothing runs: "
                   "runtimes started from now on read the current count. If workers or producers should be "
                   "running, start them and read again.")


def _identity(runtime: Runtime) -> RuntimeIdentity:
    return {"instance_id": runtime.instance_id, "hostname": runtime.hostname, "pid": runtime.pid,
            "version": runtime.version, "started_at": runtime.started_at.isoformat(),
            "seconds_since_start": round(runtime.seconds_since_start, 1),
            "seconds_since_seen": round(runtime.seconds_since_seen, 1)}


def runtime_view(runtime: Runtime, pending_queues: list[str]) -> RuntimeView:
    """A runtime, and the logical queues whose current count it does not run with yet."""
    return {**_identity(runtime), "last_seen_at": runtime.last_seen_at.isoformat(), "live": runtime.live,
            "stale": not runtime.live and not runtime.shutting_down, "shutting_down": runtime.shutting_down,
            "healthy": runtime.healthy, "leader": runtime.leader, "reported_shards": runtime.reported_shards,
            "pending_queues": pending_queues, "converged": runtime.live and not pending_queues}


def describe_runtime(view: RuntimeView | StragglerView) -> str:
    return (f"pid {view['pid']} on host {view['hostname'] or '(unreported)'} "
            f"(instance {view['instance_id']}, up {view['seconds_since_start']:.0f}s)")


def _shard_views(lanes: list[LaneView]) -> list[ShardView]:
    """Lanes summed over priorities: one row per (physical queue, shard)."""
    grouped: dict[tuple[str, int], list[LaneView]] = defaultdict(list)
    for lane in lanes:
        grouped[(lane["queue"], lane["shard"])].append(lane)
    views: list[ShardView] = []
    for (queue, shard), members in sorted(grouped.items()):
        readable = all(lane["readable"] for lane in members)
        ages = [age for lane in members if (age := lane["oldest_ready_age_seconds"]) is not None]
        views.append({
            "queue": queue, "shard": shard, "beyond_count": members[0]["beyond_count"],
            "ready_depth": sum(lane["ready_depth"] or 0 for lane in members) if readable else None,
            "seq_lag": sum(lane["seq_lag"] or 0 for lane in members) if readable else None,
            "oldest_ready_age_seconds": max(ages) if ages else None,
        })
    return views


def _grant_findings(queue: str, lanes: list[LaneState], runtime_roles: tuple[str, ...]) -> tuple[Grants, list[str]]:
    owners = Counter(owner for lane in lanes for owner in (lane.enqueue_seq_owner, lane.claim_seq_owner) if owner)
    # role -> (the privileges it lacks, the lane sequences it lacks them on)
    missing: dict[str, tuple[set[str], set[str]]] = defaultdict(lambda: (set(), set()))
    for role, privilege, sequence in (lacking for lane in lanes for lacking in lane.missing_privileges):
        missing[role][0].add(privilege)
        missing[role][1].add(sequence)
    grants: Grants = {"missing": [{"role": role, "privileges": sorted(privileges), "sequences": len(sequences),
                                   "examples": sorted(sequences)[:EXAMPLES_SHOWN]}
                                  for role, (privileges, sequences) in sorted(missing.items())],
                      "sequence_owners": dict(sorted(owners.items()))}
    findings = [
        f"{queue}: role {lacking['role']} lacks {'/'.join(lacking['privileges'])} on {lacking['sequences']} lane "
        f"sequences (e.g. {', '.join(lacking['examples'])}): its runtimes cannot enqueue "
        f"or claim there and Awa 0.6.9 workers stop serving the queue without a word. Fix: run "
        f"awa.operations.awa_enqueue_shards for {queue} with runtime_roles including {lacking['role']}."
        for lacking in grants["missing"]]
    # Sequences owned by a runtime role only matter while another role still lacks privileges on them:
    # granting them needs their owner (or a member). Once granted, the ownership is no longer a finding.
    findings += [
        f"{queue}: {count} lane sequences are owned by runtime role {owner} (its runtimes created them "
        "lazily): other runtime roles cannot use them until granted. Fix: run awa.operations.awa_enqueue_shards "
        f"with every runtime role in runtime_roles, connected as {owner}, a member of it, or a superuser."
        for owner, count in sorted(owners.items()) if missing and owner in runtime_roles]
    return grants, findings


# The keys of a queue's view that come from its lanes, absent from a read without them (``lanes: false``).
LANE_KEYS = ("drained", "ready_depth", "depth_beyond_count", "lanes_complete", "lanes_missing", "lanes", "shards",
             "grants")


def _add_lane_views(view: QueueView, logical: str, state: QueueState, depths: Mapping[str, list[LaneDepth]],
                    verdict: convergence.QueueConvergence,
                    runtime_roles: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Add what a queue's lanes say (LANE_KEYS) to its view; returns their findings: those that go before the
    queue's other findings (lanes missing), and those after. ``depths`` are by physical queue."""
    current = view["enqueue_shards"]
    own_lanes = [lane for queue in current for lane in state.lanes_of(queue)]
    # The lanes as read (``depths``), with whether each is complete (``own_lanes``) and beyond its count.
    complete = {lane.key: lane.complete for lane in own_lanes}
    lanes = [cast(LaneView, {
        **asdict(depth), "beyond_count": depth.shard >= current[depth.queue],
        "complete": complete.get((depth.queue, depth.priority, depth.shard), False),
        "oldest_ready_age_seconds": None if (age := depth.oldest_ready_age_seconds) is None else round(age, 1),
    }) for queue in current for depth in depths.get(queue, [])]
    beyond = convergence.ready_beyond(lanes)
    missing_lanes: list[LaneRef] = [
        {"queue": lane.queue, "priority": lane.priority, "shard": lane.shard}
        for lane in own_lanes if lane.shard < current[lane.queue] and not lane.complete]
    grants, findings = _grant_findings(logical, own_lanes, runtime_roles)
    first = [f"{logical}: {len(missing_lanes)} lanes below the shard count are missing (e.g. {example['queue']} "
             f"priority {example['priority']} shard {example['shard']}): producers create them on first use and "
             "concurrent first writes fail. Fix: run awa.operations.awa_enqueue_shards for this queue."
             for example in missing_lanes[:1]]
    unreadable = sum(1 for lane in lanes if not lane["readable"])
    findings += [f"{logical}: {unreadable} lanes have sequences the connected role cannot read (SELECT), so their "
                 "depth is unknown. Connect as their owner or a member of it."] if unreadable else []
    # Drained is only meaningful once every runtime has converged (a stale one refills old shards).
    view.update({"drained": verdict.complete and beyond == 0, "depth_beyond_count": beyond,
                 "ready_depth": convergence.ready_beyond(lanes, 0),
                 "lanes_complete": sum(1 for lane in lanes if lane["complete"]), "lanes_missing": missing_lanes,
                 "lanes": lanes, "shards": _shard_views(lanes), "grants": grants})
    return first, findings


def queue_view(layout: StripeLayout, logical: str, state: QueueState, depths: Mapping[str, list[LaneDepth]],
               runtimes: list[Runtime], changes: dict[str, RecordedChange], runtime_roles: tuple[str, ...],
               margin_seconds: float, *, lanes: bool = True, never_seen: str | None = None) -> QueueView:
    """Everything awa_enqueue_shards_info says about one logical queue (without ``lanes``: no LANE_KEYS).

    ``depths`` are the lane depths read, by physical queue, and ``state`` the queues' state: either may hold other
    queues too. ``never_seen`` says what is known of a queue the database has never seen (queue_rules.never_seen):
    its first finding, in place of its missing lanes (which only a change asked to prepare a new queue creates).
    """
    current = {queue: state.enqueue_shards[queue] for queue in layout.physical_queues}
    verdict = convergence.queue_convergence(runtimes, current, changes, margin_seconds)
    shard_counts = sorted(set(current.values()))
    view: QueueView = {
        "queue": logical, "stripes": layout.stripes, "physical_queues": list(layout.physical_queues),
        "enqueue_shards": current, "known": never_seen is None,
        "paused": any(queue in state.paused for queue in layout.physical_queues),
        "ordering": ordering_contract(shard_counts[0]) if len(shard_counts) == 1 else
        f"mixed: the physical queues have different counts {current}",
        "converged": verdict.complete, "runtimes_live": verdict.live, "runtimes_converged": verdict.converged,
        "stragglers": [{**_identity(straggler.runtime), "physical_queue": straggler.physical_queue,
                        "reason": straggler.verdict.reason} for straggler in verdict.stragglers],
        "last_change": {queue: {"id": change.id, "changed_at": change.changed_at.isoformat(),
                                "from_shards": change.from_shards, "to_shards": change.to_shards,
                                "changed_by": change.changed_by, "reason": change.reason}
                        for queue in sorted(current) if (change := changes.get(queue)) is not None},
        "findings": [], "summary_lines": [],
    }
    first, after = _add_lane_views(view, logical, state, depths, verdict, runtime_roles) if lanes else ([], [])
    if never_seen is not None:
        first = [f"{logical}: {never_seen}"]
    # The first count changed outside the module, if any.
    view["findings"] = first + list(layout.warnings) + after + [
        f"{straggler.physical_queue}: {straggler.verdict.reason}; re-apply the count with "
        "awa.operations.awa_enqueue_shards so the change is recorded."
        for straggler in verdict.stragglers if straggler.verdict.code == convergence.CHANGED_OUTSIDE_MODULE][:1]
    view["summary_lines"] = summary_lines(view)
    return view


def ready_by_shard(shards: list[ShardView], queue: str, listed: int | None = None) -> str:
    """The ready jobs of each shard of ``queue`` below its count, as ``shard:jobs`` (``?`` where unreadable); past
    ``listed`` shards, their sum instead (``1234 over 32 shards``). Empty when the queue has no such shard read."""
    within = [row for row in shards if row["queue"] == queue and not row["beyond_count"]]
    if listed is not None and len(within) > listed:
        total = sum(row["ready_depth"] for row in within if row["ready_depth"] is not None)
        return f"{total} over {len(within)} shards"
    return " ".join(f"{row['shard']}:{'?' if row['ready_depth'] is None else row['ready_depth']}" for row in within)


def summary_lines(view: QueueView) -> list[str]:
    """A few lines a playbook can print as is."""
    counts = sorted(set(view["enqueue_shards"].values()))
    was = "".join(f" (was {change['from_shards']}, change #{change['id']} at {change['changed_at']} by "
                  f"{change['changed_by']})" for change in list(view["last_change"].values())[:1])
    lines = [f"{view['queue']}: enqueue_shards {'/'.join(map(str, counts))}{was}; {view['ordering']}"]
    others = len({s["instance_id"] for s in view["stragglers"]}) - 1
    waiting = "".join(f"; waiting for {describe_runtime(first)}: {first['reason']}"
                      + (f" (and {others} more)" if others > 0 else "") for first in view["stragglers"][:1])
    lines.append(f"  runtimes: {view['runtimes_converged']} of {view['runtimes_live']} live runtimes on the "
                 f"current count{waiting}")
    for queue in view["physical_queues"] if "shards" in view else []:
        beyond = [row for row in view["shards"] if row["queue"] == queue and row["beyond_count"]]
        total = convergence.ready_beyond(beyond)
        tail = ("no lanes beyond the count" if not beyond else "beyond the count: unknown (unreadable)" if total is None
                else f"beyond the count (shards {beyond[0]['shard']}..{beyond[-1]['shard']}): {total or 'none'} ready")
        prefix = f"  {queue}: " if len(view["physical_queues"]) > 1 else "  "
        lines.append(f"{prefix}ready by shard {ready_by_shard(view['shards'], queue) or '-'} | {tail}")
    if view["paused"]:
        lines.append(f"  paused: its workers claim nothing until it is resumed (awa queue resume {view['queue']})")
    drained = f"; drained: {'yes' if view['drained'] else 'no'}" if "drained" in view else ""
    lines.append(f"  converged: {'yes' if view['converged'] else 'no'}{drained}"
                 + (f"; {len(view['findings'])} finding(s)" if view["findings"] else ""))
    return lines


def shards_read(queues: dict[str, QueueView], runtimes: list[Runtime], *, read_at: datetime.datetime,
                findings: list[str], warnings: list[str], known_runtimes: frozenset[str],
                expected_new_runtimes: int, lanes: bool = True,
                restarted_services: Sequence[service_runtimes.RestartedService] = ()) -> ShardsRead:
    """One read's result: the queues' views, every runtime (with the queues it is pending on), and the totals.

    ``new_runtimes`` are the live, healthy runtimes not in ``known_runtimes``
    (instance ids seen before a restart): with ``restarted_services``, those
    of the services restarted (service_runtimes.restarted_runtimes), and the
    others only when ``expected_new_runtimes`` counts some (of services whose
    runtimes are not told apart by pid). ``expected_new_runtimes`` in the
    result adds the runtimes of the restarted services to it. ``findings``
    are those of no queue (stripe layouts that could not be resolved), and
    NO_LIVE_RUNTIME when no runtime is live.
    """
    pending: dict[str, list[str]] = defaultdict(list)
    for logical, queue_view in queues.items():
        for instance_id in dict.fromkeys(straggler["instance_id"] for straggler in queue_view["stragglers"]):
            pending[instance_id].append(logical)
    runtime_views = [runtime_view(runtime, pending.get(runtime.instance_id, [])) for runtime in runtimes]
    lines = [line for queue_view in queues.values() for line in queue_view["summary_lines"]]
    new = [view for view in runtime_views if view["live"] and view["healthy"] and view["instance_id"] not in known_runtimes]
    read: ShardsRead = {
        "changed": False, "read_at": read_at.isoformat(),
        "new_runtimes": service_runtimes.restarted_runtimes(
            restarted_services, new, counted=not restarted_services or expected_new_runtimes > 0),
        "expected_new_runtimes": expected_new_runtimes + sum(service["runtimes"] for service in restarted_services),
        "converged": all(q["converged"] for q in queues.values()), "queues": queues, "runtimes": runtime_views,
        "findings": findings + ([] if any(runtime.live for runtime in runtimes) else [NO_LIVE_RUNTIME])
        + [finding for q in queues.values() for finding in q["findings"]],
        "summary": "\n".join(lines), "summary_lines": lines, "warnings": warnings,
    }
    # Drained is known only where the lanes were read.
    if lanes:
        read["drained"] = all(view.get("drained", False) for view in queues.values())
    return read


def observed_read(read: ShardsRead, server: str) -> ObservedRead:
    """A read as the change module returns it (``observed``): its state, and the server it was read on.

    Its ``changed`` (always false) and ``warnings`` (the change's own) are the change's to report.
    """
    observed = {key: value for key, value in read.items() if key not in ("changed", "warnings")}
    return cast(ObservedRead, {**observed, "server": server})


# What a module's result says only with ``detail`` (its option): every runtime (stragglers are in their queue's
# view), the summary said again as one string, and of each queue its lanes, its shards and its own summary lines
# (the result's summary_lines hold them). Without them an ad hoc read of one queue of 16 shards with 16 runtimes prints
# 54 lines with Ansible's YAML callback, not 1,287 (tests/functional/test_results_fit_a_screen.py).
DETAIL_KEYS = ("runtimes", "new_runtimes", "summary")
QUEUE_DETAIL_KEYS = ("lanes", "shards", "summary_lines")

# Any result of a read (a TypedDict, or a failure's dict). In quotes: evaluated, the bound would need Python 3.9 (3.8
# sanity).
Shown = TypeVar("Shown", bound="Mapping[str, Any]")


def shown(result: Shown, *, detail: bool) -> Shown:
    """A read as a module returns it - the result of awa_enqueue_shards_info (a failed one's too) or the change's
    ``observed``: its summary lines first (for whatever prints keys in order) and, without ``detail``, none of
    DETAIL_KEYS and QUEUE_DETAIL_KEYS. A copy; the reads the module made (a wait's polls) keep everything."""
    first = {"summary_lines": result["summary_lines"]} if "summary_lines" in result else {}
    kept: dict[str, Any] = {**first, **{key: value for key, value in result.items()
                                        if detail or key not in DETAIL_KEYS}}
    if not detail and isinstance(kept.get("queues"), dict):
        kept["queues"] = {name: {key: value for key, value in view.items() if key not in QUEUE_DETAIL_KEYS}
                          for name, view in kept["queues"].items()}
    return cast(Shown, kept)
