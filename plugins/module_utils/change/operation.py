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
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils import ledger
from ansible_collections.awa.operations.plugins.module_utils.change import apply, lost_commit
from ansible_collections.awa.operations.plugins.module_utils.change.plan import Plan, Switch, change_warnings, check_ledger, plan_enqueue_shards
from ansible_collections.awa.operations.plugins.module_utils.change.request import ChangeRequest
from ansible_collections.awa.operations.plugins.module_utils.change.result import (
    ChangesRun,
    QueueChange,
    QueueChangeRun,
)
from ansible_collections.awa.operations.plugins.module_utils.db.connection import transaction
from ansible_collections.awa.operations.plugins.module_utils.db.options import DEFAULT_LOCK_TIMEOUT
from ansible_collections.awa.operations.plugins.module_utils.db.reopening import reconnect_with_retries
from ansible_collections.awa.operations.plugins.module_utils.errors import AwaOperationsError, DatabaseError
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.installation import check_installation, fetch_installation, storage_schema
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.lanes import fetch_known_queue_names, fetch_queue_state
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.sessions import (
    describe_lock_holders, fetch_assigned_transaction_id, fetch_transaction_identity)
from ansible_collections.awa.operations.plugins.module_utils.naming import resolve_stripes


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


def change_enqueue_shards(conn, request: ChangeRequest, *, check_mode: bool = False,
                          lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                          ledger_schema: str = ledger.DEFAULT_SCHEMA, reason: str | None = None,
                          reconnect: Callable[[], Any] | None = None) -> QueueChangeRun:
    """Validate, plan and (unless ``check_mode``) apply a shard-count change in one transaction.

    Raises an ``AwaOperationsError`` subclass when the change is refused or
    fails; the transaction is then rolled back and nothing is written. When
    the connection is lost during COMMIT, the change is looked up on a
    connection from ``reconnect``: its result is returned if it committed,
    ``CommitNotApplied`` raised if not, ``CommitOutcomeUnknown`` if that
    cannot be told (always, without ``reconnect``).
    """
    started = time.monotonic()
    # The id its ledger row will carry (a check-mode run writes none, and returns none).
    change_id = str(uuid.uuid4())
    try:
        with transaction(conn, f"changing enqueue_shards of queue {request.queue!r}", lock_timeout=lock_timeout,
                         read_only=check_mode,
                         on_lock_timeout=lambda: describe_lock_holders(conn, ["awa", ledger_schema])):
            result = _change(conn, request, check_mode=check_mode, ledger_schema=ledger_schema, reason=reason,
                             change_id=change_id, lock_timeout=lock_timeout)
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


def list_warnings(runs: list[QueueChangeRun]) -> list[str]:
    """The warnings of a list's queues, each once: the switch warnings each queue gave for itself are given once
    for all the queues they concern (a hundred queues raised together warn in two lines, not a hundred)."""
    switches = [Switch.of(run["queue"], run["previous_shards"], run["shards"]) for run in runs]
    own = {warning for switch in switches if switch for warning in change_warnings([switch])}
    others = [warning for run in runs for warning in run["warnings"] if warning not in own]
    return list(dict.fromkeys(others + change_warnings([switch for switch in switches if switch])))


def merge_results(results: dict[str, QueueChangeRun], duration: float) -> ChangesRun:
    """One result for a list of queues: totals and views merged over them, and each queue's own result."""
    ordered = list(results.values())
    return {
        "changed": any(result["changed"] for result in ordered),
        "check_mode": all(result["check_mode"] for result in ordered),
        "physical_queues": [name for result in ordered for name in result["physical_queues"]],
        "previous_shards": {name: count for result in ordered for name, count in result["previous_shards"].items()},
        "lanes_created": sum(result["lanes_created"] for result in ordered),
        "lanes_repaired": sum(result["lanes_repaired"] for result in ordered),
        "grants_added": sum(result["grants_added"] for result in ordered),
        "queries": [query for result in ordered for query in result["queries"]],
        "diff": {"before": {name: view for result in ordered for name, view in result["diff"]["before"].items()},
                 "after": {name: view for result in ordered for name, view in result["diff"]["after"].items()}},
        "warnings": list_warnings(ordered),
        "queues": {queue: without_statements(result) for queue, result in results.items()},
        "duration": round(duration, 3),
    }


def change_many_queues(conn, requests: list[ChangeRequest], *, reconnect: Callable[[], Any] | None = None,
                       **options) -> ChangesRun:
    """``change_enqueue_shards`` for each request in turn, on one connection, each in its own transaction.

    It stops at the first queue that fails: the queues before it stay changed
    (each committed on its own), the error names them, and a re-run (changes
    are idempotent) finishes the list. A queue whose COMMIT lost the
    connection but was found committed does not stop it: the next queue runs
    on a new connection from ``reconnect``.
    """
    started = time.monotonic()
    results: dict[str, QueueChangeRun] = {}
    with contextlib.ExitStack() as reopened:
        for request in requests:
            try:
                if conn.closed and reconnect is not None:
                    conn = reopened.enter_context(contextlib.closing(reconnect_with_retries(reconnect)))
                results[request.queue] = change_enqueue_shards(conn, request, reconnect=reconnect, **options)
            except AwaOperationsError as exc:
                changed = [queue for queue, result in results.items() if result["changed"]]
                done = (f" Queues {', '.join(map(repr, changed))} before it were changed and committed; "
                        "re-run to finish the list." if changed else " No queue of the list was changed.")
                raise type(exc)(f"Queue {request.queue!r}: {exc.message}{done}",
                                **{**exc.details, "queues": results}) from None
    return merge_results(results, time.monotonic() - started)


def _change(conn, request: ChangeRequest, *, check_mode: bool, ledger_schema: str, reason: str | None,
            change_id: str, lock_timeout: float) -> QueueChangeRun:
    if not check_mode:
        apply.lock_queue(conn, request.queue, change_id)
    installation = fetch_installation(conn, list(request.runtime_roles), ledger_schema, ledger.TABLE)
    warnings = check_installation(installation, request.runtime_roles)
    schema = storage_schema(installation)
    known = fetch_known_queue_names(conn, schema, request.queue)
    layout = resolve_stripes(request.queue, request.stripes, known)
    state = fetch_queue_state(conn, schema, layout.physical_queues, list(request.runtime_roles), shards=request.shards)
    plan = plan_enqueue_shards(request, layout, state, installation)
    warnings += plan.warnings
    use_ledger = request.ledger and plan.changed
    ledger_plan = check_ledger(installation, ledger_schema, ledger.TABLE) if use_ledger else None
    warnings += ledger_plan.warnings if ledger_plan else []
    records_change_id = bool(ledger_plan and ledger_plan.records_change_id)
    statements = apply.build_change_statements(
        plan, schema, ledger_schema=ledger_schema if use_ledger else None,
        create_ledger=bool(ledger_plan and ledger_plan.create), reason=reason,
        add_change_id=bool(ledger_plan and ledger_plan.add_change_id), record_change_id=records_change_id)
    result = _result(plan, apply.render(conn, statements.all), changed=plan.changed, check_mode=check_mode,
                     warnings=warnings)
    if check_mode or not plan.changed:
        # Both only read: a transaction id would mean something was written.
        if fetch_assigned_transaction_id(conn) is not None:
            raise DatabaseError(f"internal error: a {'check-mode run' if check_mode else 'run with nothing to change'} "
                                "was assigned a transaction id, so it wrote something; it was rolled back.")
        return result
    recorded = apply.apply_change(conn, plan, statements, schema=schema, runtime_roles=request.runtime_roles,
                                  ledger_schema=ledger_schema, change_id=change_id if records_change_id else None)
    if recorded is not None:
        result["ledger"] = recorded
    result["change_id"] = change_id
    # Without a change id in the row, a lost commit is looked up by its transaction.
    identity = None if records_change_id else fetch_transaction_identity(conn)
    lost_commit.commit_change(conn, lost_commit.PendingChange(
        queue=request.queue, change_id=change_id, result=result, ledger_schema=ledger_schema if use_ledger else None,
        records_change_id=records_change_id, transaction=identity, lock_timeout=lock_timeout))
    return result
