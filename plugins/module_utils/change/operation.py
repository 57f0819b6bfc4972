# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one path of a change: a list of queues, a single queue being a list of one; usable from Python.

    from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection
    from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
    from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request

    options = {"login_host": "db1", "login_db": "app", "login_user": "awa_migrator"}
    with open_connection(options) as conn:
        result = change_queues(conn, validate_request("orders", 8, runtime_roles=["awa_runtime"]),
                               reconnect=lambda: connect(options))

The data path, one file per step: ``request`` (validated before connecting),
``schema`` (the reads, and the installation's checks), ``queue_rules`` (the
queue's stripes), ``plan``, ``writes`` (the statements, their verification
before the switch, and each queue's transaction: ``writes.apply_change``) and
``schema.ledger`` (the change's record), ``lost_commit``. The queues are read once, in one READ ONLY snapshot
(``_read_and_plan``: the installation, the stored names, the lanes, then each
queue's plan and statements; no lock is taken, so check mode only reads).
Then each queue, in the order given, runs in a transaction of its own, with
its own lock, change id, ledger row and lost-commit resolution: it sends the
lock, the writes, the verification read, the ledger row and the switch
without waiting on each (psycopg's pipeline mode) and commits once their
results are checked. The verification read under the lock finds a queue that
another run changed since the read (``ChangedSinceRead``): that queue is read
and planned again, from what that run committed. A list stops at the first
queue that fails, the queues before it committed. Every transaction waits
for a lock at most ``lock_timeout`` seconds.

Every real run gets a change id (a UUID) that its ledger row carries. If the
connection is lost while COMMIT is in flight, ``reconnect`` (a connect with
the same options) is used to look the change up (``lost_commit``), so the run
reports it committed or not applied instead of "maybe".

Whether a result is one queue's or a list's is decided once, by what was
asked (``change_queues``): a request gives its queue's result and errors as
the module's ``queue`` says them, a list of requests the list's
(``merge_results``; ``_stopped`` names the queue that failed and those
changed before it). Below it every step runs a list. The module's run
(awa_enqueue_shards.run) then reads the changed queues as
awa_enqueue_shards_info does (``change_and_read``) and returns that read as
``observed``.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from ansible_collections.awa.operations.plugins.module_utils.schema import ledger
from ansible_collections.awa.operations.plugins.module_utils.change import writes
from ansible_collections.awa.operations.plugins.module_utils.change.plan import (
    ChangedSinceRead, change_warnings, plan_enqueue_shards)
from ansible_collections.awa.operations.plugins.module_utils.change.request import ChangeRequest
from ansible_collections.awa.operations.plugins.module_utils.change.result import (
    ChangeOutcome, ChangesRun, EnqueueShardsResult, QueueChangeRun)
from ansible_collections.awa.operations.plugins.module_utils.db.connection import render, server_address, transaction
from ansible_collections.awa.operations.plugins.module_utils.db.options import DEFAULT_LOCK_TIMEOUT, DEFAULT_SCHEMA
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    AwaOperationsError, DatabaseError, FailedWithState, UnknownQueue)
from ansible_collections.awa.operations.plugins.module_utils.schema.installation import check_installation, fetch_installation
from ansible_collections.awa.operations.plugins.module_utils.schema.lanes import fetch_queue_state
from ansible_collections.awa.operations.plugins.module_utils.schema.queues import fetch_all_queue_names, fetch_queue_names
from ansible_collections.awa.operations.plugins.module_utils.schema.sessions import (
    describe_lock_holders, fetch_assigned_transaction_id)
from ansible_collections.awa.operations.plugins.module_utils.info.read import read_shards_info
from ansible_collections.awa.operations.plugins.module_utils.info.views import observed_read, shown
from ansible_collections.awa.operations.plugins.module_utils.info.wait import ReadSession, reconnect_with_retries
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import StripeLayout, never_seen, resolve_stripes

if TYPE_CHECKING:
    from typing import TypeAlias

    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection

# How many times a queue is read and planned, when other runs change it between its read and its transaction.
READS_PER_QUEUE = 3
# What a run reports once for all its queues, not in each entry of a list's ``queues``.
_REPORTED_ONCE = ("queries", "diff", "warnings")


def change_and_read(conn: Connection, asked: ChangeRequest | list[ChangeRequest], *, diff: bool,
                    reconnect: Callable[[], Connection] | None, detail: bool = True,
                    **options: Any) -> tuple[EnqueueShardsResult, list[str]]:
    """The change of what was ``asked`` (change_queues), then the read of its queues; the module's result with the
    read as ``observed``, and the warnings of both (the module hands them to Ansible). Without ``detail`` (the
    module's option) the statements and the read's detail are left out (views.shown).

    ``options`` are change_queues' (check_mode, lock_timeout, ledger_schema,
    reason). The read runs on ``conn``, or - when a COMMIT lost it - on a new
    connection from ``reconnect``. A read that fails raises
    ``FailedWithState`` carrying the change's result: the change stands.
    """
    run = change_queues(conn, asked, reconnect=reconnect, **options)
    outcome = module_outcome(run, diff=diff, detail=detail)
    requests = asked if isinstance(asked, list) else [asked]
    session = ReadSession(conn, (lambda: reconnect_with_retries(reconnect)) if reconnect else None)
    try:
        current = session.current()
        read = read_shards_info(current, queues=[request.queue for request in requests],
                                runtime_roles=requests[0].runtime_roles, ledger_schema=options["ledger_schema"],
                                lock_timeout=options["lock_timeout"])
        server = server_address(current)
    except AwaOperationsError as exc:
        done = ("The check-mode run planned the change (nothing was written)" if outcome["check_mode"] else
                "The change was committed (the result says what it did)" if outcome["changed"] else
                "Nothing needed changing")
        raise FailedWithState(
            f"{done}, but reading the state of the queues after it failed: {exc.message} The change stands: a re-run "
            "changes nothing more and reads again; or read the state with awa.operations.awa_enqueue_shards_info.",
            {**outcome, "warnings": run["warnings"]}) from None
    finally:
        session.close()
    result: EnqueueShardsResult = {**outcome, "observed": shown(observed_read(read, server), detail=detail)}
    return result, list(dict.fromkeys(run["warnings"] + read["warnings"]))


def change_queues(conn: Connection, asked: ChangeRequest | list[ChangeRequest], *,
                  reconnect: Callable[[], Connection] | None = None, check_mode: bool = False,
                  lock_timeout: float = DEFAULT_LOCK_TIMEOUT, ledger_schema: str = DEFAULT_SCHEMA,
                  reason: str | None = None) -> QueueChangeRun | ChangesRun:
    """Validate, plan and (unless ``check_mode``) apply the shard-count change ``asked``: one request (the
    module's ``queue``), or a list of them (its ``queues``), each queue in its own transaction, in the order given.
    The result and the errors are said as the form asked: one queue's, or one merged over the list.

    Every queue is planned from one read. A queue another run changed since
    that read (``ChangedSinceRead``) is read and planned again, from what that
    run committed, at most ``READS_PER_QUEUE`` times in all. An error is an
    ``AwaOperationsError``; a list stops at the first queue that fails: the
    queues before it stay changed (each committed on its own), the error
    names them, and a re-run (changes are idempotent) finishes the list. When
    the connection is lost during COMMIT, the change is looked up on a
    connection from ``reconnect``: its result stands if it committed (a list
    goes on, on a new connection), ``CommitNotApplied`` is raised if not,
    ``CommitOutcomeUnknown`` if that cannot be told (always, without ``reconnect``).
    """
    started = time.monotonic()
    requests = asked if isinstance(asked, list) else [asked]
    runs: dict[str, QueueChangeRun] = {}
    planned: Planned = {}
    try:
        with contextlib.ExitStack() as reopened:
            for position, request in enumerate(requests):
                for reads in range(1, READS_PER_QUEUE + 1):
                    if request.queue not in planned:
                        unplanned = [later for later in requests[position:] if later.queue not in planned]
                        planned.update(_read_and_plan(conn, unplanned, lock_timeout=lock_timeout,
                                                      ledger_schema=ledger_schema, reason=reason))
                    prepared = planned.pop(request.queue)
                    if isinstance(prepared, AwaOperationsError):
                        raise prepared
                    if conn.closed and reconnect is not None:
                        conn = reopened.enter_context(contextlib.closing(reconnect_with_retries(reconnect)))
                    try:
                        runs[request.queue] = writes.apply_change(
                            conn, prepared, check_mode=check_mode, lock_timeout=lock_timeout,
                            ledger_schema=ledger_schema, reconnect=reconnect)
                        break
                    except ChangedSinceRead:
                        if reads == READS_PER_QUEUE:
                            raise
    except AwaOperationsError as exc:
        raise _stopped(exc, requests[len(runs)].queue, runs, listed=isinstance(asked, list)) from None
    return merge_results(runs, time.monotonic() - started) if isinstance(asked, list) else runs[asked.queue]


def _stopped(exc: AwaOperationsError, queue: str, runs: dict[str, QueueChangeRun], *,
             listed: bool) -> AwaOperationsError:
    """``exc``, which stopped the change at ``queue``, as the form asked says it: a list's (``listed``) names that
    queue and the queues before it, which stay changed (queues the database has never seen name themselves)."""
    if isinstance(exc, UnknownQueue):
        unknown = cast("list[str]", exc.details["unknown_queues"])
        where = (" on their entries of queues" if len(unknown) > 1 else " on its entry of queues") if listed else ""
        exc = UnknownQueue(
            f"{exc.message}. A change is for queues that exist: correct the name, or - to prepare a new queue "
            f"before its first producer - set new_queue: true{where}." + ("" if listed else " Nothing was changed."),
            **exc.details)
    if not listed:
        return exc
    changed = [name for name, run in runs.items() if run["changed"]]
    done = (f" Queues {', '.join(map(repr, changed))} before it were changed and committed; "
            "re-run to finish the list." if changed else " No queue of the list was changed.")
    subject = "" if isinstance(exc, UnknownQueue) else f"Queue {queue!r}: "
    return type(exc)(f"{subject}{exc.message}{done}", **{**exc.details, "queues": runs})


# Each queue's change as the read plans it, or why it is refused (raised when the run reaches that queue).
# An alias in quotes, its kind for the type checker only: evaluated, it would need Python 3.9 (3.8 sanity).
Planned: TypeAlias = "dict[str, writes.Prepared | AwaOperationsError]"


def _read_and_plan(conn: Connection, requests: list[ChangeRequest], *, lock_timeout: float, ledger_schema: str,
                   reason: str | None) -> Planned:
    """The one read of the queues (READ ONLY, one snapshot, no lock taken) and every request planned from it; a
    refusal is kept for its queue (the queues before it still run). Queues the database has never seen are the run's
    input, refused before any queue runs (``UnknownQueue``, its advice said by ``_stopped``)."""
    action = (f"changing enqueue_shards of queue {requests[0].queue!r}" if len(requests) == 1
              else f"reading {len(requests)} queues to change")
    with transaction(conn, action, lock_timeout=lock_timeout, read_only=True, repeatable_read=True,
                     on_lock_timeout=lambda: describe_lock_holders(conn, ["awa", ledger_schema])):
        roles = list(dict.fromkeys(role for request in requests for role in request.runtime_roles))
        installation = fetch_installation(conn, roles, ledger_schema, ledger.TABLE)
        try:
            # The installation's warnings, the same for every queue.
            schema, warnings = check_installation(installation, tuple(roles))
        except AwaOperationsError as refused:
            # Nothing is read of the queues: the first queue is refused as a single queue would be.
            return {requests[0].queue: refused}
        names = fetch_queue_names(conn, schema, [request.queue for request in requests])
        unknown = [request.queue for request in requests if not request.new_queue and not names.known(request.queue)]
        if unknown:
            known = fetch_all_queue_names(conn, schema, used=True)
            seen = "; ".join(never_seen(queue, known) for queue in unknown)
            raise UnknownQueue(f"{seen[0].upper()}{seen[1:]}", unknown_queues=unknown)
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
            states[runtime_roles] = fetch_queue_state(conn, schema, list(shards), runtime_roles, shards)
        for request in (request for request in requests if request.queue in layouts):
            try:
                plan = plan_enqueue_shards(request, layouts[request.queue], states[request.runtime_roles], installation)
                ledger_plan = ledger.check_ledger(installation, ledger_schema, ledger.TABLE) if (
                    request.ledger and plan.changed) else None
                prepared = writes.prepare_change(request, schema, plan, ledger_schema, ledger_plan, reason, warnings)
                planned[request.queue] = replace(prepared, queries=render(conn, prepared.all))
            except AwaOperationsError as refused:
                planned[request.queue] = refused
        # It only reads, in check mode too: a transaction id would mean it wrote.
        if fetch_assigned_transaction_id(conn) is not None:
            raise DatabaseError("internal error: the read of the queues to change was assigned a transaction id, so "
                                "it wrote something; it was rolled back.")
    return planned


def merge_results(results: dict[str, QueueChangeRun], duration: float) -> ChangesRun:
    """One result for a list of queues: totals and views merged over them, and each queue's own result. The
    warnings each once: the switch warnings each queue gave for itself are given once for all the queues they
    concern (a hundred queues raised together warn in two lines, not a hundred)."""
    runs = [cast("dict[str, Any]", run) for run in results.values()]
    switches = [(run["queue"], run["previous_shards"], run["shards"]) for run in runs]
    own = {warning for switch in switches for warning in change_warnings([switch])}
    warnings = [warning for run in runs for warning in run["warnings"] if warning not in own]
    return cast(ChangesRun, {
        "changed": any(run["changed"] for run in runs), "check_mode": all(run["check_mode"] for run in runs),
        "physical_queues": [name for run in runs for name in run["physical_queues"]],
        "previous_shards": {name: count for run in runs for name, count in run["previous_shards"].items()},
        **{key: sum(run[key] for run in runs) for key in ("lanes_created", "lanes_repaired", "grants_added")},
        "queries": [query for run in runs for query in run["queries"]],
        "diff": {side: {name: view for run in runs for name, view in run["diff"][side].items()}
                 for side in ("before", "after")},
        "warnings": list(dict.fromkeys(warnings + change_warnings(switches))),
        "queues": {run["queue"]: {key: value for key, value in run.items() if key not in _REPORTED_ONCE}
                   for run in runs},
        "duration": round(duration, 3)})


def module_outcome(run: QueueChangeRun | ChangesRun, *, diff: bool, detail: bool = True) -> ChangeOutcome:
    """The module's result of a run, of one queue or a list, but the read after it: the warnings go to Ansible, the
    diff only in diff mode, the statements only with ``detail``."""
    return cast(ChangeOutcome, {key: value for key, value in run.items()
                                if key != "warnings" and (diff or key != "diff") and (detail or key != "queries")})
