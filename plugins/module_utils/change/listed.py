# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A change of many queues: one read of them all, then each queue in its own transaction, sent as a pipeline.

Each queue stays atomic and the list does not (the module's contract): every
changed queue commits in its own transaction, with its own lock, change id,
ledger row and lost-commit resolution, in the order given, and the list stops
at the first queue that fails, the queues before it committed. What a list
saves is the work a queue at a time repeats: the installation, the stored
names and the lanes of every queue are read once, in one snapshot, and each
queue's plan is made from that read; its transaction then sends the lock,
the writes, the verification read, the ledger row and the switch without
waiting on each (psycopg's pipeline mode) and commits once their results
are checked. The verification read under the lock also finds a queue that
another run changed since the read: that queue is planned again in its own
transaction, as a single queue is (``operation.change_enqueue_shards``).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ansible_collections.awa.operations.plugins.module_utils import ledger
from ansible_collections.awa.operations.plugins.module_utils.change import apply
from ansible_collections.awa.operations.plugins.module_utils.change.operation import (
    Prepared,
    apply_and_commit,
    change_enqueue_shards,
    in_transaction,
    planned_result,
    prepare,
    refuse_unknown_queues,
    refuse_writes,
    without_statements,
)
from ansible_collections.awa.operations.plugins.module_utils.change.plan import Switch, change_warnings
from ansible_collections.awa.operations.plugins.module_utils.change.request import ChangeRequest
from ansible_collections.awa.operations.plugins.module_utils.change.result import ChangesRun, QueueChangeRun
from ansible_collections.awa.operations.plugins.module_utils.db.connection import transaction
from ansible_collections.awa.operations.plugins.module_utils.db.options import DEFAULT_LOCK_TIMEOUT
from ansible_collections.awa.operations.plugins.module_utils.db.reopening import reconnect_with_retries
from ansible_collections.awa.operations.plugins.module_utils.errors import AwaOperationsError, UnknownQueue
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.installation import (
    check_installation, fetch_installation, storage_schema)
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.lanes import (
    fetch_queue_names, fetch_queue_state)
from ansible_collections.awa.operations.plugins.module_utils.naming import StripeLayout, resolve_stripes

if TYPE_CHECKING:
    from typing import TypeAlias

    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection

# Each queue's change as the read plans it, or why it is refused (raised when the list reaches that queue).
# An alias in quotes, its kind for the type checker only: evaluated, it would need Python 3.9 (3.8 sanity).
Planned: TypeAlias = "dict[str, Prepared | AwaOperationsError]"


def _planned_each(conn: Connection, requests: list[ChangeRequest], *, ledger_schema: str, reason: str | None) -> Planned:
    """Every request planned from one read; a refusal is kept for its queue (the queues before it still run). Queues
    the database has never seen are the list's input, refused before any queue runs (``UnknownQueue``)."""
    roles = sorted({role for request in requests for role in request.runtime_roles})
    installation = fetch_installation(conn, roles, ledger_schema, ledger.TABLE)
    try:
        check_installation(installation, tuple(roles))
        schema = storage_schema(installation)
    except AwaOperationsError as refused:
        # Nothing is read of the queues: the first queue is refused as a single queue would be.
        return {requests[0].queue: refused}
    names = fetch_queue_names(conn, schema, [request.queue for request in requests])
    refuse_unknown_queues(conn, schema, requests, names, listed=True)
    planned: Planned = {}
    layouts: dict[str, StripeLayout] = {}
    for request in requests:
        try:
            layouts[request.queue] = resolve_stripes(request.queue, request.stripes, names.stored[request.queue])
        except AwaOperationsError as refused:
            planned[request.queue] = refused
    # The lanes' grants are read for the runtime roles of each request: one read per set of roles (a list has one).
    states = {}
    for runtime_roles in {request.runtime_roles for request in requests}:
        shards = {physical: request.shards for request in requests if request.runtime_roles == runtime_roles
                  and request.queue in layouts for physical in layouts[request.queue].physical_queues}
        states[runtime_roles] = fetch_queue_state(conn, schema, list(shards), list(runtime_roles), shards=shards)
    for request in requests:
        if request.queue not in layouts:
            continue
        try:
            planned[request.queue] = prepare(
                request, installation, layouts[request.queue], states[request.runtime_roles],
                warnings=check_installation(installation, request.runtime_roles), ledger_schema=ledger_schema,
                reason=reason)
        except AwaOperationsError as refused:
            planned[request.queue] = refused
    return planned


def read_and_plan(conn: Connection, requests: list[ChangeRequest], *, lock_timeout: float, ledger_schema: str,
                  reason: str | None) -> Planned:
    """The one read of the list (READ ONLY, one snapshot) and every queue's plan."""
    with transaction(conn, f"reading {len(requests)} queues to change", lock_timeout=lock_timeout, read_only=True,
                     repeatable_read=True):
        planned = _planned_each(conn, requests, ledger_schema=ledger_schema, reason=reason)
        refuse_writes(conn, "the read of a list of queues")
    return planned


def _change_planned(conn: Connection, prepared: Prepared, *, check_mode: bool, lock_timeout: float,
                    reconnect: Callable[[], Connection] | None, **options: Any) -> QueueChangeRun:
    """One queue of the list: its planned result, or its transaction (planned again when it changed since)."""
    if check_mode or not prepared.plan.changed:
        started = time.monotonic()
        result = planned_result(conn, prepared, check_mode=check_mode)
        result["duration"] = round(time.monotonic() - started, 3)
        return result
    change_id = str(uuid.uuid4())

    def body() -> QueueChangeRun:
        result = planned_result(conn, prepared, check_mode=False)
        apply_and_commit(conn, prepared, result, change_id=change_id, lock_timeout=lock_timeout, lock=True)
        return result
    try:
        return in_transaction(conn, prepared.plan.queue, body, check_mode=False, lock_timeout=lock_timeout,
                              ledger_schema=prepared.ledger_schema, reconnect=reconnect)
    except apply.ChangedSinceRead:
        return change_enqueue_shards(conn, prepared.request, check_mode=False, lock_timeout=lock_timeout,
                                     ledger_schema=prepared.ledger_schema, reconnect=reconnect, **options)


def change_many_queues(conn: Connection, requests: list[ChangeRequest], *, reconnect: Callable[[], Connection] | None = None,
                       check_mode: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                       ledger_schema: str = ledger.DEFAULT_SCHEMA, reason: str | None = None) -> ChangesRun:
    """Change every request on one connection, each queue in its own transaction, in the order given.

    It stops at the first queue that fails: the queues before it stay changed
    (each committed on its own), the error names them, and a re-run (changes
    are idempotent) finishes the list. A queue whose COMMIT lost the
    connection but was found committed does not stop it: the next queue runs
    on a new connection from ``reconnect``.
    """
    started = time.monotonic()
    results: dict[str, QueueChangeRun] = {}
    try:
        planned = read_and_plan(conn, requests, lock_timeout=lock_timeout,
                                ledger_schema=ledger_schema, reason=reason)
    except AwaOperationsError as exc:
        raise _stopped_at(requests[0], exc, results) from None
    with contextlib.ExitStack() as reopened:
        for request in requests:
            try:
                prepared = planned[request.queue]
                if isinstance(prepared, AwaOperationsError):
                    raise prepared
                if conn.closed and reconnect is not None:
                    conn = reopened.enter_context(contextlib.closing(reconnect_with_retries(reconnect)))
                results[request.queue] = _change_planned(conn, prepared, check_mode=check_mode,
                                                         lock_timeout=lock_timeout, reconnect=reconnect, reason=reason)
            except AwaOperationsError as exc:
                raise _stopped_at(request, exc, results) from None
    return merge_results(results, time.monotonic() - started)


def _stopped_at(request: ChangeRequest, exc: AwaOperationsError,
                results: dict[str, QueueChangeRun]) -> AwaOperationsError:
    """The failure of ``request``'s queue, saying which queues before it were changed and committed (queues the
    database has never seen name themselves)."""
    changed = [queue for queue, result in results.items() if result["changed"]]
    done = (f" Queues {', '.join(map(repr, changed))} before it were changed and committed; "
            "re-run to finish the list." if changed else " No queue of the list was changed.")
    subject = "" if isinstance(exc, UnknownQueue) else f"Queue {request.queue!r}: "
    return type(exc)(f"{subject}{exc.message}{done}", **{**exc.details, "queues": results})


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
