# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connecting to PostgreSQL with psycopg 3, and the only place that knows its errors.

The options are community.postgresql's, by name; the doc fragment
``awa.operations.connection`` documents exactly ``connection_argument_spec()``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ansible_collections.awa.operations.plugins.module_utils.errors import (
    ConnectionFailed,
    DatabaseError,
    LockTimeout,
    PreconditionFailed,
)

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg import sql
except ImportError:  # reported through missing_required_lib by the modules
    psycopg = None
    pg_errors = None
    sql = None
    HAS_PSYCOPG = False
else:
    HAS_PSYCOPG = True

APPLICATION_NAME = "awa.operations"
DEFAULT_CONNECT_TIMEOUT = 10

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
}

SSL_MODES = ["allow", "disable", "prefer", "require", "verify-ca", "verify-full"]

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
# Connection values libpq may repeat in its messages that must not be shown, and what is shown instead.
HIDDEN_VALUES = {"password": "(login_password)", "sslkey": "(ssl_key)", "sslpassword": "(sslpassword)"}


def connection_argument_spec() -> dict:
    """A fresh argument spec for the connection options (community.postgresql names)."""
    return {
        "login_user": {"type": "str", "default": "postgres"},
        "login_password": {"type": "str", "default": "", "no_log": True},
        "login_host": {"type": "str", "default": ""},
        "login_port": {"type": "int", "default": 5432, "aliases": ["port"]},
        "login_unix_socket": {"type": "str", "default": ""},
        "login_db": {"type": "str", "aliases": ["db"]},
        "ssl_mode": {"type": "str", "default": "prefer", "choices": list(SSL_MODES)},
        "ca_cert": {"type": "path", "aliases": ["ssl_rootcert"]},
        "ssl_cert": {"type": "path"},
        "ssl_key": {"type": "path", "no_log": True},
        "connect_params": {"type": "dict", "default": {}},
        "session_role": {"type": "str"},
    }


CONNECTION_OPTIONS = tuple(connection_argument_spec())


def libpq_params(options: dict) -> dict:
    """libpq keyword arguments from Ansible options; empty values are left to libpq."""
    params = {}
    for option, keyword in LIBPQ_KEYWORDS.items():
        value = options.get(option)
        if value not in (None, ""):
            params[keyword] = value
    # A socket directory is used only when no TCP host is named (or it is localhost).
    socket_dir = options.get("login_unix_socket")
    if socket_dir and params.get("host") in (None, "localhost"):
        params["host"] = socket_dir
    params.setdefault("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
    params["application_name"] = APPLICATION_NAME
    params.update(options.get("connect_params") or {})
    return params


def describe_target(options: dict) -> str:
    """Where we connect, for messages: never the password."""
    params = libpq_params(options)
    host = params.get("host") or "local socket"
    return f"database {params.get('dbname', '(default)')!r} on {host}:{params.get('port', 5432)} as {params.get('user')!r}"


def connect(options: dict):
    """Open a connection (autocommit off) and switch to ``session_role`` if given."""
    if not HAS_PSYCOPG:
        raise ConnectionFailed("psycopg 3 is not installed on the host that runs the module")
    try:
        conn = psycopg.connect(**libpq_params(options))
    except psycopg.Error as exc:
        reason = _connect_error(exc, options)
        raise ConnectionFailed(f"could not connect to {describe_target(options)}: {reason}") from None
    role = options.get("session_role")
    if role:
        try:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
            conn.commit()
        except psycopg.Error as exc:
            conn.close()
            raise ConnectionFailed(
                f"connected to {describe_target(options)} but could not switch to session_role {role!r}: "
                f"{_first_line(exc)}. Grant it with: GRANT {role} TO <login role>") from None
    return conn


@contextlib.contextmanager
def open_connection(options: dict) -> Iterator:
    conn = connect(options)
    try:
        yield conn
    finally:
        conn.close()


def _connect_error(exc: BaseException, options: dict) -> str:
    """libpq's reason, without the key path or password it may name, and what to do for a TLS refusal."""
    text = _first_line(exc)
    params = libpq_params(options)
    for keyword, shown in HIDDEN_VALUES.items():
        if params.get(keyword):
            text = text.replace(str(params[keyword]), shown)
    return text + "".join(f". {hint}" for words, hint in TLS_HINTS.items() if words in text)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextlib.contextmanager
def translated_errors(action: str, on_lock_timeout=None) -> Iterator[None]:
    """Turn psycopg errors raised while doing ``action`` into awa.operations errors.

    ``on_lock_timeout`` is called (with no arguments) to describe who held the
    lock; its text is appended to the message.
    """
    if not HAS_PSYCOPG:
        yield
        return
    try:
        yield
    except pg_errors.LockNotAvailable as exc:
        holder = on_lock_timeout() if on_lock_timeout else ""
        raise LockTimeout(f"{action}: a lock was not granted within lock_timeout ({_first_line(exc)}). "
                          f"Nothing was changed.{(' ' + holder) if holder else ''} "
                          "Retry when that transaction has finished, or raise lock_timeout.") from None
    except pg_errors.InsufficientPrivilege as exc:
        raise PreconditionFailed(f"{action}: {_first_line(exc)}. Nothing was changed.",
                                 sqlstate=exc.sqlstate) from None
    except psycopg.Error as exc:
        if _connection_lost(exc):
            raise DatabaseError(f"{action}: the database connection was lost ({_first_line(exc)}). The transaction "
                                "did not commit, so nothing was changed; re-run to apply.",
                                sqlstate=exc.sqlstate) from None
        raise DatabaseError(f"{action}: {_first_line(exc)}. The transaction was rolled back, so nothing was "
                            "changed.", sqlstate=exc.sqlstate) from None


def _connection_lost(exc: BaseException) -> bool:
    """The session is gone (client-side failure, connection class 08, or the server shutting it down)."""
    sqlstate = getattr(exc, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in ("57P01", "57P02", "57P03")
