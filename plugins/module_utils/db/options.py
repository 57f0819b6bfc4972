# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The connection options of both modules and what libpq makes of them, and the ledger's schema (an option of
both too). No driver: nothing here connects.

The options are community.postgresql's, by name; the doc fragment
``awa.operations.connection`` documents exactly ``connection_argument_spec()``.
``libpq_params`` maps them to libpq's keywords, ``validate_targets`` refuses
before connecting what libpq could not pair or what could reach a standby
for a change. connection.py connects with them.
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol
from urllib.parse import unquote

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.masking import masked

APPLICATION_NAME = "awa.operations"
DEFAULT_CONNECT_TIMEOUT = 10
# Seconds any statement of ours waits for a lock before the transaction fails (0: no limit).
DEFAULT_LOCK_TIMEOUT = 5.0
# The schema of the ledger of changes (schema/ledger.py), unless ledger_schema names another.
DEFAULT_SCHEMA = "awa_operations"
MAX_LOCK_TIMEOUT = 3600

# Ansible option -> libpq keyword.
LIBPQ_KEYWORDS = {"login_host": "host", "login_port": "port", "login_user": "user", "login_password": "password",
                  "login_db": "dbname", "ssl_mode": "sslmode", "ca_cert": "sslrootcert", "ssl_cert": "sslcert",
                  "ssl_key": "sslkey", "target_session_attrs": "target_session_attrs"}

# Options whose documented default would hide libpq's environment: when the task does not give one, the
# variable libpq reads for it is used if set (as community.postgresql does), else the default. The other
# options default to empty, which leaves libpq to read its environment itself (PGHOST, PGDATABASE,
# PGPASSWORD, PGSSLROOTCERT, ...), except target_session_attrs, whose default depends on the work
# (libpq_params reads PGTARGETSESSIONATTRS for it).
ENVIRONMENT_FALLBACKS = {"login_user": "PGUSER", "login_port": "PGPORT", "ssl_mode": "PGSSLMODE"}

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


# libpq keywords whose values are secrets.
SECRET_KEYWORDS = ("password", "sslpassword")
# A secret written into a connection string libpq reads (login_db and connect_params' dbname are expanded; a
# login_host holding one is a mistake to report without it): key=value, quoted or not, and a URI's user information
# or query.
EMBEDDED_SECRETS = (
    re.compile(r"\b(?:ssl)?password\s*=\s*'((?:[^'\\]|\\.)*)'"),
    re.compile(r"\b(?:ssl)?password\s*=\s*([^\s']+)"),
    re.compile(r"^\s*postgres(?:ql)?://[^@/:]*:([^@/]*)@", re.IGNORECASE),
)


# The connection options (community.postgresql names, no aliases); connection_argument_spec() returns a copy.
CONNECTION_OPTIONS: dict[str, dict[str, object]] = {
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


class Module(Protocol):
    """What the modules' runs use of their AnsibleModule (module_main takes its class: module_utils import nothing
    of Ansible's)."""

    params: dict[str, Any]
    check_mode: bool
    no_log_values: set[str]

    def warn(self, warning: str) -> None: ...

    def fail_json(self, msg: str, **kwargs: Any) -> NoReturn: ...

    def exit_json(self, **kwargs: Any) -> NoReturn: ...


def environment_or_default(option: str) -> object:
    """The value of ``option`` when the task does not give it: its libpq environment variable if set, else its
    default (an Ansible ``fallback`` of the options of ENVIRONMENT_FALLBACKS)."""
    return os.environ.get(ENVIRONMENT_FALLBACKS.get(option, "")) or CONNECTION_OPTIONS[option].get("default")


def connection_argument_spec() -> dict[str, dict[str, object]]:
    """A fresh argument spec for the connection options."""
    spec = copy.deepcopy(CONNECTION_OPTIONS)
    for name in ENVIRONMENT_FALLBACKS:
        spec[name]["fallback"] = (environment_or_default, [name])
    return spec


def connection_defaults() -> dict[str, Any]:
    """Each connection option's value when a caller does not give it: its default, or its libpq environment."""
    return {name: environment_or_default(name) for name in CONNECTION_OPTIONS}


def libpq_params(options: Mapping[str, Any], *, environ: Mapping[str, str], writes: bool = False) -> dict[str, Any]:
    """libpq keyword arguments from Ansible options; empty values are left to libpq (and its environment).

    ``target_session_attrs``, when neither given nor in ``PGTARGETSESSIONATTRS``,
    is ``read-write`` for a change (``writes``) and ``primary`` for reads.
    ``environ`` is libpq's environment: this process's (connection.py passes it) or, to judge the options alone, empty.
    """
    params: dict[str, Any] = {keyword: options[option] for option, keyword in LIBPQ_KEYWORDS.items()
                              if options.get(option) not in (None, "")}
    # login_port as libpq takes it: one port, or ports separated by commas (no spaces).
    port = params.get("port")
    if port is not None:
        if isinstance(port, bool) or not isinstance(port, (int, str)):
            raise InvalidRequest(f"login_port must be a port number or a comma-separated list of them (one per host "
                                 f"of login_host, e.g. \"5432,5433\"), got {port!r}. Nothing was read or written.")
        params["port"] = ",".join(part.strip() for part in str(port).split(","))
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


def libpq_hosts(params: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[list[str], str]:
    """The hosts libpq will try, and where they come from (for messages): login_host, or PGHOST."""
    hosts_from = "login_host" if params.get("host") else "PGHOST" if environ.get("PGHOST") else "the default host"
    return [part.strip() for part in str(params.get("host") or environ.get("PGHOST") or "").split(",")], hosts_from


def validate_targets(params: Mapping[str, Any], *, writes: bool, environ: Mapping[str, str]) -> None:
    """Refuse, before connecting, a host and port list libpq cannot pair, and a change that could reach a standby.

    ``params`` are ``libpq_params``' (after ``connect_params``); ``environ`` is as there.
    """
    hosts, hosts_from = libpq_hosts(params, environ)
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


def connection_secrets(options: Mapping[str, Any]) -> list[str]:
    """Every secret the connection options hold: login_password, connect_params' password and sslpassword, and a
    password written into a connection string or URI (login_db, login_host or any value of connect_params).

    A module adds them to its no_log values (Ansible then masks them in its whole result, the invocation of
    connect_params included); a message built here masks them itself.
    """
    given = options.get("connect_params")
    # Not a mapping before the options are validated (the role checks its connection variable with these).
    params = given if isinstance(given, Mapping) else {}
    found = [options.get("login_password"), *(params.get(keyword) for keyword in SECRET_KEYWORDS)]
    for text in (options.get("login_db"), options.get("login_host"), *params.values()):
        if isinstance(text, str):
            found += [match.group(1) for pattern in EMBEDDED_SECRETS for match in pattern.finditer(text)]
    texts = [str(secret) for secret in found if secret not in (None, "")]
    # A URI's password is percent-encoded; libpq decodes it.
    return sorted({*texts, *(unquote(text) for text in texts)})


@dataclass(frozen=True)
class Attempt:
    """What libpq last tried when a connection failed, and how it authenticated, as the failed connection itself
    tells it (psycopg's ``Error.pgconn``): the server it really used, whatever chose it - the options, PGHOST,
    PGHOSTADDR, PGPORT, a service file or libpq's defaults."""

    host: str  # a host name, an address, or a socket directory (starting with /)
    hostaddr: str  # the address it connected to, when it resolved one
    port: str
    dbname: str
    user: str
    used_password: bool
    needs_password: bool  # the server asked for a password and libpq had none
    passfile: str  # the password file libpq looked in (empty when a password was given)


def _server(host: str, hostaddr: str, port: str) -> str:
    """One server as libpq reaches it: host:port (with its address when that differs), or its socket."""
    if host.startswith(("/", "@")):
        return f"the local socket {host.rstrip('/')}/.s.PGSQL.{port}"
    if not host and not hostaddr:
        return f"the local socket (port {port})"
    if host and hostaddr and hostaddr != host:
        return f"{host} ({hostaddr}):{port}"
    return f"{host or hostaddr}:{port}"


def _configured_servers(params: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """The servers the options and libpq's environment name before any attempt: host or PGHOST, hostaddr or
    PGHOSTADDR, port or PGPORT (libpq pairs their lists item by item; one value serves every item)."""
    lists = [str(params.get(keyword) or environ.get(variable) or default).split(",")
             for keyword, variable, default in (("host", "PGHOST", ""), ("hostaddr", "PGHOSTADDR", ""),
                                                ("port", "PGPORT", 5432))]
    count = max(len(values) for values in lists)
    return [_server(*(values[index] if len(values) > 1 else values[0] for values in lists)) for index in range(count)]


def describe_target(options: Mapping[str, Any], *, environ: Mapping[str, str], writes: bool = False,
                    attempt: Attempt | None = None) -> str:
    """Where we connect, for messages: the server libpq really tried (``attempt``) when one host was named, else the
    servers the options and libpq's environment name. Never a password, not even one written into login_db or
    login_host. ``environ`` is as libpq_params'."""
    params = libpq_params(options, writes=writes, environ=environ)
    servers = _configured_servers(params, environ)
    dbname = params.get("dbname") or environ.get("PGDATABASE") or "(default)"
    user = params.get("user") or environ.get("PGUSER") or "(default)"
    if attempt is not None and len(servers) == 1:
        servers = [_server(attempt.host, attempt.hostaddr, attempt.port)]
        dbname, user = attempt.dbname or dbname, attempt.user or user
    where = f"{', '.join(servers)} ({params['target_session_attrs']})" if len(servers) > 1 else servers[0]
    return masked(f"database {dbname!r} on {where} as {user!r}", connection_secrets(options))


def password_used(options: Mapping[str, Any], attempt: Attempt | None, environ: Mapping[str, str]) -> str | None:
    """Which password libpq sent, by where it came from (never its value): ``with the password from PGPASSWORD``,
    or ``without a password (...)`` when it found none; None when the attempt is unknown or needed no password.
    libpq takes the password keyword (login_password, connect_params), else PGPASSWORD, else the password file."""
    if attempt is None or not (attempt.used_password or attempt.needs_password):
        return None
    passfile = attempt.passfile or environ.get("PGPASSFILE") or "~/.pgpass"
    if attempt.needs_password:
        return (f"without a password (login_password is empty, and neither PGPASSWORD nor an entry of the password "
                f"file {passfile} gives one)")
    connect_params = options.get("connect_params") or {}
    given = {"login_password": options.get("login_password"), "connect_params": connect_params.get("password"),
             "PGPASSWORD": environ.get("PGPASSWORD")}
    source = next((name for name, value in given.items() if value), None)
    if source:
        return f"with the password from {source}"
    service = connect_params.get("service") or environ.get("PGSERVICE")
    if service:
        return f"with the password from service {service!r} (its service file entry) or the password file {passfile}"
    return f"with the password from an entry of the password file {passfile}"


def validate_lock_timeout(seconds: float) -> None:
    if not 0 <= seconds <= MAX_LOCK_TIMEOUT:
        raise InvalidRequest(f"lock_timeout must be between 0 and {MAX_LOCK_TIMEOUT} seconds, got {seconds}")


def lock_timeout_setting(seconds: float) -> str:
    """PostgreSQL's lock_timeout value: whole milliseconds, never rounded down to 0 (which means no limit)."""
    return f"{math.ceil(seconds * 1000)}ms"
