# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The current transaction and the other sessions: what we hold, and who holds what we wait for.

Part of the schema package, the reads of Awa's schema that the change and the read both make (installation.py says how they behave).
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection, one_row


@dataclass(frozen=True)
class TransactionIdentity:
    """A transaction id and the server history it belongs to (a promoted standby starts a new timeline)."""

    transaction_id: str
    system_identifier: str
    timeline: str | None  # None on a standby


# The timeline is the first part of the current WAL file name (pg_walfile_name refuses to run on a standby).
SERVER_HISTORY_SQL = """(SELECT system_identifier FROM pg_control_system())::text,
       CASE WHEN pg_is_in_recovery() THEN NULL ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END"""
TRANSACTION_IDENTITY_SQL = "SELECT pg_current_xact_id()::text, " + SERVER_HISTORY_SQL
# pg_xact_status raises for an id this server has not assigned yet: that is asked first (NULL then).
TRANSACTION_STATUS_SQL = "SELECT " + SERVER_HISTORY_SQL + """,
       CASE WHEN CAST(%(xid)s AS xid8) < pg_snapshot_xmax(pg_current_snapshot())
            THEN pg_xact_status(CAST(%(xid)s AS xid8)) END"""


def fetch_transaction_identity(conn: Connection) -> TransactionIdentity:
    """The current transaction's id (assigning one) and the server history it runs on."""
    return TransactionIdentity(*one_row(conn.execute(TRANSACTION_IDENTITY_SQL)))


def fetch_transaction_status(conn: Connection, identity: TransactionIdentity) -> str | None:
    """pg_xact_status of ``identity``'s transaction ('committed', 'aborted', 'in progress'), read on this server.

    None when this server cannot tell: it runs another history (another
    system, another timeline after a failover, a standby), has not assigned
    that id, or no longer keeps its status.
    """
    system_identifier, timeline, status = one_row(conn.execute(
        TRANSACTION_STATUS_SQL, {"xid": identity.transaction_id}))
    same_history = (system_identifier, timeline) == (identity.system_identifier, identity.timeline)
    return status if same_history and timeline is not None else None


ASSIGNED_TRANSACTION_ID_SQL = "SELECT pg_current_xact_id_if_assigned()"


def fetch_assigned_transaction_id(conn: Connection) -> int | None:
    """The current transaction's id, or None while it has written nothing (reading assigns none)."""
    value = one_row(conn.execute(ASSIGNED_TRANSACTION_ID_SQL))[0]
    return None if value is None else int(value)


# Sessions that can hold up our statements: writers of awa.queue_meta, holders of advisory
# locks (our per-queue lock, Awa's lane locks), and DDL (locks that conflict with reads or
# writes) on relations of the Awa and ledger schemas, for example a running `awa migrate`.
LOCK_HOLDERS_SQL = """
SELECT a.pid, a.usename, a.application_name, a.state,
       round(extract(epoch FROM now() - a.xact_start))::int,
       left(regexp_replace(coalesce(a.query, ''), '\\s+', ' ', 'g'), 120)
FROM pg_stat_activity AS a
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL
  AND EXISTS (
      SELECT 1 FROM pg_locks AS l LEFT JOIN pg_class AS c ON l.locktype = 'relation' AND c.oid = l.relation
      WHERE l.pid = a.pid AND l.granted
        AND (l.locktype = 'advisory'
             OR (c.oid = to_regclass('awa.queue_meta') AND l.mode <> 'AccessShareLock')
             OR (c.relnamespace IN (SELECT oid FROM pg_namespace WHERE nspname = ANY(%(schemas)s::text[]))
                 AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock'))))
ORDER BY a.xact_start
LIMIT 5
"""


def describe_lock_holders(conn: Connection, schemas: list[str]) -> str:
    """Who holds locks that can hold up our statements on ``schemas`` (for a lock-timeout message)."""
    rows = conn.execute(LOCK_HOLDERS_SQL, {"schemas": list(schemas)}).fetchall()
    if not rows:
        return "No session holding such a lock is visible any more."
    holders = "; ".join(
        f"pid {pid} (user {user}, application {app or '-'}, {state}, transaction open {age}s: {query!r})"
        for pid, user, app, state, age, query in rows)
    return (f"Sessions that may hold it (writers of awa.queue_meta, advisory locks, DDL in schemas "
            f"{', '.join(schemas)}): {holders}.")
