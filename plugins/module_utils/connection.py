# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connecting to PostgreSQL with psycopg 3, one transaction at a time, and the only place that knows its errors.

The options are community.postgresql's, by name; the doc fragment
``awa.operations.connection`` documents exactly ``connection_argument_spec()``.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping

from ansible_collections.awa.operations.plugins.module_utils.errors import (
    CommitLost,
    ConnectionFailed,
    ConnectionLost,
    DatabaseError,
    InvalidRequest,
    LockTimeout,
    PreconditionFailed,
    ServerUnreachable,
)

try:
    import psycopg
    from psycopg import errors as pg_errors
    # Not used here: introspect and apply build their SQL with it, imported from this file, the one that imports psycopg.
    from psycopg import sql  # pylint: disable=unused-import
except ImportError:  # reported through missing_required_lib by the modules
    psycopg = None
    pg_errors = None
    sql = None
    HAS_PSYCOPG = False
else:
    HAS_PSYCOPG = True

APPLICATION_NAME = "awa.operations"
DEFAULT_CONNECT_TIMEOUT = 10
# Seconds any statement of ours waits for a lock before the transaction fails (0: no limit).
DEFAULT_LOCK_TIMEOUT = 5.0
MAX_LOCK_TIMEOUT = 3600

# Ansible option -> libpq keyword.
LIBPQ_KEYWORDS = {
    "login_host": "host",
    "login_port": "port",
    "login_user": "user",
    "login_password": "password",
    "login_db": "dbname",
    "ssl_mode": "sslmode",
    "ca_cert": "sslrootcert",
    "ssl_cert": "sslcert",
    "ssl_key": "sslkey",
    "target_session_attrs": "target_session_attrs",
}

# Options whose documented default would hide libpq's environment: when the task does not give one, the
# variable libpq reads for it is used if set (as community.postgresql does), else the default. The other
# options default to empty, which leaves libpq to read its environment itself (PGHOST, PGDATABASE,
# PGPASSWORD, PGSSLROOTCERT, ...), except target_session_attrs, whose default depends on the work
# (libpq_params reads PGTARGETSESSIONATTRS for it).
ENVIRONMENT_FALLBACKS = {
    "login_user": "PGUSER",
    "login_port": "PGPORT",
    "ssl_mode": "PGSSLMODE",
}

SSL_MODES = ["allow", "disable", "prefer", "require", "verify-ca", "verify-full"]
# libpq's target_session_attrs (PostgreSQL 14 and later).
TARGET_SESSION_ATTRS = ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"]
# A change writes, so it must reach the primary: these never connect to a standby. read-write is its default
# (it also refuses a server or role whose transactions are read-only by default, where the change would fail).
WRITABLE_TARGETS = ("read-write", "primary")
TARGET_FOR_CHANGE = "read-write"
# Reads default to the primary: a wait must judge the state the change wrote, not a standby's lagging copy
# of it. primary rather than read-write, so a role whose transactions are read-only by default can read.
TARGET_FOR_READS = "primary"

# The first statement of every transaction: its settings, not reads or writes of data. set_config(..., true) is
# SET LOCAL: it ends with the transaction, so nothing of ours outlives it on the server connection, which a
# transaction pooler (PgBouncer) hands to its next client. SET is allowed in READ ONLY transactions.
# statement_timeout is off (a role's or database's default would apply): a statement cancelled inside Awa's lane
# trigger (awa.set_sequence_next, which plpgsql's WHEN OTHERS does not protect from a cancel) keeps a session
# advisory lock after the rollback, and a pooler hands it on; lock_timeout still bounds every wait.
TRANSACTION_SETTINGS_SQL = ("SELECT set_config('lock_timeout', %(timeout)s, true), "
                            "set_config('statement_timeout', '0', true)")
# With session_role: the transaction runs as that role (SET LOCAL ROLE), every statement of it.
TRANSACTION_SETTINGS_WITH_ROLE_SQL = TRANSACTION_SETTINGS_SQL + ", set_config('role', %(role)s, true)"

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
# Connection values libpq may repeat in its messages that must not be shown, and what is shown instead.
HIDDEN_VALUES = {"password": "(login_password)", "sslkey": "(ssl_key)", "sslpassword": "(sslpassword)"}


# The connection options (community.postgresql names, no aliases); connection_argument_spec() returns a copy.
CONNECTION_OPTIONS = {
    "login_user": {"type": "str", "default": "postgres"},
    "login_password": {"type": "str", "default": "", "no_log": True},
    "login_host": {"type": "str", "default": ""},
    # One port for every host, or a comma-separated list matching login_host (libpq's form).
    "login_port": {"type": "raw", "default": 5432},
    "login_unix_socket": {"type": "str", "default": ""},
    "login_db": {"type": "str"},
    "ssl_mode": {"type": "str", "default": "prefer", "choices": list(SSL_MODES)},
    "ca_cert": {"type": "path"},
    "ssl_cert": {"type": "path"},
    "ssl_key": {"type": "path", "no_log": True},
    "target_session_attrs": {"type": "str", "choices": list(TARGET_SESSION_ATTRS)},
    "connect_params": {"type": "dict", "default": {}},
    "session_role": {"type": "str"},
}


def environment_or_default(option: str) -> object:
    """The value of ``option`` when the task does not give it: its libpq environment variable if set, else its
    default (an Ansible ``fallback`` of the options of ENVIRONMENT_FALLBACKS)."""
    return os.environ.get(ENVIRONMENT_FALLBACKS.get(option, "")) or CONNECTION_OPTIONS[option].get("default")


def connection_argument_spec() -> dict:
    """A fresh argument spec for the connection options."""
    spec = copy.deepcopy(CONNECTION_OPTIONS)
    for name in ENVIRONMENT_FALLBACKS:
        spec[name]["fallback"] = (environment_or_default, [name])
    return spec


def connection_defaults() -> dict:
    """Each connection option's value when a caller does not give it: its default, or its libpq environment."""
    return {name: environment_or_default(name) for name in CONNECTION_OPTIONS}


def libpq_params(options: dict, *, writes: bool = False, environ: Mapping[str, str] | None = None) -> dict:
    """libpq keyword arguments from Ansible options; empty values are left to libpq (and its environment).

    ``target_session_attrs``, when neither given nor in ``PGTARGETSESSIONATTRS``,
    is ``read-write`` for a change (``writes``) and ``primary`` for reads.
    ``environ`` is libpq's environment (this process's by default).
    """
    environ = os.environ if environ is None else environ
    params = {}
    for option, keyword in LIBPQ_KEYWORDS.items():
        value = options.get(option)
        if value not in (None, ""):
            params[keyword] = value
    if "port" in params:
        params["port"] = ports_text(params["port"])
    # A socket directory is used only when no TCP host is named (or it is localhost).
    socket_dir = options.get("login_unix_socket")
    if socket_dir and params.get("host") in (None, "localhost"):
        params["host"] = socket_dir
    if not environ.get("PGCONNECT_TIMEOUT"):
        params["connect_timeout"] = DEFAULT_CONNECT_TIMEOUT
    params["application_name"] = APPLICATION_NAME
    params["target_session_attrs"] = (params.get("target_session_attrs") or environ.get("PGTARGETSESSIONATTRS")
                                      or (TARGET_FOR_CHANGE if writes else TARGET_FOR_READS))
    params.update(options.get("connect_params") or {})
    return params


def ports_text(value: object) -> str:
    """login_port as libpq takes it: one port, or ports separated by commas (no spaces)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidRequest(f"login_port must be a port number or a comma-separated list of them (one per host of "
                             f"login_host, e.g. \"5432,5433\"), got {value!r}. Nothing was read or written.")
    return ",".join(part.strip() for part in str(value).split(","))


def _hosts(params: dict, environ: Mapping[str, str]) -> tuple[list[str], str]:
    """The hosts libpq will try, and where they come from (for messages)."""
    if params.get("host"):
        return [part.strip() for part in str(params["host"]).split(",")], "login_host"
    if environ.get("PGHOST"):
        return [part.strip() for part in environ["PGHOST"].split(",")], "PGHOST"
    return [""], "the default host"


def validate_targets(params: dict, *, writes: bool, environ: Mapping[str, str] | None = None) -> None:
    """Refuse, before connecting, a host and port list libpq cannot pair, and a change that could reach a standby.

    ``params`` are ``libpq_params``' (after ``connect_params``); ``environ`` is as there.
    """
    environ = os.environ if environ is None else environ
    hosts, hosts_from = _hosts(params, environ)
    ports_value = params.get("port") or environ.get("PGPORT") or ""
    ports = [part.strip() for part in str(ports_value).split(",")] if ports_value != "" else []
    ports_from = "login_port" if params.get("port") else "PGPORT"
    if "" in hosts and len(hosts) > 1:
        raise InvalidRequest(f"{hosts_from} lists an empty host name ({','.join(hosts)!r}): name every host, "
                             "separated by commas without a trailing one. Nothing was read or written.")
    bad = [port for port in ports if not port.isdigit() or not 1 <= int(port) <= 65535]
    if bad:
        raise InvalidRequest(f"{ports_from} must be a port number (1-65535), or a comma-separated list of them with "
                             f"one port per host of {hosts_from}; got {ports_value!r}. Nothing was read or written.")
    if len(ports) > 1 and len(ports) != len(hosts):
        example = ",".join((ports + ports[-1:] * len(hosts))[:len(hosts)])
        listed = f" ({','.join(hosts)})" if hosts != [""] else ""
        raise InvalidRequest(
            f"{ports_from} gives {len(ports)} ports ({','.join(ports)}) for the {len(hosts)} host(s) of {hosts_from}"
            f"{listed}: give one port per host, in the same order (for example login_port: \"{example}\"), or one "
            f"port for all of them (login_port: {ports[0]}). Nothing was read or written.")
    target = params.get("target_session_attrs")
    if target not in TARGET_SESSION_ATTRS:
        raise InvalidRequest(f"target_session_attrs must be one of {', '.join(TARGET_SESSION_ATTRS)}, got {target!r} "
                             "(from connect_params or PGTARGETSESSIONATTRS). Nothing was read or written.")
    if writes and target not in WRITABLE_TARGETS:
        raise InvalidRequest(
            f"target_session_attrs is {target!r}, which lets libpq connect to a standby, but a change writes and "
            f"must reach the primary: set it to {TARGET_FOR_CHANGE} (the change's default) or primary, or leave it "
            "out (check PGTARGETSESSIONATTRS and connect_params, which can set it too). Nothing was read or written.")


def describe_target(options: dict, *, writes: bool = False) -> str:
    """Where we connect, for messages: never the password."""
    params = libpq_params(options, writes=writes)
    hosts = [host or "local socket" for host in str(params.get("host") or "").split(",")]
    ports = str(params.get("port", 5432)).split(",")
    servers = ", ".join(f"{host}:{ports[index] if len(ports) > 1 else ports[0]}" for index, host in enumerate(hosts))
    where = f"{servers} ({params['target_session_attrs']})" if len(hosts) > 1 else servers
    return f"database {params.get('dbname', '(default)')!r} on {where} as {params.get('user')!r}"


def server_address(conn) -> str:
    """host:port of the server ``conn`` reached (the one libpq chose among login_host)."""
    return f"{conn.info.host}:{conn.info.port}"


def _session_role(conn) -> str | None:
    return getattr(conn, "awa_session_role", None)


def _set_transaction_settings(conn, lock_timeout: float) -> None:
    """The first statement of a transaction: lock_timeout and, with session_role, the role (both SET LOCAL)."""
    role = _session_role(conn)
    params = {"timeout": lock_timeout_setting(lock_timeout)}
    if role:
        conn.execute(TRANSACTION_SETTINGS_WITH_ROLE_SQL, dict(params, role=role))
    else:
        conn.execute(TRANSACTION_SETTINGS_SQL, params)


def connect(options: dict, *, writes: bool = False):
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
    params = libpq_params(options, writes=writes)
    validate_targets(params, writes=writes)
    try:
        conn = psycopg.connect(**params, prepare_threshold=None)
    except psycopg.Error as exc:
        reason = _connect_error(exc, options, writes=writes)
        # No SQLSTATE (refused, down, a standby where a primary is asked for) or the server not accepting
        # sessions yet: a later attempt may succeed. A refusal with a SQLSTATE (password, database) will not.
        error = ServerUnreachable if connection_lost(exc, True) else ConnectionFailed
        raise error(f"could not connect to {describe_target(options, writes=writes)}: {reason}") from None
    conn.awa_session_role = options.get("session_role") or None
    if conn.awa_session_role:
        try:
            _set_transaction_settings(conn, DEFAULT_LOCK_TIMEOUT)
        except psycopg.Error as exc:
            conn.close()
            _report_pooler_refusal(exc, f"connected to {describe_target(options)}, but")
            raise ConnectionFailed(
                f"connected to {describe_target(options)} but could not switch to session_role "
                f"{conn.awa_session_role!r}: {_first_line(exc)}. Grant it with: GRANT {conn.awa_session_role} "
                "TO <login role>") from None
        conn.rollback()
    return conn


@contextlib.contextmanager
def open_connection(options: dict, *, writes: bool = False) -> Iterator:
    conn = connect(options, writes=writes)
    try:
        yield conn
    finally:
        conn.close()


class Reopening:
    """A connection that is opened again (``reopen``) after it was lost, for read-only work - a wait - that may
    outlive the server it started on. ``close`` closes the connections it opened; the first is the caller's.
    Without ``reopen``, a lost connection stays lost."""

    def __init__(self, conn, reopen: Callable[[], object] | None) -> None:
        self._first = conn
        self._conn = conn
        self._reopen = reopen

    @property
    def reopens(self) -> bool:
        """Whether a lost connection is opened again."""
        return self._reopen is not None

    def current(self):
        """The connection, opened again when the last one was lost (raises ``ServerUnreachable`` when it cannot be)."""
        if self._conn.closed and self.reopens:
            self._conn = self._reopen()
        return self._conn

    def lost(self) -> None:
        """The connection was lost (the server ended the session): the next ``current()`` opens another."""
        self._conn.close()

    def close(self) -> None:
        if self._conn is not self._first:
            self._conn.close()


def validate_lock_timeout(seconds: float) -> None:
    if not 0 <= seconds <= MAX_LOCK_TIMEOUT:
        raise InvalidRequest(f"lock_timeout must be between 0 and {MAX_LOCK_TIMEOUT} seconds, got {seconds}")


def lock_timeout_setting(seconds: float) -> str:
    """PostgreSQL's lock_timeout value: whole milliseconds, never rounded down to 0 (which means no limit)."""
    return f"{math.ceil(seconds * 1000)}ms"


@contextlib.contextmanager
def transaction(conn, action: str, *, lock_timeout: float, read_only: bool = False, repeatable_read: bool = False,
                on_lock_timeout: Callable[[], str] | None = None) -> Iterator[None]:
    """One transaction on ``conn`` for ``action``, rolled back at the end unless committed inside.

    Its first statement sets ``lock_timeout`` (seconds; 0 waits without
    limit), so every lock it waits for is bounded, READ ONLY or not, and
    switches to the connection's ``session_role`` for this transaction. psycopg
    errors raised inside become awa.operations errors naming ``action``;
    ``on_lock_timeout`` (called after the rollback, with no arguments) may
    describe who held the lock, and its text is added to the message.
    """
    conn.rollback()
    conn.read_only = read_only
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ if repeatable_read else None
    try:
        with _translated_errors(conn, action, lock_timeout, on_lock_timeout):
            _set_transaction_settings(conn, lock_timeout)
            yield
    finally:
        if not conn.closed:
            conn.rollback()
            conn.read_only = False
            conn.isolation_level = None


def commit(conn, action: str) -> None:
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


def _connect_error(exc: BaseException, options: dict, *, writes: bool = False) -> str:
    """libpq's reason (per host, when there are several), without the key path or password it may name, and what
    to do for a TLS or standby refusal."""
    params = libpq_params(options, writes=writes)
    attempts = HOST_ATTEMPT.findall(str(exc))
    text = "; ".join(f"{host}:{port}: {reason}" for host, port, reason in attempts) if len(attempts) > 1 \
        else _first_line(exc)
    for keyword, shown in HIDDEN_VALUES.items():
        if params.get(keyword):
            text = text.replace(str(params[keyword]), shown)
    hints = [hint for words, hint in TLS_HINTS.items() if words in text]
    if any(words in str(exc) for words in STANDBY_REFUSALS):
        hints.append(_standby_hint(params["target_session_attrs"], writes))
    return text + "".join(f". {hint}" for hint in hints)


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


def _holders(conn, on_lock_timeout: Callable[[], str] | None) -> str:
    """Who held the lock, read in a transaction of its own (best effort: empty when it cannot be read)."""
    if on_lock_timeout is None or conn.closed:
        return ""
    try:
        conn.rollback()
        _set_transaction_settings(conn, DEFAULT_LOCK_TIMEOUT)
        return on_lock_timeout()
    except psycopg.Error:
        return ""
    finally:
        if not conn.closed:
            conn.rollback()


@contextlib.contextmanager
def _translated_errors(conn, action: str, lock_timeout: float,
                       on_lock_timeout: Callable[[], str] | None) -> Iterator[None]:
    """Turn psycopg errors raised while doing ``action`` into awa.operations errors."""
    try:
        yield
    except pg_errors.LockNotAvailable as exc:
        holder = _holders(conn, on_lock_timeout)
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
        if exc.sqlstate is None:
            raise DatabaseError(f"{action}: {_first_line(exc)} (raised by psycopg in this process, before the "
                                f"statement reached the database: {type(exc).__name__}). The transaction was rolled "
                                "back, so nothing was changed.") from None
        raise DatabaseError(f"{action}: {_first_line(exc)}. The transaction was rolled back, so nothing was "
                            "changed.", sqlstate=exc.sqlstate) from None


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
    if sqlstate is not None:
        return sqlstate.startswith("08") or sqlstate in SESSION_ENDED_SQLSTATES
    return closed
