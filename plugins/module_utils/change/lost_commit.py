# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A COMMIT whose connection was lost: reconnect, wait until its transaction has ended, look it up.

When the connection drops while COMMIT is in flight, the change committed
whole or not at all, and only the database knows which. So we reconnect with
the same options (a few attempts, a short backoff: info/wait.py) and, in
a READ ONLY transaction:

1. take the per-queue advisory lock the change held: it is granted once the
   old transaction has ended, committed or rolled back (at once after a
   restart or a failover, where that transaction no longer exists);
2. look the change up: its ledger row by the change id the client gave it
   (``ledger.CHANGE_ID_COLUMN``), or, for a row without one (``ledger:
   false``, or a ledger of 0.1.0 we may not alter), ``pg_xact_status`` of the
   transaction id read before COMMIT, trusted only on the same server history
   (a promoted standby reuses transaction ids).

The run then reports the change as committed, or fails with "not applied,
nothing was written; re-run". The outcome stays unknown only when the
database cannot be reached again, when the old transaction is still open
after ``lock_timeout``, or when a change without a change id meets another
server history; each message says how to look it up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from ansible_collections.awa.operations.plugins.module_utils.db.connection import Statement, sql, transaction
from ansible_collections.awa.operations.plugins.module_utils.info.wait import attempts, attempts_text
from ansible_collections.awa.operations.plugins.module_utils.change.result import LostCommit, QueueChangeRun
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    AwaOperationsError, CommitNotApplied, CommitOutcomeUnknown, ConnectionFailed, LockTimeout)
from ansible_collections.awa.operations.plugins.module_utils.schema.sessions import (
    TransactionIdentity, describe_lock_holders, fetch_transaction_status)
from ansible_collections.awa.operations.plugins.module_utils.schema.ledger import (
    CHANGE_ID_SETTING, LedgerRow, fetch_recorded_change, lookup_query)

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection


QUEUE_LOCK_PREFIX = "awa.operations:enqueue_shards:"


def queue_lock(queue: str, change_id: str | None = None) -> Statement:
    """Serializes concurrent runs of the module on one logical queue (transaction scoped).

    With ``change_id``, it also names the change this transaction makes, for its ledger row.
    """
    names = {} if change_id is None else {"setting": CHANGE_ID_SETTING, "change_id": change_id}
    return Statement(sql.SQL("SELECT pg_advisory_xact_lock(hashtextextended(%(key)s::text, 0))" + (
        ", set_config(%(setting)s, %(change_id)s, true)" if names else "")),
        {"key": QUEUE_LOCK_PREFIX + queue, **names})


@dataclass(frozen=True)
class PendingChange:
    """A change whose COMMIT was sent: what is needed to look it up, and its result if it committed."""

    queue: str
    change_id: str
    result: QueueChangeRun
    # None: no ledger row (ledger: false).
    ledger_schema: str | None
    # Read before COMMIT when the row carries no change id; None: its ledger row carries the change id.
    transaction: TransactionIdentity | None
    lock_timeout: float


def settle(pending: PendingChange, reason: str, reconnect: Callable[[], Connection] | None, *,
           sleep: Callable[[float], None] = time.sleep) -> QueueChangeRun:
    """The result of a change whose COMMIT lost its connection, looked up on a new connection.

    Returns the change's result when it committed (``lost_commit`` and a
    warning say how it was found); raises ``CommitNotApplied`` when it did not,
    ``CommitOutcomeUnknown`` when that cannot be told (the message says how to
    look it up later).
    """
    if reconnect is None:
        raise _unknown(pending, reason, "No way to reconnect was given (the Python API without reconnect=), so it "
                                        "was not looked up.")
    failures = []
    for attempt in attempts(sleep):
        try:
            conn = reconnect()
        except ConnectionFailed as exc:
            failures.append(exc.message)
            continue
        try:
            committed, resolved_by, row = _look_up(conn, pending, reason)
        except CommitOutcomeUnknown:
            raise
        except AwaOperationsError as exc:
            if not conn.closed:
                raise _unknown(pending, reason, f"Looking it up failed: {exc.message}") from None
            failures.append(exc.message)  # the new connection was lost too: another attempt
            continue
        finally:
            conn.close()
        return _outcome(pending, reason, attempt, committed, resolved_by, row)
    raise _unknown(pending, reason, f"The database could not be reached again ({attempts_text(failures)}; "
                                    f"last: {failures[-1]}).")


def _look_up(conn: Connection, pending: PendingChange, reason: str) -> tuple[bool, str, LedgerRow | None]:
    """Wait (the change's lock_timeout) until the old transaction has ended, then find out what it did: whether it
    committed, how that was told, and its ledger row."""
    schema, identity = pending.ledger_schema, pending.transaction
    holders: list[str] = []

    def who_holds_it() -> str:
        holders.append(describe_lock_holders(conn, ["awa", pending.ledger_schema or "awa"]))
        return holders[-1]

    try:
        with transaction(conn, f"looking up the lost commit of queue {pending.queue!r}", read_only=True,
                         lock_timeout=pending.lock_timeout, on_lock_timeout=who_holds_it):
            # The queue's lock, granted once the change's transaction has ended.
            conn.execute(*queue_lock(pending.queue)).fetchall()
            if identity is None:
                row = fetch_recorded_change(conn, cast(str, schema), "change_id", pending.change_id)
                return row is not None, "change id in the ledger", row
            status = fetch_transaction_status(conn, identity)
            if status in ("aborted", "committed"):
                committed = status == "committed"
                return committed, "transaction status", fetch_recorded_change(
                    conn, schema, "transaction_id", identity.transaction_id) if schema and committed else None
            without = "the ledger row carries no change id" if schema else "ledger is false"
            raise _unknown(pending, reason, f"Reconnected, but transaction {identity.transaction_id} is still in "
                           "progress." if status else "Reconnected to a server that cannot tell what became of "
                           f"transaction {identity.transaction_id} ({without}): it runs another history than the "
                           "server the change ran on (a failover, or a standby), or no longer keeps that status.")
    except LockTimeout:
        raise _unknown(pending, reason, (
            f"Reconnected, but the transaction that held queue {pending.queue!r} was still open after lock_timeout "
            f"({pending.lock_timeout:g}s): {' '.join(holders) or 'its session could not be read.'} It commits or "
            "rolls back once the server ends that session (if it is idle in transaction, end it with "
            "pg_terminate_backend(pid)).")) from None


def _outcome(pending: PendingChange, reason: str, attempt: int, committed: bool, resolved_by: str,
             ledger: LedgerRow | None) -> QueueChangeRun:
    lost: LostCommit = {"outcome": "committed" if committed else "not applied", "resolved_by": resolved_by,
                        "reconnect_attempts": attempt}
    found = f"Reconnected (attempt {attempt}) and looked it up once its transaction had ended: "
    by_transaction = f"its transaction {pending.transaction.transaction_id}" if pending.transaction else ""
    if not committed:
        evidence = by_transaction + " rolled back" if pending.transaction else (
            f"no ledger row has its change id {pending.change_id}")
        raise CommitNotApplied(f"{reason} {found}{evidence}, so it was not "
                               "applied and nothing was written; re-run to apply it.",
                               change_id=pending.change_id, lost_commit=lost)
    result: QueueChangeRun = {**pending.result, "lost_commit": lost}
    if ledger is not None:
        result["ledger"] = ledger
    evidence = by_transaction + " committed" if pending.transaction or ledger is None else (
        f"ledger row {ledger['id']} has its change id {pending.change_id}")
    result["warnings"] = [*result["warnings"], (
        f"The connection was lost while committing the change of queue {pending.queue!r}. {found}{evidence}. The "
        "change is applied: nothing to re-run.")]
    return result


def _unknown(pending: PendingChange, reason: str, why: str) -> CommitOutcomeUnknown:
    if pending.transaction is None:
        how = (f"look it up: {lookup_query(cast(str, pending.ledger_schema), pending.change_id)}. A row means it was "
               "applied (nothing to re-run); no row, once the transaction has ended, means nothing was written: "
               "re-run.")
    else:
        how = (f"look it up on the server the change ran on: SELECT pg_xact_status("
               f"'{pending.transaction.transaction_id}'::xid8); 'committed' means it was applied, 'aborted' that "
               "nothing was written: re-run. On another server (after a failover) run the module in check mode: "
               "changed=false means the count is in place.")
    return CommitOutcomeUnknown(
        f"{reason} {why} The outcome is unknown: the change committed whole or "
        f"not at all (change id {pending.change_id}). To find out, {how}",
        change_id=pending.change_id, lost_commit={"outcome": "unknown"})
