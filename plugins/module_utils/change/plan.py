# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Planning a shard-count change: observed state + validated request + stripes -> plan. Pure.

No I/O, no clock, no module object: ``plan_enqueue_shards`` is tested with
plain tables. An empty plan means "nothing to write". ``queue_summary`` is
the one view of a physical queue used for the plan's ``before`` and, by
``writes.apply_change``, for what the database holds after provisioning.
``check_ledger`` plans the ledger's part: create it, add the change_id column
a ledger of 0.1.0 lacks, or write a row without it (refused when the row
could not be written at all).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ansible_collections.awa.operations.plugins.module_utils.wording import named_queues
from ansible_collections.awa.operations.plugins.module_utils.change.result import PhysicalQueueSide
from ansible_collections.awa.operations.plugins.module_utils.errors import DatabaseError, PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.schema.installation import Installation
from ansible_collections.awa.operations.plugins.module_utils.schema.lanes import QueueState
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import PRIORITIES, StripeLayout
from ansible_collections.awa.operations.plugins.module_utils.change.request import ChangeRequest

if TYPE_CHECKING:
    from typing import TypeAlias

# An alias in quotes, its kind for the type checker only: evaluated, it would need Python 3.9 (3.8 sanity).
LaneKey: TypeAlias = "tuple[str, int, int]"  # (queue, priority, shard)


@dataclass
class Plan:
    """Everything a run would write, and the before/after it implies."""

    queue: str
    shards: int
    stripes: int
    physical_queues: list[str]
    previous_shards: dict[str, int]
    lanes_to_create: list[LaneKey]
    lane_rows_to_create: list[tuple[str, int]]
    enqueue_heads_to_create: list[LaneKey]
    claim_heads_to_create: list[LaneKey]
    lanes_to_repair: list[LaneKey]
    # Sequences that need USAGE, SELECT, UPDATE for some runtime roles, and the (role, sequence) pairs that lacked
    # at least one privilege.
    grant_sequences: list[str]
    grant_roles: list[str]
    grants_added: int
    meta_queues_to_update: list[str]
    before: dict[str, PhysicalQueueSide]
    after: dict[str, PhysicalQueueSide]
    warnings: list[str]

    @property
    def changed(self) -> bool:
        return bool(self.lanes_to_create or self.lane_rows_to_create or self.enqueue_heads_to_create
                    or self.claim_heads_to_create or self.lanes_to_repair or self.grants_added
                    or self.meta_queues_to_update)


def queue_summary(state: QueueState, queue: str, shards: int) -> PhysicalQueueSide:
    """One physical queue as the diff shows it, with ``shards`` as its count.

    The plan's ``before`` and the verification after provisioning both use it,
    so the verification compares like with like.
    """
    lanes = state.lanes_of(queue)
    return {
        "enqueue_shards": shards,
        "lanes": sum(1 for lane in lanes if lane.complete),
        "lanes_missing": sum(1 for lane in lanes if lane.shard < shards and not lane.complete),
        "missing_grants": sum(len(lane.missing_privileges) for lane in lanes),
    }


class ChangedSinceRead(DatabaseError):
    """The queue's counts are not those its plan was made from: another change committed in between.

    Only a plan made before its transaction (a list's one read) can meet it; that caller plans the queue again.
    """


def plan_enqueue_shards(request: ChangeRequest, layout: StripeLayout, state: QueueState,
                        installation: Installation) -> Plan:
    """Lanes to create or repair, grants to add and queue_meta rows to switch.

    ``state`` must hold every lane 1..4 x [0, request.shards) of every physical
    queue (missing ones flagged) plus every existing lane of those queues.
    """
    wanted = {(queue, priority, shard) for queue in layout.physical_queues
              for priority in PRIORITIES for shard in range(request.shards)}
    by_key = {lane.key: lane for lane in state.lanes}
    absent = wanted - by_key.keys()
    if absent:
        raise AssertionError(f"lane state lacks wanted lanes, e.g. {sorted(absent)[:3]}")

    # Lanes whose head rows are missing are created (head triggers make their
    # sequences); lanes whose heads exist but whose sequences or names do not
    # are repaired with Awa's own ensure_lane_sequences.
    incomplete = sorted(key for key in wanted if not by_key[key].complete)
    lanes_to_repair = [key for key in incomplete if (by_key[key].has_enqueue_head and not by_key[key].has_enqueue_seq)
                       or (by_key[key].has_claim_head and not by_key[key].has_claim_seq)
                       or not by_key[key].head_names_ok]

    # Grants: every lane sequence of the queue, existing ones as observed,
    # new ones for every runtime role that cannot already use our objects.
    grantees = [role for role in request.runtime_roles if role not in installation.roles_with_creator_privileges]
    pairs: set[tuple[str, str]] = set()
    refused: Counter[str] = Counter()
    for lane in state.lanes:
        lane_pairs = {(role, sequence) for role, dummy, sequence in lane.missing_privileges}
        if lane.key in wanted:
            missing = [sequence for sequence, exists in ((lane.enqueue_seq, lane.has_enqueue_seq),
                                                         (lane.claim_seq, lane.has_claim_seq)) if not exists]
            lane_pairs |= {(role, sequence) for role in grantees for sequence in missing}
        if lane_pairs and not lane.grantable:
            refused.update({owner for owner in (lane.enqueue_seq_owner, lane.claim_seq_owner) if owner is not None})
        pairs |= lane_pairs
    if refused:
        owners = ", ".join(f"{owner} ({count} lanes)" for owner, count in sorted(refused.items()))
        raise PreconditionFailed(
            f"Runtime roles lack privileges on lane sequences of queue {request.queue!r} that "
            f"{installation.current_user!r} cannot grant, because other roles own them: {owners}. "
            f"Run the module as a superuser or as a member of those roles (GRANT <owner> TO "
            f"{installation.current_user}), then retry. Nothing was changed.")

    previous = {queue: state.enqueue_shards[queue] for queue in layout.physical_queues}
    before = {queue: queue_summary(state, queue, previous[queue]) for queue in layout.physical_queues}
    # Only the requested runtime_roles are checked, and all of their gaps are granted.
    after: dict[str, PhysicalQueueSide] = {queue: {
        "enqueue_shards": request.shards, "lanes": before[queue]["lanes"] + sum(key[0] == queue for key in incomplete),
        "lanes_missing": 0, "missing_grants": 0} for queue in layout.physical_queues}
    return Plan(
        queue=request.queue, shards=request.shards, stripes=layout.stripes,
        physical_queues=list(layout.physical_queues), previous_shards=previous,
        lanes_to_create=[key for key in incomplete
                         if not (by_key[key].has_enqueue_head and by_key[key].has_claim_head)],
        lane_rows_to_create=sorted({key[:2] for key in incomplete if not by_key[key].has_lane_row}),
        enqueue_heads_to_create=[key for key in incomplete if not by_key[key].has_enqueue_head],
        claim_heads_to_create=[key for key in incomplete if not by_key[key].has_claim_head],
        lanes_to_repair=lanes_to_repair, grant_sequences=sorted({sequence for dummy, sequence in pairs}),
        grant_roles=sorted({role for role, dummy in pairs}), grants_added=len(pairs),
        meta_queues_to_update=[queue for queue in layout.physical_queues if previous[queue] != request.shards],
        before=before, after=after,
        warnings=[*layout.warnings, *change_warnings([(request.queue, previous, request.shards)])],
    )


def change_warnings(changes: list[tuple[str, dict[str, int], int]]) -> list[str]:
    """What an operator must know about the count switches of ``changes`` (each a queue, the counts its physical
    queues had, and the new count; none for a queue already at it): each warning once, naming every queue it
    concerns, so that a list of a hundred queues warns in a few lines."""
    by_counts: dict[tuple[tuple[int, ...], int], list[str]] = {}
    for queue, previous_shards, shards in changes:
        old = tuple(sorted({count for count in previous_shards.values() if count != shards}))
        if old:
            by_counts.setdefault((old, shards), []).append(queue)
    warnings = []
    for (old, shards), queues in by_counts.items():
        old_text = "/".join(map(str, old))
        lowered = repr(queues[0]) if len(queues) == 1 else named_queues(queues)
        warnings.append(
            f"Running Awa 0.6 runtimes keep enqueue_shards={old_text} for promotion and re-enqueue of "
            f"{'queue ' if len(queues) == 1 else ''}{lowered} until they restart: restart them, then wait with "
            "awa.operations.awa_enqueue_shards_info (wait: converged).")
        if max(old) > shards:
            warnings.append(
                f"Lowering {lowered} from {old_text} to {shards}: jobs already on shards >= {shards} "
                "keep draining (lanes are never deleted); wait with awa_enqueue_shards_info (wait: drained).")
    if any(max(old) > 1 or shards > 1 for old, shards in by_counts):
        warnings.append(
            "ordering_key -> shard mapping changes (hash % enqueue_shards): per-key FIFO does not hold "
            "between jobs enqueued before and after the change while the older ones remain.")
    return warnings
