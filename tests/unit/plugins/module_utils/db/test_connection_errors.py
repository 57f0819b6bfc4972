# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a refused connection is reported: libpq's reason, without secrets, with what to do for TLS or a pooler."""
from __future__ import annotations

import os

import psycopg
import pytest
from psycopg import errors as pg_errors

from ansible_collections.awa.operations.plugins.module_utils.db.connection import _connect_error, _report_pooler_refusal
from ansible_collections.awa.operations.plugins.module_utils.db.options import libpq_params
from ansible_collections.awa.operations.plugins.module_utils.errors import ConnectionFailed

PREFIX = 'connection failed: connection to server at "10.0.0.5", port 5432 failed: '
OPTIONS = {"login_host": "db1", "login_user": "awa_migrator", "login_password": "s3cr3t-pw",
           "ssl_mode": "verify-full", "ca_cert": "/etc/awa/ca.crt", "ssl_cert": "/etc/awa/client.crt",
           "ssl_key": "/etc/awa/private/client.key"}


def reported(libpq_message: str, options: dict | None = None) -> str:
    given = options or OPTIONS
    return _connect_error(psycopg.OperationalError(PREFIX + libpq_message), given,
                          libpq_params(given, environ=os.environ), writes=False)


@pytest.mark.parametrize("libpq_message, hint", [
    ("SSL error: certificate verify failed", "set ca_cert to the CA that issued it"),
    ('server certificate for "db1.example.com" does not match host name "db1"',
     "Set login_host to a host name the server's certificate lists"),
    ("FATAL:  connection requires a valid client certificate", "set ssl_cert and ssl_key"),
    ('FATAL:  certificate authentication failed for user "awa_migrator"', "common name (CN) must be login_user"),
    ('could not open private key file "/etc/awa/private/client.key": Permission denied',
     "Set ssl_key to the client certificate's private key"),
])
def test_a_tls_refusal_says_which_option_to_fix(libpq_message, hint):
    message = reported(libpq_message)
    assert message.startswith(PREFIX) and message.endswith(".")
    assert hint in message


def test_the_key_path_and_the_password_are_replaced_by_the_option_names():
    message = reported('certificate present, but not private key file "/etc/awa/private/client.key" '
                       '(password was s3cr3t-pw)')
    assert "/etc/awa/private/client.key" not in message and "s3cr3t-pw" not in message
    assert 'private key file "(ssl_key)"' in message and "(login_password)" in message


def test_a_password_given_in_connect_params_is_hidden_too():
    options = {**OPTIONS, "login_password": "", "connect_params": {"password": "from-params"}}
    assert "from-params" not in reported("FATAL:  password from-params rejected", options)


def test_a_password_written_into_a_connection_string_is_hidden_too():
    options = {**OPTIONS, "login_password": "", "login_db": "postgresql://awa:uri-pw@db1/app",
               "connect_params": {"dbname": "host=db1 password=kv-pw"}}
    message = reported('could not translate host name "postgresql://awa:uri-pw@db1" to address (kv-pw)', options)
    assert "uri-pw" not in message and "kv-pw" not in message and "postgresql://awa:********@db1" in message


def test_other_failures_are_reported_as_libpq_gives_them():
    libpq_message = 'FATAL:  password authentication failed for user "awa_migrator"'
    assert reported(libpq_message) == PREFIX + libpq_message


@pytest.mark.parametrize("pooler_message, hint", [
    ("transaction blocks not allowed in statement pooling mode",
     "Point login_host and login_port at a pool in transaction or session mode (PgBouncer: pool_mode = transaction)"),
    ("query_wait_timeout", "Re-run when they are done, or give the pool more server connections"),
], ids=["statement-pooling", "pool-busy"])
def test_a_pooler_refusing_the_transaction_is_not_reported_as_a_lost_connection(pooler_message, hint):
    # PgBouncer sends these with SQLSTATE 08P01 (class 08: "connection lost") and closes the connection.
    with pytest.raises(ConnectionFailed) as refused:
        _report_pooler_refusal(pg_errors.ProtocolViolation(pooler_message), "reading the shard state of 'q':")
    message = refused.value.message
    assert message.startswith(
        f"reading the shard state of 'q': the pooler refused the transaction ({pooler_message}): ")
    assert hint in message and message.endswith("Nothing was changed.")


def test_other_protocol_errors_keep_their_own_messages():
    assert _report_pooler_refusal(pg_errors.ProtocolViolation("unexpected message type 0x50"), "x:") is None


@pytest.mark.parametrize("given, environment, expected", [
    ({}, {"PGHOST": "no-such-host.invalid"},
     "the host name 'no-such-host.invalid' of PGHOST (the environment of the host that runs the module) does not "
     "resolve: Name or service not known. Correct PGHOST there, or give login_host"),
    ({"login_host": "db9.invalid"}, {"PGHOST": "db1"},
     "the host name 'db9.invalid' of login_host does not resolve: Name or service not known. Correct login_host"),
], ids=["pghost", "login_host"])
def test_a_host_name_that_does_not_resolve_is_named_with_where_it_came_from(monkeypatch, given, environment, expected):
    """psycopg resolves host names itself and says "host None" for the one host of PGHOST."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    host = repr(given["login_host"]) if given else "None"
    error = psycopg.OperationalError(f"failed to resolve host {host}: [Errno -2] Name or service not known")
    options = {"login_user": "awa", **given}
    assert _connect_error(error, options, libpq_params(options, environ=os.environ), writes=False) == expected
