# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure planner, with observed states written as plain data."""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest, PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.introspect import Installation, LaneState, QueueState
from ansible_collections.awa.operations.plugins.module_utils.planner import (
    check_installation,
    check_ledger,
    plan_enqueue_shards,
    resolve_stripes,
    validate_request,
)

RUNTIME = "awa_runtime"


def installation(**changes) -> Installation:
    base = Installation(
        server_version_num=180006, current_user="awa_migrator",
        has_awa_schema=True, has_enqueue_shards=True, has_queue_storage_tables=True, schema_version=40,
        storage_state="active", storage_engine="queue_storage", queue_storage_schema="awa",
        ledger_exists=True, can_create_ledger=True, can_write_ledger=True, database="app")
    return dataclasses.replace(base, **changes)


def lane(queue, priority, shard, *, exists=True, owner="awa_migrator", missing=(), grantable=True, **changes):
    """A lane as the lane-state query reports it: complete when ``exists``, absent otherwise."""
    name = f"{queue}:{priority}:{shard}"
    state = LaneState(
        queue=queue, priority=priority, shard=shard, has_lane_row=exists, has_enqueue_head=exists,
        has_claim_head=exists, enqueue_seq=f"e_{name}", claim_seq=f"c_{name}", has_enqueue_seq=exists,
        has_claim_seq=exists, head_names_ok=True, enqueue_seq_owner=owner if exists else None,
        claim_seq_owner=owner if exists else None,
        missing_privileges=[(role, privilege, f"{kind}_{name}") for role in missing
                            for privilege in ("SELECT", "UPDATE", "USAGE") for kind in ("c", "e")],
        grantable=grantable)
    return dataclasses.replace(state, **changes)


def grid(queue, shards, existing_shards, **lane_options):
    """Lanes 1..4 x [0, shards): shards below ``existing_shards`` exist, the others do not."""
    return [lane(queue, p, s, exists=s < existing_shards, **lane_options)
            for p in (1, 2, 3, 4) for s in range(shards)]


def state(lanes, shards_by_queue):
    return QueueState(enqueue_shards=dict(shards_by_queue), lanes=lanes)


def plan(queue="orders", shards=8, lanes=None, current=None, roles=(), stripes=None, known=None, found=None):
    request = validate_request(queue, shards, stripes, roles)
    layout = resolve_stripes(queue, stripes, known if known is not None else [queue])
    current = current or {q: 1 for q in layout.physical_queues}
    return plan_enqueue_shards(request, layout, state(lanes, current), found or installation())


def test_raising_creates_every_missing_lane_and_switches_last():
    result = plan(shards=8, lanes=grid("orders", 8, 1), current={"orders": 1})
    assert result.changed and result.shards_changed
    assert len(result.lanes_to_create) == 4 * 7
    assert all(key[2] >= 1 for key in result.lanes_to_create)
    assert result.meta_queues_to_update == ["orders"]
    assert result.previous_shards == {"orders": 1}
    assert result.before["orders"] == {"enqueue_shards": 1, "lanes": 4, "lanes_missing": 0, "missing_grants": 0}
    assert result.after["orders"] == {"enqueue_shards": 8, "lanes": 32, "lanes_missing": 0, "missing_grants": 0}
    assert any("restart" in warning for warning in result.warnings)


def test_rerun_with_everything_in_place_plans_nothing():
    result = plan(shards=8, lanes=grid("orders", 8, 8), current={"orders": 8}, roles=[RUNTIME])
    assert not result.changed
    assert result.before == result.after
    assert result.warnings == []


def test_lowering_provisions_nothing_and_warns_about_drain():
    lanes = grid("orders", 8, 8)  # shards 2..7 exist and stay
    result = plan(shards=2, lanes=lanes, current={"orders": 8})
    assert result.lanes_to_create == [] and result.grants.pairs == 0
    assert result.meta_queues_to_update == ["orders"]
    assert result.after["orders"]["lanes"] == 32
    assert any("keep draining" in warning for warning in result.warnings)


def test_new_lanes_get_grants_for_every_runtime_role_that_cannot_use_our_objects():
    result = plan(shards=2, lanes=grid("orders", 2, 1), roles=[RUNTIME, "member_of_us"],
                  found=installation(roles_with_creator_privileges=["member_of_us"]))
    new_sequences = 4 * 2  # 4 new lanes x (enqueue, claim)
    assert result.grants.pairs == new_sequences
    assert result.grants.roles == [RUNTIME]


def test_existing_lanes_without_privileges_are_granted_even_without_a_count_change():
    lanes = grid("orders", 2, 2, missing=[RUNTIME])
    result = plan(shards=2, lanes=lanes, current={"orders": 2}, roles=[RUNTIME])
    assert result.changed and not result.shards_changed
    assert result.grants.pairs == 8 * 2
    assert result.before["orders"]["missing_grants"] == 8 * 2 * 3
    assert result.after["orders"]["missing_grants"] == 0


def test_grants_on_sequences_we_cannot_grant_on_are_refused_naming_the_owner():
    lanes = grid("orders", 1, 1, missing=[RUNTIME], owner="other_runtime", grantable=False)
    with pytest.raises(PreconditionFailed, match="other_runtime"):
        plan(shards=1, lanes=lanes, roles=[RUNTIME])


def test_lanes_beyond_the_count_are_granted_too():
    lanes = grid("orders", 2, 2) + [lane("orders", 2, 5, missing=[RUNTIME])]  # left over from a lowering
    result = plan(shards=2, lanes=lanes, current={"orders": 2}, roles=[RUNTIME])
    assert set(result.grants.sequences) == {"e_orders:2:5", "c_orders:2:5"}


def test_a_lane_with_heads_but_no_sequence_is_repaired_not_recreated():
    lanes = grid("orders", 1, 1)
    lanes[0] = dataclasses.replace(lanes[0], has_enqueue_seq=False)
    result = plan(shards=1, lanes=lanes, current={"orders": 1})
    assert result.lanes_to_repair == [("orders", 1, 0)]
    assert result.lanes_to_create == []
    assert result.changed


def test_a_missing_lane_counter_row_alone_is_created():
    lanes = grid("orders", 1, 1)
    lanes[1] = dataclasses.replace(lanes[1], has_lane_row=False)
    result = plan(shards=1, lanes=lanes, current={"orders": 1})
    assert result.lane_rows_to_create == [("orders", 2)]


def test_striped_queue_plans_every_physical_queue():
    lanes = grid("ev#0", 2, 0) + grid("ev#1", 2, 0)
    result = plan(queue="ev", shards=2, stripes=2, lanes=lanes, known=[], current={"ev#0": 1, "ev#1": 1})
    assert result.physical_queues == ["ev#0", "ev#1"]
    assert result.meta_queues_to_update == ["ev#0", "ev#1"]
    assert len(result.lanes_to_create) == 16


@pytest.mark.parametrize("requested, known, expected", [
    (None, [], 1),
    (None, ["q"], 1),
    (None, ["q#0", "q#1"], 2),
    (3, [], 3),
    (2, ["q#0", "q#1", "other#5"], 2),
])
def test_stripes_are_requested_or_detected(requested, known, expected):
    assert resolve_stripes("q", requested, known).stripes == expected


@pytest.mark.parametrize("requested, known, fragment", [
    (3, ["q#0", "q#1"], "stored with 2 stripes"),
    (1, ["q#0", "q#1"], "stored with 2 stripes"),
    (None, ["q#0", "q#2"], "not q#0..q#2"),
])
def test_stripes_that_disagree_with_storage_are_errors(requested, known, fragment):
    with pytest.raises(PreconditionFailed, match=fragment):
        resolve_stripes("q", requested, known)


def test_unstriped_leftovers_of_a_striped_queue_are_a_warning():
    layout = resolve_stripes("q", None, ["q", "q#0", "q#1"])
    assert layout.stripes == 2
    assert "never claim" in layout.warnings[0]


@pytest.mark.parametrize("changes, fragment", [
    ({"has_awa_schema": False}, "no Awa schema"),
    ({"has_enqueue_shards": False, "schema_version": 11}, "schema version 11"),
    ({"storage_state": "canonical", "storage_engine": "canonical"}, "storage_auto_finalize_if_fresh"),
    ({"missing_roles": ["ghost"]}, "ghost"),
])
def test_installations_we_cannot_change_are_refused(changes, fragment):
    with pytest.raises(PreconditionFailed, match=fragment):
        check_installation(installation(**changes), ("ghost",))


def test_untested_schema_versions_only_warn():
    assert "untested" in check_installation(installation(schema_version=47))[0]


@pytest.mark.parametrize("changes, fragment", [
    ({"ledger_exists": False, "can_create_ledger": False}, "GRANT CREATE ON DATABASE app"),
    ({"ledger_exists": True, "can_write_ledger": False}, "GRANT INSERT"),
])
def test_a_ledger_we_cannot_write_is_refused_with_the_grant_or_the_opt_out(changes, fragment):
    with pytest.raises(PreconditionFailed, match=fragment) as error:
        check_ledger(installation(**changes), "awa_operations", "enqueue_shards_changes")
    assert "ledger: false" in error.value.message


@pytest.mark.parametrize("roles", [[""], ["a", "a"], [None]])
def test_bad_runtime_roles_are_refused(roles):
    with pytest.raises(InvalidRequest, match="runtime_roles"):
        validate_request("q", 2, None, roles)
