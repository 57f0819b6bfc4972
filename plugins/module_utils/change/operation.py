# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Change a queue's enqueue shard count: the whole operation, usable from Python.

    from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection
    from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_enqueue_shards
    from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request

    options = {"login_host": "db1", "login_db": "app", "login_user": "awa_migrator"}
    with open_connection(options) as conn:
        result = change_enqueue_shards(conn, validate_request("orders", 8, runtime_roles=["awa_runtime"]),
                                       reconnect=lambda: connect(options))

The data path, one file per step: ``request`` (validated before connecting),
``info.introspect`` (the reads, and the installation's checks), ``naming``
(the queue's stripes), ``plan`` (and the ledger's), ``apply`` (which verifies
what it provisioned before it switches and commits). The plan is computed inside the
transaction that applies it, after taking a per-queue advisory lock, so
concurrent runs serialize and each sees the other's committed result. Check
mode runs the same reads in a READ ONLY transaction (without the advisory
lock) and returns what the real run would do. Every transaction waits for a
lock at most ``lock_timeout`` seconds.

Every real run gets a change id (a UUID) that its ledger row carries. If the
connection is lost while COMMIT is in flight, ``reconnect`` (a connect with
the same options) is used to look the change up (``lost_commit``), so the run
reports it committed or not applied instead of "maybe".
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ansible_collections.awa.operations.plugins.module_utils import ledger
from ansible_collections.awa.operations.plugins.module_utils.change import apply, lost_commit
from ansible_collections.awa.operations.plugins.module_utils.change.plan import Plan, check_ledger, plan_enqueue_shards
from ansible_collections.awa.operations.plugins.module_utils.change.request import ChangeRequest
from ansible_collections.awa.operations.plugins.module_utils.change.result import QueueChange, QueueChangeRun
from ansible_collections.awa.operations.plugins.module_utils.db.connection import transaction
from ansible_collections.awa.operations.plugins.module_utils.db.options import DEFAULT_LOCK_TIMEOUT
from ansible_collections.awa.operations.plugins.module_utils.errors import DatabaseError, UnknownQueue
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.installation import (
    Installation, check_installation, fetch_installation, storage_schema)
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.lanes import (
    QueueNames, QueueState, fetch_all_queue_names, fetch_queue_names, fetch_queue_state)
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.sessions import (
    describe_lock_holders, fetch_assigned_transaction_id, fetch_transaction_identity)
from ansible_collections.awa.operations.plugins.module_utils.naming import StripeLayout, never_seen, resolve_stripes

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection


def queue_change(plan: Plan, *, changed: bool, check_mode: bool) -> QueueChange:
    """One queue's change as its plan says it (the ledger row, change id and lost commit are added once known)."""
    return {
        "changed": changed,
        "check_mode": check_mode,
        "queue": plan.queue,
        "shards": plan.shards,
        "stripes": plan.stripes,
        "physical_queues": plan.physical_queues,
        "previous_shards": plan.previous_shards,
        "lanes_created": len(plan.lanes_to_create),
        "lanes_repaired": len(plan.lanes_to_repair),
        "grants_added": plan.grants.pairs,
        "ordering": plan.ordering,
        "duration": 0.0,
    }


def _result(plan: Plan, queries: list[str], *, changed: bool, check_mode: bool,
            warnings: list[str]) -> QueueChangeRun:
    return {**queue_change(plan, changed=changed, check_mode=check_mode), "queries": queries,
            "diff": {"before": plan.before, "after": plan.after}, "warnings": warnings}


def change_enqueue_shards(conn: Connection, request: ChangeRequest, *, check_mode: bool = False,
                          lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                          ledger_schema: str = ledger.DEFAULT_SCHEMA, reason: str | None = None,
                          reconnect: Callable[[], Connection] | None = None) -> QueueChangeRun:
    """Validate, plan and (unless ``check_mode``) apply a shard-count change in one transaction.

    Raises an ``AwaOperationsError`` subclass when the change is refused or
    fails; the transaction is then rolled back and nothing is written. When
    the connection is lost during COMMIT, the change is looked up on a
    connection from ``reconnect``: its result is returned if it committed,
    ``CommitNotApplied`` raised if not, ``CommitOutcomeUnknown`` if that
    cannot be told (always, without ``reconnect``).
    """
    # The id its ledger row will carry (a check-mode run writes none, and returns none).
    change_id = str(uuid.uuid4())
    return in_transaction(conn, request.queue, lambda: _change(
        conn, request, check_mode=check_mode, ledger_schema=ledger_schema, reason=reason, change_id=change_id,
        lock_timeout=lock_timeout), check_mode=check_mode, lock_timeout=lock_timeout, ledger_schema=ledger_schema,
        reconnect=reconnect)


def in_transaction(conn: Connection, queue: str, change: Callable[[], QueueChangeRun], *, check_mode: bool, lock_timeout: float,
                   ledger_schema: str, reconnect: Callable[[], Connection] | None) -> QueueChangeRun:
    """``change`` of ``queue`` in a transaction of its own (READ ONLY in check mode), a lost COMMIT settled on a
    connection from ``reconnect``; the result's ``duration`` is the whole of it."""
    started = time.monotonic()
    try:
        with transaction(conn, f"changing enqueue_shards of queue {queue!r}", lock_timeout=lock_timeout,
                         read_only=check_mode,
                         on_lock_timeout=lambda: describe_lock_holders(conn, ["awa", ledger_schema])):
            result = change()
    except lost_commit.Unsettled as unsettled:
        result = lost_commit.settle(unsettled.pending, unsettled.reason, reconnect)
    result["duration"] = round(time.monotonic() - started, 3)
    return result


def without_statements(run: QueueChangeRun) -> QueueChange:
    """A queue's change without what a list run shows once for all its queues (queries, diff, warnings)."""
    entry: QueueChange = {
        "changed": run["changed"], "check_mode": run["check_mode"], "queue": run["queue"], "shards": run["shards"],
        "stripes": run["stripes"], "physical_queues": run["physical_queues"],
        "previous_shards": run["previous_shards"], "lanes_created": run["lanes_created"],
        "lanes_repaired": run["lanes_repaired"], "grants_added": run["grants_added"], "ordering": run["ordering"],
        "duration": run["duration"]}
    if "ledger" in run:
        entry["ledger"] = run["ledger"]
    if "change_id" in run:
        entry["change_id"] = run["change_id"]
    if "lost_commit" in run:
        entry["lost_commit"] = run["lost_commit"]
    return entry


@dataclass
class Prepared:
    """One queue's change, planned from a read: the plan, the statements that make it and how they record it."""

    request: ChangeRequest
    schema: str
    plan: Plan
    statements: apply.ChangeStatements
    warnings: list[str]
    ledger_schema: str
    # Whether a ledger row is written (not with ledger: false, nor when nothing changes), and carries the change id.
    records: bool
    records_change_id: bool


def prepare(request: ChangeRequest, installation: Installation, layout: StripeLayout, state: QueueState, *,
            warnings: list[str], ledger_schema: str, reason: str | None) -> Prepared:
    """The change of ``request`` from what was read (``warnings``: the installation's). Raises its refusal."""
    plan = plan_enqueue_shards(request, layout, state, installation)
    warnings = warnings + plan.warnings
    use_ledger = request.ledger and plan.changed
    ledger_plan = check_ledger(installation, ledger_schema, ledger.TABLE) if use_ledger else None
    warnings += ledger_plan.warnings if ledger_plan else []
    records_change_id = bool(ledger_plan and ledger_plan.records_change_id)
    schema = storage_schema(installation)
    statements = apply.build_change_statements(
        plan, schema, ledger_schema=ledger_schema if use_ledger else None,
        create_ledger=bool(ledger_plan and ledger_plan.create), reason=reason,
        add_change_id=bool(ledger_plan and ledger_plan.add_change_id), record_change_id=records_change_id)
    return Prepared(request, schema, plan, statements, warnings, ledger_schema, use_ledger, records_change_id)


def planned_result(conn: Connection, prepared: Prepared, *, check_mode: bool) -> QueueChangeRun:
    """The result of ``prepared`` as planned (what a check-mode run returns; a real run adds what it recorded)."""
    return _result(prepared.plan, apply.render(conn, prepared.statements.all), changed=prepared.plan.changed,
                   check_mode=check_mode, warnings=prepared.warnings)


def refuse_unknown_queues(conn: Connection, schema: str, requests: list[ChangeRequest], names: QueueNames, *,
                          listed: bool) -> None:
    """Refuse, before anything is written, every queue of ``requests`` the database has never seen (``names``) that
    is not asked for as new (``new_queue``), each named with the known queues closest to it (read only then)."""
    unknown = [request.queue for request in requests if not request.new_queue and not names.known(request.queue)]
    if not unknown:
        return
    stored = fetch_all_queue_names(conn, schema)
    where = " on their entries of queues" if len(unknown) > 1 else " on its entry of queues" if listed else ""
    seen = "; ".join(never_seen(queue, stored) for queue in unknown)
    raise UnknownQueue(
        f"{seen[0].upper()}{seen[1:]}. A change is for queues that exist: correct the name, or - to prepare a new "
        f"queue before its first producer - set new_queue: true{where}." + ("" if listed else " Nothing was changed."),
        unknown_queues=unknown)


def refuse_writes(conn: Connection, run: str) -> None:
    """A ``run`` that only reads (a check-mode run, one with nothing to change, a list's read): a transaction id
    would mean it wrote."""
    if fetch_assigned_transaction_id(conn) is not None:
        raise DatabaseError(f"internal error: {run} was assigned a transaction id, so it wrote something; it was "
                            "rolled back.")


def apply_and_commit(conn: Connection, prepared: Prepared, result: QueueChangeRun, *, change_id: str, lock_timeout: float,
                     lock: bool) -> None:
    """Write ``prepared`` in the caller's transaction and commit it, the statements sent as one pipeline (with the
    queue's lock first when ``lock``); ``result`` gets the ledger row and the change id. A lost COMMIT raises
    ``lost_commit.Unsettled``."""
    plan = prepared.plan
    with conn.pipeline() if prepared.statements.pipelined else contextlib.nullcontext():
        if lock:
            apply.send_queue_lock(conn, plan.queue, change_id)
        recorded = apply.apply_change(conn, plan, prepared.statements, schema=prepared.schema,
                                      runtime_roles=prepared.request.runtime_roles,
                                      ledger_schema=prepared.ledger_schema,
                                      change_id=change_id if prepared.records_change_id else None)
    if recorded is not None:
        result["ledger"] = recorded
    result["change_id"] = change_id
    # Without a change id in the row, a lost commit is looked up by its transaction.
    identity = None if prepared.records_change_id else fetch_transaction_identity(conn)
    lost_commit.commit_change(conn, lost_commit.PendingChange(
        queue=plan.queue, change_id=change_id, result=result,
        ledger_schema=prepared.ledger_schema if prepared.records else None,
        records_change_id=prepared.records_change_id, transaction=identity, lock_timeout=lock_timeout))


def _change(conn: Connection, request: ChangeRequest, *, check_mode: bool, ledger_schema: str, reason: str | None,
            change_id: str, lock_timeout: float) -> QueueChangeRun:
    if not check_mode:
        apply.lock_queue(conn, request.queue, change_id)
    installation = fetch_installation(conn, list(request.runtime_roles), ledger_schema, ledger.TABLE)
    warnings = check_installation(installation, request.runtime_roles)
    schema = storage_schema(installation)
    names = fetch_queue_names(conn, schema, [request.queue])
    refuse_unknown_queues(conn, schema, [request], names, listed=False)
    layout = resolve_stripes(request.queue, request.stripes, names.stored[request.queue])
    state = fetch_queue_state(conn, schema, layout.physical_queues, list(request.runtime_roles), shards=request.shards)
    prepared = prepare(request, installation, layout, state, warnings=warnings, ledger_schema=ledger_schema,
                       reason=reason)
    result = planned_result(conn, prepared, check_mode=check_mode)
    if check_mode or not prepared.plan.changed:
        refuse_writes(conn, "a check-mode run" if check_mode else "a run with nothing to change")
        return result
    apply_and_commit(conn, prepared, result, change_id=change_id, lock_timeout=lock_timeout, lock=False)
    return result
