# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The order of the statements a change runs: its safety properties, without a database.

Lane locks come first (Awa's own lane creation waits for us), lanes producers
cannot route to yet before the ones they can, grants before the ledger row,
and the ``awa.queue_meta`` upsert last, so no producer sees a count whose lanes
do not exist. Each statement is recognised by its own SQL text.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from ansible_collections.awa.operations.plugins.module_utils.change.lost_commit import queue_lock
from ansible_collections.awa.operations.plugins.module_utils.change.request import ChangeRequest
from ansible_collections.awa.operations.plugins.module_utils.change.writes import Prepared, Statement, prepare_change
from ansible_collections.awa.operations.plugins.module_utils.change.plan import Plan
from ansible_collections.awa.operations.plugins.module_utils.schema.ledger import LedgerPlan

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.observed import RUNTIME, grid, plan_for

LEDGER_SCHEMA = "awa_operations"
# (kind, pattern of its SQL text), in no particular order.
KINDS = [
    ("lane locks", r'^SELECT count\(pg_advisory_xact_lock\(hashtextextended\(concat_ws'),
    ("enqueue heads", r'^INSERT INTO "awa"\."queue_enqueue_heads" '),
    ("claim heads", r'^INSERT INTO "awa"\."queue_claim_heads" '),
    ("lane repairs", r'^SELECT count\("awa"\."ensure_lane_sequences"\('),
    ("ledger table", r'CREATE TABLE IF NOT EXISTS "awa_operations"\."enqueue_shards_changes"'),
    ("ledger change_id column", r'ALTER TABLE "awa_operations"\."enqueue_shards_changes" ADD COLUMN IF NOT EXISTS'),
    ("lane rows", r'^INSERT INTO "awa"\."queue_lanes" '),
    ("grants", r'^GRANT USAGE, SELECT, UPDATE ON SEQUENCE '),
    ("ledger row", r'^\s*INSERT INTO "awa_operations"\."enqueue_shards_changes" '),
    ("queue_meta upsert", r'^INSERT INTO awa\.queue_meta '),
]


def kind(statement: Statement, plan: Plan) -> str:
    """What a statement does, from its SQL text; heads are "hidden" on shards producers cannot route to yet."""
    text = statement.query.as_string()
    matches = [name for name, pattern in KINDS if re.search(pattern, text)]
    assert len(matches) == 1, f"unrecognised or ambiguous statement {text[:80]!r}: {matches}"
    name = matches[0]
    if name.endswith("heads"):
        params = statement.params
        hidden = {shard >= plan.previous_shards[queue] for queue, shard in zip(params["queues"], params["shards"])}
        assert len(hidden) == 1, "a head statement mixes hidden and visible lanes"
        name = ("hidden " if hidden.pop() else "visible ") + name
    return name


def ledger(create: bool = False, add_change_id: bool = False, records_change_id: bool = True) -> LedgerPlan:
    """How the change writes its ledger (schema.ledger.check_ledger): a ledger row, and the ledger's DDL if any."""
    return LedgerPlan(create, add_change_id, records_change_id, [])


def prepared(plan: Plan, ledger_plan: LedgerPlan | None, reason: str | None = None) -> Prepared:
    """The change of ``plan`` as the read prepares it, in queue-storage schema awa."""
    return prepare_change(ChangeRequest(plan.queue, plan.shards), "awa", plan, LEDGER_SCHEMA, ledger_plan, reason)


def kinds(plan: Plan, ledger_plan: LedgerPlan | None = ledger(create=True)) -> list[str]:
    return [kind(statement, plan) for statement in
            prepared(plan, ledger_plan, reason="CHG-1").all]


def raise_with_every_kind_of_work() -> Plan:
    """orders at 4 shards raised to 8: shards 2 and 3 missing (visible to producers), 4..7 new (hidden),
    a lane counter row missing, one lane whose sequence is gone, and a runtime role lacking grants."""
    lanes = grid("orders", 8, 2, missing=[RUNTIME])
    for index, lane in enumerate(lanes):
        if lane.shard == 1 and lane.priority == 3:
            lanes[index] = dataclasses.replace(lane, has_enqueue_seq=False)
        if lane.priority == 4 and lane.shard >= 2:
            lanes[index] = dataclasses.replace(lane, has_lane_row=False)
    return plan_for(shards=8, lanes=lanes, current={"orders": 4}, roles=[RUNTIME])


def test_a_change_runs_lane_locks_first_the_count_switch_last_and_everything_else_in_between():
    plan = raise_with_every_kind_of_work()
    assert kinds(plan) == [
        "lane locks",
        "hidden enqueue heads", "hidden claim heads",
        "lane repairs",
        "ledger table",
        "lane rows",
        "visible enqueue heads", "visible claim heads",
        "grants",
        "ledger row",
        "queue_meta upsert",
    ]


def test_lane_locks_cover_every_lane_written_in_awas_lane_order():
    plan = raise_with_every_kind_of_work()
    locks = prepared(plan, None).provision[0]
    locked = list(zip(locks.params["queues"], locks.params["priorities"], locks.params["shards"]))
    written = set(plan.enqueue_heads_to_create) | set(plan.claim_heads_to_create) | set(plan.lanes_to_repair)
    assert locked == sorted(written)
    assert locks.params["schema"] == "awa"


def test_the_upsert_switches_every_physical_queue_that_changes_to_the_new_count():
    plan = plan_for(queue="ev", shards=2, stripes=2, lanes=grid("ev#0", 2, 2) + grid("ev#1", 2, 2), known=[],
                    current={"ev#0": 4, "ev#1": 4})
    switch = prepared(plan, None).all[-1]
    assert kind(switch, plan) == "queue_meta upsert"
    assert switch.params == {"queues": ["ev#0", "ev#1"], "shards": 2}


@pytest.mark.parametrize("ledger_plan, expected", [
    (ledger(), ["ledger row", "queue_meta upsert"]),
    (None, ["queue_meta upsert"]),
], ids=["with-ledger", "ledger-false"])
def test_a_lowering_provisions_nothing_and_only_records_and_switches(ledger_plan, expected):
    plan = plan_for(shards=2, lanes=grid("orders", 8, 8), current={"orders": 8})
    assert kinds(plan, ledger_plan) == expected


def test_grants_alone_are_recorded_but_switch_no_count():
    plan = plan_for(shards=2, lanes=grid("orders", 2, 2, missing=[RUNTIME]), current={"orders": 2}, roles=[RUNTIME])
    assert kinds(plan, ledger()) == ["grants", "ledger row"]


def test_an_empty_plan_produces_no_statement():
    plan = plan_for(shards=8, lanes=grid("orders", 8, 8), current={"orders": 8}, roles=[RUNTIME])
    assert not plan.changed
    assert prepared(plan, ledger(create=True)).all == []


@pytest.mark.parametrize("ledger_plan, carries_change_id", [
    (ledger(create=True), True),
    (ledger(), True),
    (ledger(add_change_id=True), True),
    (ledger(records_change_id=False), False),
], ids=["new-ledger", "current-ledger", "0.1.0-ledger-run-by-its-owner", "0.1.0-ledger-run-by-another-role"])
def test_the_ledger_row_carries_the_change_id_the_queue_lock_set_unless_the_column_cannot_exist(
        ledger_plan, carries_change_id):
    plan = plan_for(shards=2, lanes=grid("orders", 8, 8), current={"orders": 8})
    statements = prepared(plan, ledger_plan)
    row = statements.record.query.as_string()
    assert ("CAST(current_setting('awa_operations.change_id') AS uuid)" in row) is carries_change_id
    assert ('"change_id"' in row) is carries_change_id
    added = [kind(statement, plan) for statement in statements.provision]
    assert added == (["ledger change_id column"] if ledger_plan.add_change_id else
                     ["ledger table"] if ledger_plan.create else [])
    assert statements.records_change_id is carries_change_id
    assert all("change_id" not in str(statement.params) for statement in statements.all), \
        "the id is not a parameter: check mode and the real run report the same statements"


def test_the_queue_lock_names_the_change_for_its_transaction_only():
    named = queue_lock("orders", "7d0c0a4e-0000-4000-8000-000000000000")
    assert "set_config(%(setting)s, %(change_id)s, true)" in named.query.as_string()
    assert named.params == {"key": "awa.operations:enqueue_shards:orders", "setting": "awa_operations.change_id",
                            "change_id": "7d0c0a4e-0000-4000-8000-000000000000"}
    assert queue_lock("orders").params == {"key": "awa.operations:enqueue_shards:orders"}
