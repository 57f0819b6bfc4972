# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preconditions: which installations, ledgers and stripe layouts a change or a read accepts."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.errors import PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.info.preconditions import (
    check_installation,
    check_ledger,
    resolve_stripes,
)

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.observed import installation


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
