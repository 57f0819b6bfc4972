# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection rules without a server: which libpq parameters the options give, what messages say
(never the password), and which errors mean the connection was lost."""

from __future__ import annotations

import psycopg
import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from psycopg import errors as pg_errors

from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, connection_lost
from ansible_collections.awa.operations.plugins.module_utils.db.options import (
    APPLICATION_NAME,
    DEFAULT_CONNECT_TIMEOUT,
    Attempt,
    connection_argument_spec,
    connection_defaults,
    connection_secrets,
    describe_target,
    libpq_params,
    lock_timeout_setting,
    password_used,
    validate_targets,
)
from ansible_collections.awa.operations.plugins.module_utils.errors import ConnectionFailed, InvalidRequest

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
    assert libpq_params(options(login_host=host, login_unix_socket=socket), environ={}).get("host") == expected


def test_options_map_to_libpq_keywords_and_empty_values_are_left_to_libpq():
    params = libpq_params(options(login_host="db1", login_port=6543, login_user="awa_migrator", login_db="app",
                                  login_password="", ca_cert="/etc/ca.pem", ssl_mode="verify-full"), environ={})
    assert params == {"host": "db1", "port": "6543", "user": "awa_migrator", "dbname": "app", "sslmode": "verify-full",
                      "sslrootcert": "/etc/ca.pem", "connect_timeout": DEFAULT_CONNECT_TIMEOUT,
                      "application_name": APPLICATION_NAME, "target_session_attrs": "primary"}


def test_connect_params_take_precedence_over_every_other_option():
    params = libpq_params(options(login_host="db1", login_unix_socket="/run/postgresql", login_port=5432,
                                  connect_params={"host": "db2", "port": 6000, "connect_timeout": 3,
                                                  "application_name": "mine", "target_session_attrs": "read-write"}),
                          environ={})
    assert (params["host"], params["port"], params["connect_timeout"]) == ("db2", 6000, 3)
    assert params["application_name"] == "mine" and params["target_session_attrs"] == "read-write"


def test_the_target_is_described_without_the_password():
    described = describe_target(options(login_host="db1", login_db="app", login_user="awa", login_password=PASSWORD),
                                environ={})
    assert described == "database 'app' on db1:5432 as 'awa'"
    assert describe_target(options(login_user="awa"), environ={}) == \
        "database '(default)' on the local socket (port 5432) as 'awa'"


@pytest.mark.parametrize("changes, environ, described", [
    ({"login_port": None}, {"PGHOST": "127.0.0.1", "PGPORT": "32891"}, "database 'awa' on 127.0.0.1:32891 as 'awa'"),
    ({}, {"PGHOSTADDR": "10.0.0.7"}, "database 'awa' on 10.0.0.7:5432 as 'awa'"),
    ({}, {"PGHOST": "db1", "PGHOSTADDR": "10.0.0.7"}, "database 'awa' on db1 (10.0.0.7):5432 as 'awa'"),
    ({}, {"PGHOST": "/run/postgresql"}, "database 'awa' on the local socket /run/postgresql/.s.PGSQL.5432 as 'awa'"),
    ({"login_host": "db2"}, {"PGHOST": "127.0.0.1"}, "database 'awa' on db2:5432 as 'awa'"),
    ({"login_db": None, "login_user": None}, {"PGDATABASE": "app", "PGUSER": "me"},
     "database 'app' on the local socket (port 5432) as 'me'"),
], ids=["pghost-pgport", "pghostaddr", "pghost-and-pghostaddr", "pghost-socket", "option-over-pghost", "pgdatabase"])
def test_the_target_before_connecting_is_what_the_options_and_libpqs_environment_name(changes, environ, described):
    assert describe_target(options(**{"login_db": "awa", "login_user": "awa", **changes}), environ=environ) == described


def attempt(**changes) -> Attempt:
    """A failed attempt as libpq tells it: a password sent to 127.0.0.1:32891."""
    return Attempt(**{"host": "127.0.0.1", "hostaddr": "127.0.0.1", "port": "32891", "dbname": "awa",
                      "user": "awa_migrator", "used_password": True, "needs_password": False, "passfile": "",
                      **changes})


@pytest.mark.parametrize("tried, described", [
    (attempt(), "database 'awa' on 127.0.0.1:32891 as 'awa_migrator'"),
    (attempt(host="db1.example.com", hostaddr="10.0.0.7"),
     "database 'awa' on db1.example.com (10.0.0.7):32891 as 'awa_migrator'"),
    (attempt(host="/var/run/postgresql", hostaddr="", port="5432"),
     "database 'awa' on the local socket /var/run/postgresql/.s.PGSQL.5432 as 'awa_migrator'"),
], ids=["address", "host-name", "socket"])
def test_a_failed_attempt_names_the_server_libpq_really_tried(tried, described):
    # The options name no host: libpq took it from its environment, a service file or its default.
    assert describe_target(options(login_db="app", login_user="someone"), environ={}, attempt=tried) == described


def test_with_several_hosts_each_is_named_not_only_the_last_one_tried():
    described = describe_target(options(login_host="db1,db2", login_port="5432,5433", login_db="app",
                                        login_user="awa"), environ={}, attempt=attempt(host="db2", port="5433"))
    assert described == "database 'app' on db1:5432, db2:5433 (primary) as 'awa'"


def test_a_password_written_into_login_db_is_masked_in_the_attempt_too():
    uri = f"postgresql://awa:{PASSWORD}@db1/app"
    described = describe_target(options(login_db=uri), environ={}, attempt=attempt(dbname=uri))
    assert described == "database 'postgresql://awa:********@db1/app' on 127.0.0.1:32891 as 'awa_migrator'"


@pytest.mark.parametrize("changes, environ, tried, used", [
    ({"login_password": PASSWORD}, {"PGPASSWORD": "other"}, attempt(), "with the password from login_password"),
    ({"connect_params": {"password": PASSWORD}}, {"PGPASSWORD": "other"}, attempt(),
     "with the password from connect_params"),
    ({}, {"PGPASSWORD": PASSWORD}, attempt(), "with the password from PGPASSWORD"),
    ({}, {}, attempt(passfile="/root/.pgpass"), "with the password from an entry of the password file /root/.pgpass"),
    ({}, {"PGPASSFILE": "/etc/awa/pgpass"}, attempt(passfile="/etc/awa/pgpass"),
     "with the password from an entry of the password file /etc/awa/pgpass"),
    ({}, {"PGSERVICE": "awa"}, attempt(passfile="/root/.pgpass"),
     "with the password from service 'awa' (its service file entry) or the password file /root/.pgpass"),
    ({}, {}, attempt(needs_password=True, passfile="/root/.pgpass"),
     "without a password (login_password is empty, and neither PGPASSWORD nor an entry of the password file "
     "/root/.pgpass gives one)"),
    ({"login_password": PASSWORD}, {}, attempt(used_password=False), None),
    ({"login_password": PASSWORD}, {}, None, None),
], ids=["login_password", "connect_params", "pgpassword", "pgpass", "pgpassfile", "service", "none-found",
        "no-password-asked", "no-attempt"])
def test_the_password_sent_is_named_by_where_it_came_from_never_by_its_value(changes, environ, tried, used):
    assert password_used(options(**changes), tried, environ) == used


@pytest.mark.parametrize("changes, secrets", [
    ({"login_password": PASSWORD}, [PASSWORD]),
    ({"connect_params": {"password": PASSWORD, "sslpassword": "key-pass", "connect_timeout": 3}},
     [PASSWORD, "key-pass"]),
    ({"login_db": f"postgresql://awa:{PASSWORD}@db1:5432/app?sslmode=require"}, [PASSWORD]),
    ({"login_db": "postgresql://awa:p%40ss%2Fw0rd@db1/app"}, ["p%40ss%2Fw0rd", "p@ss/w0rd"]),
    ({"connect_params": {"dbname": f"host=db1 password = '{PASSWORD} x' dbname=app"}}, [f"{PASSWORD} x"]),
    ({"login_host": f"postgres://awa:{PASSWORD}@db1"}, [PASSWORD]),
    ({"connect_params": {"dbname": f"postgresql://db1/app?password={PASSWORD}"}}, [PASSWORD]),
    ({"login_db": "app", "login_host": "db1", "connect_params": {"sslmode": "require"}}, []),
], ids=["login_password", "connect_params", "uri", "uri-encoded", "conninfo-quoted", "uri-in-host", "uri-query",
        "none"])
def test_every_secret_the_connection_options_hold_is_found(changes, secrets):
    assert connection_secrets(options(**changes)) == sorted(secrets)


def test_a_password_written_into_login_db_or_login_host_is_not_described():
    described = describe_target(options(login_host=f"postgres://awa:{PASSWORD}@db1", login_user="awa",
                                        login_db=f"host=db1 password={PASSWORD} dbname=app"), environ={})
    assert described == ("database 'host=db1 password=******** dbname=app' on postgres://awa:********@db1:5432 as "
                         "'awa'")


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


# -- several hosts, target_session_attrs, libpq's environment ------------------------------------------------

def validated(writes: bool = False, environ: dict | None = None, **changes) -> dict:
    """libpq's parameters for the options, checked as connect() checks them before connecting."""
    params = libpq_params(options(**changes), writes=writes, environ=environ or {})
    validate_targets(params, writes=writes, environ=environ or {})
    return params


@pytest.mark.parametrize("host, port, expected", [
    ("db1,db2", 5432, "5432"),
    ("db1,db2", "5432,5433", "5432,5433"),
    ("db1, db2", " 5432 , 5433", "5432,5433"),
    ("db1", "6432", "6432"),
], ids=["one-port-for-all", "one-per-host", "spaces", "port-as-text"])
def test_login_port_is_one_port_for_every_host_or_one_per_host(host, port, expected):
    assert validated(login_host=host, login_port=port)["port"] == expected


def test_a_port_list_that_does_not_match_the_hosts_is_refused_saying_what_to_give():
    with pytest.raises(InvalidRequest) as refused:
        validated(login_host="db1,db2", login_port="5432,5433,5434")
    assert refused.value.message == (
        "login_port gives 3 ports (5432,5433,5434) for the 2 host(s) of login_host (db1,db2): give one port per "
        "host, in the same order (for example login_port: \"5432,5433\"), or one port for all of them "
        "(login_port: 5432). Nothing was read or written.")


def test_hosts_from_pghost_are_counted_too():
    with pytest.raises(InvalidRequest) as refused:
        validated(environ={"PGHOST": "db1,db2,db3"}, login_port="5432,5433")
    assert refused.value.message.startswith("login_port gives 2 ports (5432,5433) for the 3 host(s) of PGHOST "
                                            "(db1,db2,db3): give one port per host")


@pytest.mark.parametrize("changes, message", [
    ({"login_host": "db1,db2", "login_port": "5432,"},
     "login_port must be a port number (1-65535), or a comma-separated list of them with one port per host of "
     "login_host; got '5432,'"),
    ({"login_host": "db1", "login_port": "http"}, "login_port must be a port number (1-65535)"),
    ({"login_host": "db1", "login_port": 70000}, "login_port must be a port number (1-65535)"),
    ({"login_host": "db1", "login_port": [5432, 5433]},
     "login_port must be a port number or a comma-separated list of them (one per host of login_host, e.g. "
     "\"5432,5433\")"),
    ({"login_host": "db1,,db2"}, "login_host lists an empty host name ('db1,,db2'): name every host"),
], ids=["trailing-comma", "not-a-number", "out-of-range", "yaml-list", "empty-host"])
def test_malformed_host_and_port_lists_are_refused(changes, message):
    with pytest.raises(InvalidRequest) as refused:
        validated(**changes)
    assert refused.value.message.startswith(message)
    assert refused.value.message.endswith("Nothing was read or written.")


@pytest.mark.parametrize("target", ["any", "read-only", "standby", "prefer-standby"])
def test_a_change_refuses_every_target_that_could_land_on_a_standby(target):
    with pytest.raises(InvalidRequest) as refused:
        validated(writes=True, login_host="db1,db2", target_session_attrs=target)
    assert refused.value.message == (
        f"target_session_attrs is {target!r}, which lets libpq connect to a standby, but a change writes and must "
        "reach the primary: set it to read-write (the change's default) or primary, or leave it out (check "
        "PGTARGETSESSIONATTRS and connect_params, which can set it too). Nothing was read or written.")
    assert validated(login_host="db1,db2", target_session_attrs=target)["target_session_attrs"] == target


@pytest.mark.parametrize("writes, given, environ, expected", [
    (True, None, {}, "read-write"),
    (False, None, {}, "primary"),
    (True, "primary", {}, "primary"),
    (False, None, {"PGTARGETSESSIONATTRS": "prefer-standby"}, "prefer-standby"),
    (False, "any", {"PGTARGETSESSIONATTRS": "prefer-standby"}, "any"),
], ids=["change-default", "read-default", "change-primary", "environment", "given-wins"])
def test_target_session_attrs_defaults_by_the_work_and_takes_libpq_environment(writes, given, environ, expected):
    assert validated(writes=writes, environ=environ, target_session_attrs=given)["target_session_attrs"] == expected


def test_an_unknown_target_from_the_environment_is_refused():
    with pytest.raises(InvalidRequest) as refused:
        validated(environ={"PGTARGETSESSIONATTRS": "master"})
    assert refused.value.message.startswith("target_session_attrs must be one of any, read-write, read-only, "
                                            "primary, standby, prefer-standby, got 'master'")


def module_params(given: dict) -> dict:
    """The connection options as AnsibleModule fills them in on the host that runs the module."""
    result = ArgumentSpecValidator(connection_argument_spec()).validate(given)
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


def test_libpq_environment_fills_what_the_task_does_not_give_and_the_documented_defaults_stay(monkeypatch):
    for variable in ("PGUSER", "PGPORT", "PGSSLMODE"):
        monkeypatch.delenv(variable, raising=False)
    assert {name: module_params({})[name] for name in ("login_user", "login_port", "ssl_mode")} == {
        "login_user": "postgres", "login_port": 5432, "ssl_mode": "prefer"}
    monkeypatch.setenv("PGUSER", "awa_migrator")
    monkeypatch.setenv("PGPORT", "6432,6433")
    monkeypatch.setenv("PGSSLMODE", "verify-full")
    assert {name: module_params({})[name] for name in ("login_user", "login_port", "ssl_mode")} == {
        "login_user": "awa_migrator", "login_port": "6432,6433", "ssl_mode": "verify-full"}
    given = module_params({"login_user": "postgres", "login_port": 5432, "ssl_mode": "prefer"})
    assert (given["login_user"], given["login_port"], given["ssl_mode"]) == ("postgres", 5432, "prefer")
    assert connection_defaults()["login_user"] == "awa_migrator"


def test_pgconnect_timeout_replaces_the_default_connect_timeout():
    assert libpq_params(options(), environ={})["connect_timeout"] == DEFAULT_CONNECT_TIMEOUT
    assert "connect_timeout" not in libpq_params(options(), environ={"PGCONNECT_TIMEOUT": "3"})


def test_several_hosts_are_described_with_their_ports_and_the_target():
    assert describe_target(options(login_host="db1,db2", login_port="5432,5433", login_db="app", login_user="awa"),
                           writes=True, environ={}) == "database 'app' on db1:5432, db2:5433 (read-write) as 'awa'"


def test_a_host_that_is_no_host_name_is_refused_with_a_message_not_a_traceback():
    with pytest.raises(ConnectionFailed) as failure:
        connect(options(login_host=f"postgresql://awa:{PASSWORD}@{'db' * 40}", login_user="awa", login_db="app"))
    assert failure.value.message == (f"could not connect to database 'app' on postgresql://awa:********@{'db' * 40}:5432 "
                                     "as 'awa': a host of login_host is not a host name; give host names or addresses, "
                                     "separated by commas")
