# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection rules without a server: which libpq parameters the options give, what messages say
(never the password), and which errors mean the connection was lost."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pg_errors

from ansible_collections.awa.operations.plugins.module_utils.connection import (
    APPLICATION_NAME,
    DEFAULT_CONNECT_TIMEOUT,
    connect,
    connection_argument_spec,
    connection_lost,
    describe_target,
    libpq_params,
    lock_timeout_setting,
)
from ansible_collections.awa.operations.plugins.module_utils.errors import ConnectionFailed

PASSWORD = "s3cr3t-Pa55word"


def options(**changes) -> dict:
    """The options as Ansible passes them: every option present, defaults filled in."""
    defaults = {name: spec.get("default") for name, spec in connection_argument_spec().items()}
    return {**defaults, **changes}


@pytest.mark.parametrize("host, socket, expected", [
    ("", "/run/postgresql", "/run/postgresql"),
    ("localhost", "/run/postgresql", "/run/postgresql"),
    ("db1.example.com", "/run/postgresql", "db1.example.com"),
    ("127.0.0.1", "/run/postgresql", "127.0.0.1"),
    ("db1.example.com", "", "db1.example.com"),
    ("", "", None),
], ids=["no-host", "localhost", "tcp-host", "tcp-address", "no-socket", "neither"])
def test_the_socket_directory_is_used_only_without_a_tcp_host(host, socket, expected):
    assert libpq_params(options(login_host=host, login_unix_socket=socket)).get("host") == expected


def test_options_map_to_libpq_keywords_and_empty_values_are_left_to_libpq():
    params = libpq_params(options(login_host="db1", login_port=6543, login_user="awa_migrator", login_db="app",
                                  login_password="", ca_cert="/etc/ca.pem", ssl_mode="verify-full"))
    assert params == {"host": "db1", "port": "6543", "user": "awa_migrator", "dbname": "app", "sslmode": "verify-full",
                      "sslrootcert": "/etc/ca.pem", "connect_timeout": DEFAULT_CONNECT_TIMEOUT,
                      "application_name": APPLICATION_NAME, "target_session_attrs": "primary"}


def test_connect_params_take_precedence_over_every_other_option():
    params = libpq_params(options(login_host="db1", login_unix_socket="/run/postgresql", login_port=5432,
                                  connect_params={"host": "db2", "port": 6000, "connect_timeout": 3,
                                                  "application_name": "mine", "target_session_attrs": "read-write"}))
    assert (params["host"], params["port"], params["connect_timeout"]) == ("db2", 6000, 3)
    assert params["application_name"] == "mine" and params["target_session_attrs"] == "read-write"


def test_the_target_is_described_without_the_password():
    described = describe_target(options(login_host="db1", login_db="app", login_user="awa", login_password=PASSWORD))
    assert described == "database 'app' on db1:5432 as 'awa'"
    assert describe_target(options(login_user="awa")) == "database '(default)' on local socket:5432 as 'awa'"


@pytest.mark.parametrize("changes", [
    {"login_host": "127.0.0.1", "login_port": 1},  # nothing listens on port 1: refused at once
    {"login_host": "127.0.0.1", "connect_params": {"no_such_libpq_option": "x"}},  # refused by libpq itself
], ids=["refused", "bad-connect-param"])
def test_a_failed_connection_names_the_target_but_never_the_password(changes):
    with pytest.raises(ConnectionFailed) as failure:
        connect(options(login_user="awa", login_db="app", login_password=PASSWORD, **changes))
    assert failure.value.message.startswith("could not connect to database 'app' on 127.0.0.1:")
    assert PASSWORD not in failure.value.message and PASSWORD not in repr(failure.value.details)


@pytest.mark.parametrize("error, closed, lost", [
    (pg_errors.AdminShutdown("terminating connection due to administrator command"), False, True),
    (pg_errors.lookup("08006")("connection failure"), False, True),
    (psycopg.OperationalError("server closed the connection unexpectedly"), True, True),
    (psycopg.InterfaceError("the connection is closed"), True, True),
    (psycopg.ProgrammingError("the query has 2 placeholders but 1 parameters were passed"), False, False),
    (psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"), False, False),
    (pg_errors.SerializationFailure("could not serialize access"), False, False),
    (pg_errors.LockNotAvailable("canceling statement due to lock timeout"), False, False),
], ids=["admin-shutdown", "class-08", "closed-by-server", "used-after-close", "client-bug", "client-data",
        "serialization", "lock-timeout"])
def test_a_connection_is_lost_only_when_the_session_ended(error, closed, lost):
    assert connection_lost(error, closed) is lost


@pytest.mark.parametrize("seconds, setting", [(5, "5000ms"), (0.25, "250ms"), (0.0001, "1ms"), (0, "0ms")])
def test_lock_timeout_is_never_rounded_down_to_no_limit(seconds, setting):
    assert lock_timeout_setting(seconds) == setting
