# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure planner, with observed states written as plain data."""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.awa.operations.plugins.module_utils.errors import PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.change.plan import queue_summary
from ansible_collections.awa.operations.plugins.module_utils.schema.ledger import check_ledger

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.observed import (
    RUNTIME,
    grid,
    installation,
    lane,
    plan_for,
    state,
)


def test_raising_creates_every_missing_lane_and_switches_last():
    result = plan_for(shards=8, lanes=grid("orders", 8, 1), current={"orders": 1})
    assert result.changed and result.meta_queues_to_update
    assert len(result.lanes_to_create) == 4 * 7
    assert all(key[2] >= 1 for key in result.lanes_to_create)
    assert result.meta_queues_to_update == ["orders"]
    assert result.previous_shards == {"orders": 1}
    assert result.before["orders"] == {"enqueue_shards": 1, "lanes": 4, "lanes_missing": 0, "missing_grants": 0}
    assert result.after["orders"] == {"enqueue_shards": 8, "lanes": 32, "lanes_missing": 0, "missing_grants": 0}
    assert any("restart" in warning for warning in result.warnings)


def test_rerun_with_everything_in_place_plans_nothing():
    result = plan_for(shards=8, lanes=grid("orders", 8, 8), current={"orders": 8}, roles=[RUNTIME])
    assert not result.changed
    assert result.before == result.after
    assert result.warnings == []


def test_lowering_provisions_nothing_and_warns_about_drain():
    lanes = grid("orders", 8, 8)  # shards 2..7 exist and stay
    result = plan_for(shards=2, lanes=lanes, current={"orders": 8})
    assert result.lanes_to_create == [] and result.grants_added == 0
    assert result.meta_queues_to_update == ["orders"]
    assert result.after["orders"]["lanes"] == 32
    assert any("keep draining" in warning for warning in result.warnings)


def test_new_lanes_get_grants_for_every_runtime_role_that_cannot_use_our_objects():
    result = plan_for(shards=2, lanes=grid("orders", 2, 1), roles=[RUNTIME, "member_of_us"],
                      found=installation(roles_with_creator_privileges=["member_of_us"]))
    new_sequences = 4 * 2  # 4 new lanes x (enqueue, claim)
    assert result.grants_added == new_sequences
    assert result.grant_roles == [RUNTIME]


def test_existing_lanes_without_privileges_are_granted_even_without_a_count_change():
    lanes = grid("orders", 2, 2, missing=[RUNTIME])
    result = plan_for(shards=2, lanes=lanes, current={"orders": 2}, roles=[RUNTIME])
    assert result.changed and not result.meta_queues_to_update
    assert result.grants_added == 8 * 2
    assert result.before["orders"]["missing_grants"] == 8 * 2 * 3
    assert result.after["orders"]["missing_grants"] == 0


def test_grants_on_sequences_we_cannot_grant_on_are_refused_naming_the_owner():
    lanes = grid("orders", 1, 1, missing=[RUNTIME], owner="other_runtime", grantable=False)
    with pytest.raises(PreconditionFailed, match="other_runtime"):
        plan_for(shards=1, lanes=lanes, roles=[RUNTIME])


def test_lanes_beyond_the_count_are_granted_too():
    lanes = grid("orders", 2, 2) + [lane("orders", 2, 5, missing=[RUNTIME])]  # left over from a lowering
    result = plan_for(shards=2, lanes=lanes, current={"orders": 2}, roles=[RUNTIME])
    assert set(result.grant_sequences) == {"e_orders:2:5", "c_orders:2:5"}


def test_a_lane_with_heads_but_no_sequence_is_repaired_not_recreated():
    lanes = grid("orders", 1, 1)
    lanes[0] = dataclasses.replace(lanes[0], has_enqueue_seq=False)
    result = plan_for(shards=1, lanes=lanes, current={"orders": 1})
    assert result.lanes_to_repair == [("orders", 1, 0)]
    assert result.lanes_to_create == []
    assert result.changed


def test_a_missing_lane_counter_row_alone_is_created():
    lanes = grid("orders", 1, 1)
    lanes[1] = dataclasses.replace(lanes[1], has_lane_row=False)
    result = plan_for(shards=1, lanes=lanes, current={"orders": 1})
    assert result.lane_rows_to_create == [("orders", 2)]


def test_striped_queue_plans_every_physical_queue():
    lanes = grid("ev#0", 2, 0) + grid("ev#1", 2, 0)
    result = plan_for(queue="ev", shards=2, stripes=2, lanes=lanes, known=[], current={"ev#0": 1, "ev#1": 1})
    assert result.physical_queues == ["ev#0", "ev#1"]
    assert result.meta_queues_to_update == ["ev#0", "ev#1"]
    assert len(result.lanes_to_create) == 16


def test_the_summary_counts_complete_lanes_missing_lanes_below_the_count_and_missing_grants():
    lanes = (grid("orders", 2, 2, missing=[RUNTIME])
             + [lane("orders", p, s, exists=False) for p in (1, 2, 3, 4) for s in (2, 3)]
             + [lane("other", 1, 0, missing=[RUNTIME])])
    lanes[0] = dataclasses.replace(lanes[0], has_claim_seq=False)  # priority 1, shard 0: exists but incomplete
    observed = state(lanes, {"orders": 2})
    assert queue_summary(observed, "orders", 2) == {
        "enqueue_shards": 2, "lanes": 7, "lanes_missing": 1, "missing_grants": 8 * 2 * 3}
    # At a planned count of 4 the absent shards 2 and 3 are missing too (this is what verify compares).
    assert queue_summary(observed, "orders", 4)["lanes_missing"] == 1 + 4 * 2


@pytest.mark.parametrize("changes, fragment", [
    ({"ledger_exists": False, "can_create_ledger": False}, "GRANT CREATE ON DATABASE app"),
    ({"ledger_exists": True, "can_write_ledger": False}, "GRANT INSERT"),
])
def test_a_ledger_we_cannot_write_is_refused_with_the_grant_or_the_opt_out(changes, fragment):
    with pytest.raises(PreconditionFailed, match=fragment) as error:
        check_ledger(installation(**changes), "awa_operations", "enqueue_shards_changes")
    assert "ledger: false" in error.value.message


@pytest.mark.parametrize("changes, create, add_change_id, records_change_id", [
    ({"ledger_exists": False, "ledger_owner": None}, True, False, True),
    ({}, False, False, True),
    ({"ledger_has_change_id": False}, False, True, True),
], ids=["new", "current", "0.1.0-run-by-its-owner"])
def test_every_ledger_row_carries_the_change_id_when_the_role_may_add_the_column(
        changes, create, add_change_id, records_change_id):
    plan = check_ledger(installation(**changes), "awa_operations", "enqueue_shards_changes")
    assert (plan.create, plan.add_change_id, plan.records_change_id, plan.warnings) == (
        create, add_change_id, records_change_id, [])


def test_a_ledger_from_0_1_0_that_another_role_owns_is_written_without_the_change_id_and_the_owner_is_named():
    plan = check_ledger(installation(ledger_has_change_id=False, can_alter_ledger=False, ledger_owner="postgres"),
                        "awa_operations", "enqueue_shards_changes")
    assert (plan.create, plan.add_change_id, plan.records_change_id) == (False, False, False)
    assert "only its owner 'postgres' can" in plan.warnings[0]
    assert plan.warnings[0].endswith(
        "ALTER TABLE awa_operations.enqueue_shards_changes ADD COLUMN change_id uuid; CREATE UNIQUE INDEX "
        "enqueue_shards_changes_change_id_key ON awa_operations.enqueue_shards_changes (change_id);")
