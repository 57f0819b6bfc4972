# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connecting to PostgreSQL with psycopg 3, one transaction at a time: the one file that imports psycopg.

It connects with the options of db/options.py, runs every transaction
with its lock_timeout and session_role, commits, and translates psycopg's
errors into awa.operations' (errors.py), each saying what to do. The SQL
builders of schema and change.writes take ``sql`` from here.
"""

from __future__ import annotations

import contextlib
import os
import re
import string
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ansible_collections.awa.operations.plugins.module_utils.db.options import (
    DEFAULT_LOCK_TIMEOUT, WRITABLE_TARGETS, Attempt, connection_secrets, describe_target, libpq_hosts, libpq_params,
    lock_timeout_setting, password_used, validate_targets)
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    CommitLost, ConnectionFailed, ConnectionLost, DatabaseError, LockTimeout, PreconditionFailed, ServerUnreachable)
from ansible_collections.awa.operations.plugins.module_utils.masking import masked

try:
    import psycopg
    from psycopg import errors as pg_errors
    # Not used here: schema and change.writes build their SQL with these, imported from this file, the one that imports
    # psycopg (``X as X``: exported, for the type checker).
    from psycopg import ClientCursor as ClientCursor, sql as sql  # pylint: disable=unused-import,useless-import-alias
except ImportError:  # the modules stop at HAS_PSYCOPG and say how to install it (module_main)
    # Never used then: nothing connects without psycopg. They stand for the missing module and class.
    psycopg = pg_errors = sql = ClientCursor = None  # type: ignore[assignment,misc]
    HAS_PSYCOPG = False
else:
    HAS_PSYCOPG = True

if TYPE_CHECKING:
    from typing import TypeAlias

    from psycopg.rows import TupleRow

    # What connect() opens, a statement's cursor and its rows: tuples, psycopg's default row factory.
    Connection: TypeAlias = psycopg.Connection[TupleRow]
    Cursor: TypeAlias = psycopg.Cursor[TupleRow]
    Row: TypeAlias = TupleRow
else:
    # For annotations only, which are never evaluated (``from __future__ import annotations``): the names exist so that
    # a file imports them with the rest of this file's, on the controller and on targets without psycopg too.
    Connection = Cursor = Row = object

# The first statement of every transaction: its settings, not reads or writes of data. set_config(..., true) is
# SET LOCAL: it ends with the transaction, so nothing of ours outlives it on the server connection, which a
# transaction pooler (PgBouncer) hands to its next client. SET is allowed in READ ONLY transactions.
# statement_timeout is off (a role's or database's default would apply): a statement cancelled inside Awa's lane
# trigger (awa.set_sequence_next, which plpgsql's WHEN OTHERS does not protect from a cancel) keeps a session
# advisory lock after the rollback, and a pooler hands it on; lock_timeout still bounds every wait.
TRANSACTION_SETTINGS_SQL = ("SELECT set_config('lock_timeout', %(timeout)s, true), "
                            "set_config('statement_timeout', '0', true)")
# With session_role, added to it: the transaction runs as that role (SET LOCAL ROLE), every statement of it.
ROLE_SETTING_SQL = ", set_config('role', %(role)s, true)"

# What to do when libpq refuses a TLS connection, keyed by words of its message.
TLS_HINTS = {
    "certificate verify failed": "The server's certificate is not signed by a CA in ca_cert: set ca_cert to the "
                                 "CA that issued it.",
    "does not match host name": "Set login_host to a host name the server's certificate lists.",
    "requires a valid client certificate": "The server requires a client certificate: set ssl_cert and ssl_key.",
    "certificate authentication failed": "The client certificate's common name (CN) must be login_user.",
    "private key file": "Set ssl_key to the client certificate's private key, readable only by the user that "
                        "runs the module.",
}
# What PgBouncer answers (SQLSTATE 08P01, then it closes the connection) when it will not carry a transaction of
# ours, and what to do. It answers before the transaction starts: nothing was changed, nothing was lost.
POOLER_REFUSALS = {
    # pool_mode = statement refuses a transaction block as soon as it opens.
    "transaction blocks not allowed in statement pooling mode":
        "the connection goes through a pooler in statement pooling mode, which cannot carry a transaction of more "
        "than one statement, and every read and change of awa.operations is one. Point login_host and login_port "
        "at a pool in transaction or session mode (PgBouncer: pool_mode = transaction) or at PostgreSQL itself.",
    # Every server connection of the pool (database and user) stayed busy for query_wait_timeout (default 120 s).
    "query_wait_timeout":
        "the pooler had no free server connection for this database and user within its query_wait_timeout: "
        "other clients held all of them. Re-run when they are done, or give the pool more server connections "
        "(PgBouncer: default_pool_size, or pool_size for this database).",
}

# Words of libpq's refusal of a server that is not the kind target_session_attrs asks for.
STANDBY_REFUSALS = ("server is in hot standby mode", "session is read-only", "server is not in hot standby mode",
                    "session is not read-only")
# psycopg's line for one host of several that failed: "- host: 'db1', port: '5432', ...: ... failed: REASON".
HOST_ATTEMPT = re.compile(r"^- host: '([^']*)', port: '([^']*)'.*failed: (.*)$", re.MULTILINE)
# psycopg's words when a host name does not resolve (it resolves host names itself, before libpq starts): the host is
# None when the one host came from PGHOST.
UNRESOLVED_HOST = re.compile(r"^failed to resolve host (?:None|'(.*)'): (?:\[Errno -?\d+\] )?(.*)$")
# Connection values libpq may repeat in its messages that must not be shown, and what is shown instead.
HIDDEN_VALUES = {"password": "(login_password)", "sslkey": "(ssl_key)", "sslpassword": "(sslpassword)"}


def one_row(cursor: Cursor) -> Row:
    """The row of a statement that returns exactly one (``SELECT now()``, an aggregate, a function call)."""
    row = cursor.fetchone()
    if row is None:
        raise DatabaseError("a statement that returns one row returned none")
    return row


def server_address(conn: Connection) -> str:
    """host:port of the server ``conn`` reached (the one libpq chose among login_host)."""
    return f"{conn.info.host}:{conn.info.port}"


def _set_transaction_settings(conn: Connection, lock_timeout: float) -> None:
    """The first statement of a transaction: lock_timeout and, with session_role, the role (both SET LOCAL)."""
    role = getattr(conn, "awa_session_role", None)
    conn.execute(TRANSACTION_SETTINGS_SQL + (ROLE_SETTING_SQL if role else ""),
                 {"timeout": lock_timeout_setting(lock_timeout), "role": role})


def connect(options: Mapping[str, Any], *, writes: bool = False) -> Connection:
    """Open a connection (autocommit off); with ``session_role``, check now that the login role may switch to it.

    With ``writes`` (a change) the server must be a primary: ``target_session_attrs``
    defaults to read-write and may only be read-write or primary (validate_targets).
    The role is set in each transaction, never for the session: a transaction
    pooler gives the server connection to another client after every
    transaction, and a session-wide SET ROLE would go with it. Server-side
    prepared statements are off for the same reason (a pooler cannot carry them
    from one server connection to the next).
    """
    if not HAS_PSYCOPG:
        raise ConnectionFailed("psycopg 3 is not installed on the host that runs the module")
    # libpq's environment is this process's: every option it does not give is read there.
    params = libpq_params(options, writes=writes, environ=os.environ)
    validate_targets(params, writes=writes, environ=os.environ)
    try:
        conn = psycopg.connect(**params, prepare_threshold=None)
    except psycopg.Error as exc:
        reason = _connect_error(exc, options, params, writes=writes)
        # No SQLSTATE (refused, down, a standby where a primary is asked for) or the server not accepting
        # sessions yet: a later attempt may succeed. A refusal with a SQLSTATE (password, database) will not.
        error = ServerUnreachable if connection_lost(exc, True) else ConnectionFailed
        attempt = _attempt(getattr(exc, "pgconn", None))
        password = password_used(options, attempt, os.environ)
        target = describe_target(options, environ=os.environ, writes=writes, attempt=attempt)
        raise error(f"could not connect to {target}{f' {password}' if password else ''}: {reason}") from None
    except UnicodeError:
        # Raised while resolving a host whose name is no host name (a label over 63 characters, a URI in login_host).
        dummy, hosts_from = libpq_hosts(params, os.environ)
        raise ConnectionFailed(f"could not connect to {describe_target(options, environ=os.environ, writes=writes)}: a "
                               f"host of {hosts_from} is not a host name; give host names or addresses, separated by "
                               "commas") from None
    role = options.get("session_role") or None
    # Read back by _set_transaction_settings in every transaction of this connection.
    setattr(conn, "awa_session_role", role)
    if role:
        try:
            _set_transaction_settings(conn, DEFAULT_LOCK_TIMEOUT)
        except psycopg.Error as exc:
            target = describe_target(options, environ=os.environ, writes=writes, attempt=_attempt(conn.pgconn))
            conn.close()
            _report_pooler_refusal(exc, f"connected to {target}, but")
            raise ConnectionFailed(
                f"connected to {target} but could not switch to session_role "
                f"{role!r}: {_first_line(exc)}. Grant it with: GRANT {role} TO <login role>") from None
        _end_transaction(conn)
    return conn


def open_connection(options: Mapping[str, Any], *, writes: bool = False) -> contextlib.closing[Connection]:
    """``connect``, as a context that closes the connection at its end."""
    return contextlib.closing(connect(options, writes=writes))


class Statement(NamedTuple):
    """One statement and its bound parameters (the writes and the ledger build them with ``sql``); a tuple, so that
    ``conn.execute(*statement)`` runs it."""

    query: sql.SQL | sql.Composed
    params: dict[str, Any] | None = None


def schema_sql(schema: str, text: str, **values: Any) -> sql.Composed:
    """``text`` with each ``{name}`` placeholder as the object ``name`` of ``schema`` (quoted), unless ``values``
    gives it."""
    names = {name for dummy, name, dummy_spec, dummy_conversion in string.Formatter().parse(text) if name}
    return sql.SQL(text).format(**{**{name: sql.Identifier(schema, name) for name in names}, **values})


def render(conn: Connection, statements: list[Statement]) -> list[str]:
    """The statements as psycopg would send them, with their values bound (for reports: what a check-mode run
    would run is what a real run runs)."""
    cursor = ClientCursor(conn)
    return [cursor.mogrify(*statement).strip() for statement in statements]


@contextlib.contextmanager
def transaction(conn: Connection, action: str, *, lock_timeout: float, read_only: bool = False, repeatable_read: bool = False,
                on_lock_timeout: Callable[[], str] | None = None) -> Iterator[None]:
    """One transaction on ``conn`` for ``action``, rolled back at the end unless committed inside.

    Its first statement sets ``lock_timeout`` (seconds; 0 waits without
    limit), so every lock it waits for is bounded, READ ONLY or not, and
    switches to the connection's ``session_role`` for this transaction. psycopg
    errors raised inside (or by its first statement) become awa.operations errors naming ``action``;
    ``on_lock_timeout`` (called after the rollback, with no arguments) may
    describe who held the lock, and its text is added to the message.
    """
    try:
        conn.rollback()
        conn.read_only = read_only
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ if repeatable_read else None
        _set_transaction_settings(conn, lock_timeout)
        yield
    except pg_errors.LockNotAvailable as exc:
        # Who held the lock, read in a transaction of its own that the end below rolls back (best effort).
        holder = ""
        if on_lock_timeout is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
                _set_transaction_settings(conn, DEFAULT_LOCK_TIMEOUT)
                holder = on_lock_timeout()
        raise LockTimeout(f"{action}: a lock was not granted within lock_timeout ({lock_timeout:g}s: "
                          f"{_first_line(exc)}). Nothing was changed.{(' ' + holder) if holder else ''} "
                          "Retry when that transaction has finished, or raise lock_timeout.") from None
    except pg_errors.InsufficientPrivilege as exc:
        raise PreconditionFailed(f"{action}: {_first_line(exc)}. Nothing was changed.",
                                 sqlstate=exc.sqlstate) from None
    except psycopg.Error as exc:
        _report_pooler_refusal(exc, f"{action}:")
        if connection_lost(exc, conn.closed):
            raise ConnectionLost(f"{action}: the database connection was lost ({_first_line(exc)}). The transaction "
                                 "did not commit, so nothing was changed; re-run to apply.",
                                 sqlstate=exc.sqlstate) from None
        # No SQLSTATE: psycopg raised it in this process (no sqlstate key in the result then).
        local = "" if exc.sqlstate else (" (raised by psycopg in this process, before the statement reached the "
                                         f"database: {type(exc).__name__})")
        raise DatabaseError(f"{action}: {_first_line(exc)}{local}. The transaction was rolled back, so nothing was "
                            "changed.", **({"sqlstate": exc.sqlstate} if exc.sqlstate else {})) from None
    finally:
        _end_transaction(conn)


def _end_transaction(conn: Connection) -> None:
    """Roll back and restore the session's defaults; a session that ended meanwhile is closed.

    The server can end the session after the work is done and before this
    rollback (a failover, a terminated backend). What was read stands and
    nothing uncommitted is lost, so that is not this transaction's failure:
    the connection is closed, and its next use reports it lost (or, in a
    wait, opens another).
    """
    if conn.closed:
        return
    try:
        conn.rollback()
        conn.read_only = False
        conn.isolation_level = None
    except psycopg.Error:
        conn.close()


def commit(conn: Connection, action: str) -> None:
    """Commit; a failure says whether the outcome is not known yet (connection lost) or nothing was written.

    ``CommitLost`` is for the caller to resolve (see ``lost_commit``): the
    COMMIT may have reached the server, so only the database can tell.
    """
    try:
        conn.commit()
    except psycopg.Error as exc:
        if connection_lost(exc, conn.closed):
            raise CommitLost(f"{action}: the connection was lost while committing ({_first_line(exc)}).",
                             sqlstate=exc.sqlstate) from None
        raise DatabaseError(f"{action}: the commit failed ({_first_line(exc)}). The transaction was rolled back, "
                            "so nothing was changed.", sqlstate=exc.sqlstate) from None


def _attempt(pgconn: Any) -> Attempt | None:
    """What libpq tried, from its connection (psycopg's ``Error.pgconn``, from psycopg 3.1); None without one (a host
    name that did not resolve fails before libpq starts) or when its libpq cannot tell (hostaddr needs libpq 12)."""

    def text(value: bytes | None) -> str:
        return (value or b"").decode(errors="replace")
    # No pgconn (None) raises AttributeError too.
    try:
        passfile = next((text(item.val) for item in pgconn.info if item.keyword == b"passfile"), "")
        return Attempt(host=text(pgconn.host), hostaddr=text(pgconn.hostaddr), port=text(pgconn.port),
                       dbname=text(pgconn.db), user=text(pgconn.user), used_password=bool(pgconn.used_password),
                       needs_password=bool(pgconn.needs_password), passfile=passfile)
    except (psycopg.Error, AttributeError):
        return None


def _connect_error(exc: BaseException, options: Mapping[str, Any], params: Mapping[str, Any], *, writes: bool) -> str:
    """libpq's reason (per host, when there are several), without the key path or password it may name, and what
    to do for a TLS or standby refusal (``params``: libpq_params' of ``options``)."""
    attempts = HOST_ATTEMPT.findall(str(exc))
    text = "; ".join(f"{host}:{port}: {reason}" for host, port, reason in attempts) if len(attempts) > 1 \
        else _unresolved_host(_first_line(exc), params)
    for keyword, shown in HIDDEN_VALUES.items():
        if params.get(keyword):
            text = text.replace(str(params[keyword]), shown)
    # A password written into a connection string (login_db, login_host, connect_params) is masked too.
    text = masked(text, connection_secrets(options))
    hints = [hint for words, hint in TLS_HINTS.items() if words in text]
    if any(words in str(exc) for words in STANDBY_REFUSALS):
        hints.append(_standby_hint(params["target_session_attrs"], writes))
    return text + "".join(f". {hint}" for hint in hints)


def _unresolved_host(text: str, params: Mapping[str, Any]) -> str:
    """psycopg's "failed to resolve host" with the host as libpq got it - from login_host, or from PGHOST on the host
    that runs the module (psycopg then says None) - and what to correct; any other reason as it is."""
    found = UNRESOLVED_HOST.match(text)
    if found is None:
        return text
    hosts, hosts_from = libpq_hosts(params, os.environ)
    host = found.group(1) or ",".join(hosts)
    if hosts_from == "PGHOST":
        return (f"the host name {host!r} of PGHOST (the environment of the host that runs the module) does not "
                f"resolve: {found.group(2)}. Correct PGHOST there, or give login_host")
    return f"the host name {host!r} of {hosts_from} does not resolve: {found.group(2)}. Correct {hosts_from}"


def _standby_hint(target: str, writes: bool) -> str:
    if target in WRITABLE_TARGETS:
        return (f"No server of login_host is a primary (target_session_attrs {target}): list the current primary "
                "in login_host (after a failover, the promoted standby), or wait until the failover has finished"
                + ("" if writes else "; to read a standby on purpose, set target_session_attrs: any (its state can "
                   "lag the primary's)"))
    return (f"No server of login_host is of the kind target_session_attrs {target} asks for: list one in "
            "login_host, or choose another target_session_attrs")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _report_pooler_refusal(exc: BaseException, context: str) -> None:
    """A pooler refusing our transaction is not a lost connection: say what it is and what to do."""
    text = str(exc)
    for words, hint in POOLER_REFUSALS.items():
        if words in text:
            raise ConnectionFailed(f"{context} the pooler refused the transaction ({words}): {hint} "
                                   "Nothing was changed.") from None


# Not connection class 08, but the server ending the session: admin_shutdown, crash_shutdown, cannot_connect_now.
SESSION_ENDED_SQLSTATES = ("57P01", "57P02", "57P03")


def connection_lost(exc: BaseException, closed: bool) -> bool:
    """The session is gone: connection class 08, the server ending it, or (no SQLSTATE) psycopg closed it.

    ``closed`` is the connection's state after the error (psycopg closes a
    broken connection). An error without a SQLSTATE on a connection that is
    still open, such as a client-side error adapting a value, is not a lost connection.
    """
    sqlstate = getattr(exc, "sqlstate", None)
    return closed if sqlstate is None else sqlstate.startswith("08") or sqlstate in SESSION_ENDED_SQLSTATES
