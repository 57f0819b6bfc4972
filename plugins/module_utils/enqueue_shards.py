# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Change a queue's enqueue shard count: the whole operation, usable from Python.

    from ansible_collections.awa.operations.plugins.module_utils.connection import open_connection
    from ansible_collections.awa.operations.plugins.module_utils.enqueue_shards import change_enqueue_shards
    from ansible_collections.awa.operations.plugins.module_utils.planner import validate_request

    with open_connection({"login_host": "db1", "login_db": "app", "login_user": "awa_migrator"}) as conn:
        result = change_enqueue_shards(conn, validate_request("orders", 8, runtime_roles=["awa_runtime"]))

The plan is computed inside the transaction that applies it, after taking a
per-queue advisory lock, so concurrent runs serialize and each sees the
other's committed result. Check mode runs the same reads in a READ ONLY
transaction and returns what the real run would do.
"""

from __future__ import annotations

import time

from ansible_collections.awa.operations.plugins.module_utils import apply, introspect, ledger, planner
from ansible_collections.awa.operations.plugins.module_utils.connection import psycopg, translated_errors
from ansible_collections.awa.operations.plugins.module_utils.errors import AwaOperationsError, DatabaseError, InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.planner import ChangeRequest, Plan

DEFAULT_LOCK_TIMEOUT = 5.0
MAX_LOCK_TIMEOUT = 3600


def validate_lock_timeout(seconds: float) -> float:
    """Seconds to wait for a lock: 0 (no limit) up to an hour."""
    if not 0 <= seconds <= MAX_LOCK_TIMEOUT:
        raise InvalidRequest(f"lock_timeout must be between 0 and {MAX_LOCK_TIMEOUT} seconds, got {seconds}")
    return seconds


LOCK_HOLDERS_SQL = """
SELECT a.pid, a.usename, a.application_name, a.state,
       round(extract(epoch FROM now() - a.xact_start))::int,
       left(regexp_replace(coalesce(a.query, ''), '\\s+', ' ', 'g'), 120)
FROM pg_stat_activity AS a
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL
  AND EXISTS (SELECT 1 FROM pg_locks AS l WHERE l.pid = a.pid AND l.granted
              AND ((l.locktype = 'relation' AND l.relation = 'awa.queue_meta'::regclass AND l.mode <> 'AccessShareLock')
                   OR l.locktype = 'advisory'))
ORDER BY a.xact_start
LIMIT 5
"""


def describe_lock_holders(conn) -> str:
    """Who holds write locks on awa.queue_meta or advisory locks (best effort)."""
    try:
        conn.rollback()
        rows = conn.execute(LOCK_HOLDERS_SQL).fetchall()
        conn.rollback()
    except psycopg.Error:
        return ""
    if not rows:
        return "No session holding such a lock is visible any more."
    holders = "; ".join(
        f"pid {pid} (user {user}, application {app or '-'}, {state}, transaction open {age}s: {query!r})"
        for pid, user, app, state, age, query in rows)
    return f"Sessions holding locks on awa.queue_meta or advisory locks: {holders}."


def _observed_summary(state: introspect.QueueState, queue: str, shards: int) -> dict:
    lanes = state.lanes_of(queue)
    return {
        "enqueue_shards": shards,
        "lanes": sum(1 for lane in lanes if lane.complete),
        "lanes_missing": sum(1 for lane in lanes if lane.shard < shards and not lane.complete),
        "missing_grants": sum(len(lane.missing_privileges) for lane in lanes),
    }


def _verify(conn, plan: Plan, schema: str, roles: tuple[str, ...]) -> None:
    """Re-read inside the transaction: every planned lane and grant must now exist."""
    state = introspect.fetch_queue_state(conn, schema, plan.physical_queues, list(roles), shards=plan.shards)
    observed = {queue: _observed_summary(state, queue, plan.shards) for queue in plan.physical_queues}
    if observed != plan.after:
        raise DatabaseError(
            f"After provisioning queue {plan.queue!r} the database does not match the plan "
            f"(expected {plan.after}, found {observed}); the transaction was rolled back and nothing changed.")


def _result(plan: Plan, queries: list[str], *, changed: bool, check_mode: bool, warnings: list[str]) -> dict:
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
        "queries": queries,
        "diff": {"before": plan.before, "after": plan.after},
        "warnings": warnings,
    }


def change_enqueue_shards(conn, request: ChangeRequest, *, check_mode: bool = False,
                          lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                          ledger_schema: str = ledger.DEFAULT_SCHEMA, reason: str | None = None) -> dict:
    """Validate, plan and (unless ``check_mode``) apply a shard-count change in one transaction.

    Raises an ``AwaOperationsError`` subclass when the change is refused or
    fails; the transaction is then rolled back and nothing is written.
    """
    started = time.monotonic()
    conn.rollback()
    conn.read_only = check_mode
    try:
        with translated_errors(f"changing enqueue_shards of queue {request.queue!r}",
                               on_lock_timeout=lambda: describe_lock_holders(conn)):
            result = _change(conn, request, check_mode=check_mode, lock_timeout=lock_timeout,
                             ledger_schema=ledger_schema, reason=reason)
    finally:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE and not conn.closed:
            conn.rollback()
        if not conn.closed:
            conn.read_only = False
    result["duration"] = round(time.monotonic() - started, 3)
    return result


# Shown once for a whole list run (merged over its queues), not again in each queue's result.
MERGED_ONLY_KEYS = ("queries", "diff", "warnings")


def merge_results(results: dict[str, dict], duration: float) -> dict:
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
        "diff": {side: {name: view for result in ordered for name, view in result["diff"][side].items()}
                 for side in ("before", "after")},
        "warnings": list(dict.fromkeys(warning for result in ordered for warning in result["warnings"])),
        "queues": {queue: {key: value for key, value in result.items() if key not in MERGED_ONLY_KEYS}
                   for queue, result in results.items()},
        "duration": round(duration, 3),
    }


def change_many_queues(conn, requests: list[ChangeRequest], **options) -> dict:
    """``change_enqueue_shards`` for each request in turn, on one connection, each in its own transaction.

    It stops at the first queue that fails: the queues before it stay changed
    (each committed on its own), the error names them, and a re-run (changes
    are idempotent) finishes the list.
    """
    started = time.monotonic()
    results: dict[str, dict] = {}
    for request in requests:
        try:
            results[request.queue] = change_enqueue_shards(conn, request, **options)
        except AwaOperationsError as exc:
            changed = [queue for queue, result in results.items() if result["changed"]]
            done = (f" Queues {', '.join(map(repr, changed))} before it were changed and committed; "
                    "re-run to finish the list." if changed else " No queue of the list was changed.")
            raise type(exc)(f"Queue {request.queue!r}: {exc.message}{done}",
                            **{**exc.details, "queues": results}) from None
    return merge_results(results, time.monotonic() - started)


def _change(conn, request: ChangeRequest, *, check_mode: bool, lock_timeout: float,
            ledger_schema: str, reason: str | None) -> dict:
    if not check_mode:
        apply.execute(conn, apply.lock_timeout(lock_timeout))
        apply.execute(conn, apply.queue_lock(request.queue))
    installation = introspect.fetch_installation(conn, list(request.runtime_roles), ledger_schema, ledger.TABLE)
    warnings = planner.check_installation(installation, request.runtime_roles)
    schema = installation.queue_storage_schema
    known = introspect.fetch_known_queue_names(conn, schema, request.queue)
    layout = planner.resolve_stripes(request.queue, request.stripes, known)
    state = introspect.fetch_queue_state(conn, schema, layout.physical_queues, list(request.runtime_roles),
                                         shards=request.shards)
    plan = planner.plan_enqueue_shards(request, layout, state, installation)
    warnings += plan.warnings
    use_ledger = request.ledger and plan.changed
    if use_ledger:
        planner.check_ledger(installation, ledger_schema, ledger.TABLE)
    statements = apply.build_change_statements(
        plan, schema, ledger_schema=ledger_schema if use_ledger else None,
        create_ledger=use_ledger and not installation.ledger_exists, reason=reason)
    queries = apply.render(conn, statements.all)
    result = _result(plan, queries, changed=plan.changed, check_mode=check_mode, warnings=warnings)
    if check_mode or not plan.changed:
        written = conn.execute("SELECT pg_current_xact_id_if_assigned()").fetchone()[0]
        if written is not None:
            raise DatabaseError("internal error: a run with nothing to change assigned a transaction id")
        conn.rollback()
        return result

    for statement in statements.provision:
        apply.execute(conn, statement)
    _verify(conn, plan, schema, request.runtime_roles)
    if statements.record is not None:
        ledger_id, changed_at, live = apply.execute(conn, statements.record)[0]
        result["ledger"] = {"schema": ledger_schema, "table": ledger.TABLE, "id": ledger_id,
                            "changed_at": changed_at.isoformat(), "live_runtimes": live}
    if statements.switch is not None:
        switched = dict(apply.execute(conn, statements.switch))
        if any(switched.get(queue) != plan.shards for queue in plan.meta_queues_to_update):
            raise DatabaseError(f"awa.queue_meta did not take enqueue_shards={plan.shards}: {switched}")
    try:
        conn.commit()
    except psycopg.OperationalError as exc:
        raise DatabaseError(
            f"The connection was lost while committing the change of queue {request.queue!r} ({exc}). "
            "It may or may not have been applied: re-run the module (it is idempotent) to see the state "
            "and finish the change.") from None
    return result
