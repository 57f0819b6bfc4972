# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Observed states written as plain data, as the schema reads return them: shared by the pure tests."""

from __future__ import annotations

import dataclasses
import datetime

from ansible_collections.awa.operations.plugins.module_utils.schema.installation import Installation
from ansible_collections.awa.operations.plugins.module_utils.schema.lanes import LaneState, QueueState
from ansible_collections.awa.operations.plugins.module_utils.schema.runtimes import Runtime
from ansible_collections.awa.operations.plugins.module_utils.schema.ledger import RecordedChange
from ansible_collections.awa.operations.plugins.module_utils.change.plan import Plan, plan_enqueue_shards
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import resolve_stripes

RUNTIME = "awa_runtime"


def installation(**changes) -> Installation:
    base = Installation(
        server_version_num=180006, current_user="awa_migrator",
        has_awa_schema=True, has_enqueue_shards=True, has_queue_storage_tables=True, schema_version=40,
        storage_state="active", storage_engine="queue_storage", queue_storage_schema="awa",
        ledger_exists=True, can_create_ledger=True, can_write_ledger=True, database="app",
        ledger_has_change_id=True, ledger_owner="awa_migrator", can_alter_ledger=True)
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


def plan_for(queue="orders", shards=8, lanes=None, current=None, roles=(), stripes=None, known=None, found=None) -> Plan:
    """The plan for raising (or lowering) ``queue`` to ``shards`` over ``lanes``, each queue at ``current``."""
    request = validate_request(queue, shards, stripes, roles)
    layout = resolve_stripes(queue, stripes, known if known is not None else [queue])
    current = current or {q: 1 for q in layout.physical_queues}
    return plan_enqueue_shards(request, layout, state(lanes, current), found or installation())


CHANGED_AT = datetime.datetime(2026, 11, 29, 10, 0, 0, tzinfo=datetime.timezone.utc)


def runtime(instance="new", started_offset=60.0, live=True, reported=None, pid=100) -> Runtime:
    """A runtime_instances row that started ``started_offset`` seconds after CHANGED_AT."""
    started = CHANGED_AT + datetime.timedelta(seconds=started_offset)
    return Runtime(instance_id=instance, hostname=None, pid=pid, version="0.6.9", started_at=started,
                   last_seen_at=started, live=live, shutting_down=False, healthy=True, leader=False,
                   seconds_since_seen=1.0, seconds_since_start=10.0, reported_shards=reported or {})


def change(to_shards=8, live_ids=("old",), queue="q") -> RecordedChange:
    """The ledger's latest change of ``queue``: 1 -> ``to_shards`` at CHANGED_AT, with ``live_ids`` running."""
    return RecordedChange(id=3, physical_queue=queue, changed_at=CHANGED_AT, from_shards=1, to_shards=to_shards,
                          live_runtime_ids=frozenset(live_ids), changed_by="awa_migrator", reason=None)
