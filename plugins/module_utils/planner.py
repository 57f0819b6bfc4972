# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure planner for a shard-count change: observed state + request -> plan.

No I/O, no clock, no module object: ``plan_enqueue_shards`` and the checks it
uses are tested with plain tables. An empty plan means "nothing to write".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest, PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.introspect import Installation, LaneState, QueueState
from ansible_collections.awa.operations.plugins.module_utils.naming import (
    PRIORITIES,
    ordering_contract,
    physical_queues,
    stripe_index,
    validate_queue_name,
    validate_shards,
    validate_stripes,
)

# Awa schema versions (awa.schema_version) of the releases this collection is tested with:
# 39 = awa 0.6.0, 40 = awa 0.6.3 .. 0.6.9.
TESTED_SCHEMA_VERSIONS = (39, 40)
MIN_SERVER_VERSION_NUM = 170000

LaneKey = tuple  # (queue, priority, shard)


@dataclass(frozen=True)
class ChangeRequest:
    """What the operator asked for, validated by ``validate_request``."""

    queue: str
    shards: int
    stripes: int | None = None
    runtime_roles: tuple[str, ...] = ()
    ledger: bool = True


def validate_request(queue: object, shards: object, stripes: object = None,
                     runtime_roles: object = (), ledger: bool = True) -> ChangeRequest:
    """Check the options before touching the database."""
    roles = tuple(runtime_roles or ())
    for role in roles:
        if not isinstance(role, str) or not role.strip():
            raise InvalidRequest(f"runtime_roles must be non-empty role names, got {role!r}")
    if len(set(roles)) != len(roles):
        raise InvalidRequest(f"runtime_roles lists a role twice: {list(roles)}")
    return ChangeRequest(
        queue=validate_queue_name(queue),
        shards=validate_shards(shards),
        stripes=None if stripes is None else validate_stripes(stripes),
        runtime_roles=roles,
        ledger=bool(ledger),
    )


def validate_requests(entries: object, runtime_roles: object = (), ledger: bool = True) -> list[ChangeRequest]:
    """A list of ``{queue, shards[, stripes]}`` changes, each checked like ``validate_request``."""
    if not isinstance(entries, list) or not entries:
        raise InvalidRequest("queues must be a non-empty list of {queue, shards[, stripes]} entries")
    requests = []
    for entry in entries:
        if not isinstance(entry, dict) or not {"queue", "shards"} <= entry.keys():
            raise InvalidRequest(f"each entry of queues needs queue and shards (stripes is optional), got {entry!r}")
        requests.append(validate_request(entry["queue"], entry["shards"], entry.get("stripes"), runtime_roles, ledger))
    names = [request.queue for request in requests]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InvalidRequest(f"queues names a queue more than once: {', '.join(map(repr, repeated))}")
    return requests


def check_installation(found: Installation, runtime_roles: tuple[str, ...] = ()) -> list[str]:
    """Refuse an installation we cannot safely change; return warnings otherwise."""
    where = f"database {found.database!r}"
    if not found.has_awa_schema:
        raise PreconditionFailed(
            f"{where} has no Awa schema 'awa'. Check login_db, or install Awa there with `awa migrate` "
            "(awa-cli 0.6.8 or newer).")
    if not found.has_enqueue_shards or not found.has_queue_storage_tables:
        version = found.schema_version if found.schema_version is not None else "unknown"
        raise PreconditionFailed(
            f"The Awa schema in {where} (schema version {version}) has no enqueue shards "
            "(awa.queue_meta.enqueue_shards and the queue-storage lane tables arrived with Awa 0.6.0). "
            "Upgrade Awa to 0.6.8 or 0.6.9 and run `awa migrate`, then retry.")
    if found.storage_state != "active" or found.storage_engine != "queue_storage" or not found.queue_storage_schema:
        raise PreconditionFailed(
            f"The queue-storage engine is not active in {where} (state={found.storage_state}, "
            f"engine={found.storage_engine}); enqueue_shards only applies to queue storage. "
            "On a fresh database run `SELECT awa.storage_auto_finalize_if_fresh('awa')` or start a worker; "
            "on a database with canonical jobs use `awa storage prepare --engine queue_storage`, "
            "`awa storage enter-mixed-transition` and `awa storage finalize`.")
    missing = [role for role in runtime_roles if role in found.missing_roles]
    if missing:
        raise PreconditionFailed(
            f"runtime_roles do not exist in {where}'s cluster: {', '.join(missing)}. "
            "Create them (CREATE ROLE ... LOGIN) or correct the names.")
    warnings = []
    if found.schema_version not in TESTED_SCHEMA_VERSIONS:
        warnings.append(
            f"Awa schema version {found.schema_version} is untested with this collection "
            f"(tested: {', '.join(map(str, TESTED_SCHEMA_VERSIONS))}, i.e. awa 0.6.x).")
    if found.server_version_num < MIN_SERVER_VERSION_NUM:
        warnings.append(f"PostgreSQL {found.server_version_num // 10000} is untested; supported: 17 and 18.")
    return warnings


@dataclass(frozen=True)
class StripeLayout:
    stripes: int
    physical_queues: list[str]
    warnings: list[str]


def resolve_stripes(queue: str, requested: int | None, known_names: list[str]) -> StripeLayout:
    """Which physical queues ``queue`` has: from the request, or from the stored names.

    A stored layout that disagrees with the request is an error, not a guess.
    """
    stored = sorted({index for index in (stripe_index(queue, name) for name in known_names) if index is not None})
    plain_exists = queue in known_names
    warnings = []
    if stored and stored != list(range(stored[-1] + 1)):
        found = ", ".join(f"{queue}#{index}" for index in stored)
        raise PreconditionFailed(
            f"queue {queue!r} has stripes {found}, which are not {queue}#0..{queue}#{stored[-1]}. "
            "Check the runtimes' queue_storage_queue_stripe_count and pass stripes explicitly once it is fixed.")
    detected = stored[-1] + 1 if stored else 1
    if requested is None:
        stripes = detected
    elif stored and requested != detected:
        raise PreconditionFailed(
            f"stripes={requested} was requested, but queue {queue!r} is stored with {detected} stripes "
            f"({queue}#0..{queue}#{detected - 1}). Set stripes to the runtimes' queue_storage_queue_stripe_count "
            f"({detected} if they are unchanged).")
    else:
        stripes = requested
    if stripes > 1 and plain_exists:
        warnings.append(
            f"queue {queue!r} also has unstriped lanes or a queue_meta row: runtimes with {stripes} stripes "
            f"never claim jobs from {queue!r} itself (only from {queue}#0..{queue}#{stripes - 1}).")
    return StripeLayout(stripes, physical_queues(queue, stripes), warnings)


@dataclass
class GrantSet:
    """Sequences that need USAGE, SELECT, UPDATE for some runtime roles."""

    sequences: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    pairs: int = 0  # (role, sequence) pairs that lacked at least one privilege


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
    grants: GrantSet
    meta_queues_to_update: list[str]
    before: dict[str, dict]
    after: dict[str, dict]
    warnings: list[str]

    @property
    def changed(self) -> bool:
        return bool(self.lanes_to_create or self.lane_rows_to_create or self.enqueue_heads_to_create
                    or self.claim_heads_to_create or self.lanes_to_repair or self.grants.pairs
                    or self.meta_queues_to_update)

    @property
    def shards_changed(self) -> bool:
        return bool(self.meta_queues_to_update)

    @property
    def ordering(self) -> str:
        return ordering_contract(self.shards)


def _needs_sequence_repair(lane: LaneState) -> bool:
    """An existing head row whose sequence is missing, or whose seq_name is wrong."""
    return ((lane.has_enqueue_head and not lane.has_enqueue_seq)
            or (lane.has_claim_head and not lane.has_claim_seq)
            or not lane.head_names_ok)


def _missing_pairs(lane: LaneState) -> set[tuple[str, str]]:
    return {(role, sequence) for role, dummy, sequence in lane.missing_privileges}


def _queue_summary(state: QueueState, queue: str, shards: int, missing_grants: int) -> dict:
    lanes = state.lanes_of(queue)
    return {
        "enqueue_shards": shards,
        "lanes": sum(1 for lane in lanes if lane.complete),
        "lanes_missing": sum(1 for lane in lanes if lane.shard < shards and not lane.complete),
        "missing_grants": missing_grants,
    }


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
    lanes_to_create = [key for key in incomplete if not by_key[key].heads_exist]
    lanes_to_repair = [key for key in incomplete if _needs_sequence_repair(by_key[key])]
    lane_rows = sorted({key[:2] for key in incomplete if not by_key[key].has_lane_row})
    enqueue_heads = [key for key in incomplete if not by_key[key].has_enqueue_head]
    claim_heads = [key for key in incomplete if not by_key[key].has_claim_head]

    # Grants: every lane sequence of the queue, existing ones as observed,
    # new ones for every runtime role that cannot already use our objects.
    grants = GrantSet()
    pairs: set[tuple[str, str]] = set()
    refused: dict[str, int] = {}
    for lane in state.lanes:
        lane_pairs = _missing_pairs(lane)
        if lane.key in wanted and not (lane.has_enqueue_seq and lane.has_claim_seq):
            creator_privileged = set(installation.roles_with_creator_privileges)
            for role in request.runtime_roles:
                if role not in creator_privileged:
                    if not lane.has_enqueue_seq:
                        lane_pairs.add((role, lane.enqueue_seq))
                    if not lane.has_claim_seq:
                        lane_pairs.add((role, lane.claim_seq))
        if lane_pairs and not lane.grantable:
            for owner in {lane.enqueue_seq_owner, lane.claim_seq_owner} - {None}:
                refused[owner] = refused.get(owner, 0) + 1
        pairs |= lane_pairs
    if refused:
        owners = ", ".join(f"{owner} ({count} lanes)" for owner, count in sorted(refused.items()))
        raise PreconditionFailed(
            f"Runtime roles lack privileges on lane sequences of queue {request.queue!r} that "
            f"{installation.current_user!r} cannot grant, because other roles own them: {owners}. "
            f"Run the module as a superuser or as a member of those roles (GRANT <owner> TO "
            f"{installation.current_user}), then retry. Nothing was changed.")
    grants.pairs = len(pairs)
    grants.sequences = sorted({sequence for dummy, sequence in pairs})
    grants.roles = sorted({role for role, dummy in pairs})

    previous = {queue: state.enqueue_shards[queue] for queue in layout.physical_queues}
    meta_updates = [queue for queue in layout.physical_queues if previous[queue] != request.shards]

    missing_by_queue = {queue: 0 for queue in layout.physical_queues}
    for lane in state.lanes:
        missing_by_queue[lane.queue] += len(lane.missing_privileges)
    before = {queue: _queue_summary(state, queue, previous[queue], missing_by_queue[queue])
              for queue in layout.physical_queues}
    created_by_queue = {queue: sum(1 for key in incomplete if key[0] == queue) for queue in layout.physical_queues}
    after = {}
    for queue in layout.physical_queues:
        complete_after = before[queue]["lanes"] + created_by_queue[queue]
        # Only the requested runtime_roles are checked, and all of their gaps are granted.
        after[queue] = {"enqueue_shards": request.shards, "lanes": complete_after,
                        "lanes_missing": 0, "missing_grants": 0}

    plan = Plan(
        queue=request.queue, shards=request.shards, stripes=layout.stripes,
        physical_queues=list(layout.physical_queues), previous_shards=previous,
        lanes_to_create=lanes_to_create, lane_rows_to_create=lane_rows,
        enqueue_heads_to_create=enqueue_heads, claim_heads_to_create=claim_heads,
        lanes_to_repair=lanes_to_repair, grants=grants, meta_queues_to_update=meta_updates,
        before=before, after=after, warnings=list(layout.warnings),
    )
    plan.warnings.extend(change_warnings(plan))
    return plan


def check_ledger(installation: Installation, ledger_schema: str, ledger_table: str) -> None:
    """Refuse a change whose ledger row could not be written (before writing anything)."""
    name = f"{ledger_schema}.{ledger_table}"
    who = installation.current_user
    if installation.ledger_exists and not installation.can_write_ledger:
        raise PreconditionFailed(
            f"The change ledger {name} exists but {who!r} cannot INSERT into it. "
            f"GRANT USAGE ON SCHEMA {ledger_schema} TO {who}; GRANT INSERT, SELECT ON {name} TO {who}; "
            "or set ledger: false to change without a record "
            "(convergence can then not be judged). Nothing was changed.")
    if not installation.ledger_exists and not installation.can_create_ledger:
        raise PreconditionFailed(
            f"The change ledger {name} does not exist and {who!r} may not create it. Either let an "
            f"administrator run this module once, or GRANT CREATE ON DATABASE {installation.database} TO {who} "
            f"(or CREATE ON SCHEMA {ledger_schema} if it exists); or set ledger: false to change without a "
            "record (convergence can then not be judged). Nothing was changed.")


def change_warnings(plan: Plan) -> list[str]:
    """What an operator must know about the switch itself."""
    if not plan.shards_changed:
        return []
    old = sorted({plan.previous_shards[queue] for queue in plan.meta_queues_to_update})
    old_text = "/".join(map(str, old))
    warnings = [
        f"Running Awa 0.6 runtimes keep enqueue_shards={old_text} for promotion and re-enqueue of queue "
        f"{plan.queue!r} until they restart: restart them, then wait with "
        "awa.operations.awa_enqueue_shards_info (wait: converged)."]
    if max(old) > plan.shards:
        warnings.append(
            f"Lowering {plan.queue!r} from {old_text} to {plan.shards}: jobs already on shards >= {plan.shards} "
            "keep draining (lanes are never deleted); wait with awa_enqueue_shards_info (wait: drained).")
    if max(old) > 1 or plan.shards > 1:
        warnings.append(
            "ordering_key -> shard mapping changes (hash % enqueue_shards): per-key FIFO does not hold "
            "between jobs enqueued before and after the change while the older ones remain.")
    return warnings
