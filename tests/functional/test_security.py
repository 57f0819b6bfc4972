"""Security: secrets stay secret, input never becomes SQL, the ledger says who did what.

(Running as a non-superuser migrator, and failing clearly as a runtime role,
are tested with the least-privilege setups in test_enqueue_shards_*.)
"""

from __future__ import annotations

import json

import pytest
from psycopg import sql

from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, transaction
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.errors import ConnectionFailed
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request

from enqueue_shards_support import ansible_adhoc, ansible_command, change, ledger_rows, sequence_owners, shard_counts

SECRET_MARKER = "pw-must-never-show"


def test_the_password_appears_nowhere_even_at_vvv(awa_db, tmp_path):
    awa_db.setup_least_privilege(runtime_count=1)
    secret = SECRET_MARKER + awa_db.roles["migrator"].password
    awa_db.query(sql.SQL("ALTER ROLE {} PASSWORD {}").format(
        sql.Identifier(awa_db.roles["migrator"].name), sql.Literal(secret)))
    login = {**awa_db.login_args("migrator"), "login_password": secret}
    log_file = tmp_path / "ansible.log"
    runs = [
        ("awa_enqueue_shards", {**login, "queue": "secret_q", "shards": 4, "new_queue": True}, ["--check", "--diff"]),
        ("awa_enqueue_shards", {**login, "queue": "secret_q", "shards": 4, "new_queue": True}, ["--diff"]),
        ("awa_enqueue_shards_info", {**login, "queue": "secret_q", "wait": "converged", "wait_timeout": 5}, []),
        ("awa_enqueue_shards", {**login, "login_password": secret + "-wrong", "queue": "secret_q", "shards": 2}, []),
    ]
    outputs = []
    for module, args, flags in runs:
        process = ansible_command("ansible", "localhost", "-m", f"awa.operations.{module}", "-a", json.dumps(args),
                                  "-vvv", *flags, env_extra={"ANSIBLE_LOG_PATH": str(log_file)})
        outputs.append(process.stdout + process.stderr)
    assert "CHANGED" in outputs[1] and "password authentication failed" in outputs[3]
    everything = "\n".join(outputs) + log_file.read_text(encoding="utf-8") + awa_db.server.server_log(tail=10_000)
    assert SECRET_MARKER not in everything
    # ansible-core 2.19 shows each module's invocation at -vvv, no_log values masked; 2.21 shows none.
    if '"invocation"' in outputs[0]:
        assert "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in outputs[0], "ansible masks the password in -vvv invocation logs"


def test_a_password_given_any_other_way_appears_nowhere_even_at_vvv(awa_db):
    """PGPASSWORD, connect_params, a connection string in login_db or connect_params' dbname, a URI in login_host:
    right or wrong, the password is in no output (the -vvv result, a failure message) and no server log line."""
    awa_db.setup_least_privilege(runtime_count=1)
    migrator = awa_db.roles["migrator"]
    secret = SECRET_MARKER + migrator.password
    awa_db.query(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(migrator.name), sql.Literal(secret)))
    login = {name: value for name, value in awa_db.login_args("migrator").items() if name != "login_password"}
    host, port, name, wrong = login["login_host"], login["login_port"], login["login_db"], secret + "-wrong"
    runs = [
        ({}, {"PGPASSWORD": secret}, "SUCCESS"),
        ({}, {"PGPASSWORD": wrong}, "password authentication failed"),
        ({"connect_params": {"password": secret, "connect_timeout": 5}}, {}, "SUCCESS"),
        ({"connect_params": {"password": wrong}}, {}, "password authentication failed"),
        ({"login_db": f"host={host} port={port} dbname={name} password='{wrong}'"}, {}, "could not connect"),
        ({"connect_params": {"dbname": f"postgresql://{migrator.name}:{wrong}@{host}:{port}/{name}"}}, {},
         "could not connect"),
        ({"login_host": f"postgresql://{migrator.name}:{wrong}@{host}"}, {}, "could not connect"),
    ]
    outputs = []
    for changes, environment, outcome in runs:
        process = ansible_command("ansible", "localhost", "-m", "awa.operations.awa_enqueue_shards_info", "-a",
                                  json.dumps({**login, **changes, "queue": "secret_q"}), "-vvv", env_extra=environment)
        outputs.append(process.stdout + process.stderr)
        assert outcome in outputs[-1], outputs[-1]
    assert SECRET_MARKER not in "\n".join(outputs) + awa_db.server.server_log(tail=10_000)


def test_injection_attempts_in_names_are_stored_and_granted_literally(awa_db):
    queue = "q'); DROP TABLE awa.queue_meta; --"
    role = 'r"; DROP TABLE awa.queue_meta; --'
    awa_db.query(sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)))
    try:
        result = change(awa_db, queue, 3, runtime_roles=[role])
        assert result["changed"] and result["grants_added"] == 2 * 4 * 3
        assert shard_counts(awa_db) == {queue: 3}
        privileged = awa_db.scalar(
            "SELECT count(*) FROM awa.queue_enqueue_heads AS h WHERE h.queue = %s "
            "AND has_sequence_privilege(%s, format('awa.%%I', h.seq_name), 'USAGE, SELECT, UPDATE')", (queue, role))
        assert privileged == 12
        assert awa_db.scalar("SELECT to_regclass('awa.queue_meta') IS NOT NULL")
    finally:
        awa_db.query(sql.SQL("DROP OWNED BY {}; DROP ROLE {}").format(sql.Identifier(role), sql.Identifier(role)))


def test_the_ledger_records_who_changed_what_and_why(awa_db):
    awa_db.setup_least_privilege(runtime_count=1)
    owner, migrator = awa_db.roles["owner"].name, awa_db.roles["migrator"].name
    login = {**awa_db.login_args("migrator"), "session_role": owner}
    process, dummy_result = ansible_adhoc({**login, "queue": "audited", "shards": 4, "new_queue": True,
                                           "runtime_roles": [awa_db.roles["runtime1"].name],
                                           "reason": "CHG-42 raise audited"})
    assert "CHANGED" in process.stdout, process.stdout + process.stderr
    row = ledger_rows(awa_db)[-1]
    assert (row["queue"], row["from_shards"], row["to_shards"]) == ("audited", {"audited": 1}, 4)
    assert (row["changed_by"], row["login_user"], row["reason"]) == (owner, migrator, "CHG-42 raise audited")
    assert row["client_addr"] == "127.0.0.1" and row["application_name"] == "awa.operations"
    assert row["lanes_created"] == 16 and row["grants_added"] == 32
    assert sequence_owners(awa_db, "audited") == {owner}, "session_role owns what the change created"


def test_session_role_ends_with_each_transaction_and_runs_every_statement_of_it(awa_db):
    """A transaction pooler hands the server connection to its next client after every transaction: a role set
    for the session would go with it (a superuser session for whoever connects next)."""
    awa_db.setup_least_privilege(runtime_count=1)
    owner, migrator = awa_db.roles["owner"].name, awa_db.roles["migrator"].name
    conn = connect({**awa_db.login_args("migrator"), "session_role": owner})
    try:
        assert conn.execute("SELECT current_user").fetchone()[0] == migrator, "connecting sets no role"
        conn.rollback()
        for read_only in (False, True):
            with transaction(conn, "a test", lock_timeout=1, read_only=read_only):
                assert conn.execute("SELECT current_user, session_user").fetchone() == (owner, migrator)
            assert conn.execute("SELECT current_user").fetchone()[0] == migrator, "the role ended with it"
            conn.rollback()
        result = change_queues(conn, validate_request("pooled", 2, new_queue=True))
        assert result["changed"] and ledger_rows(awa_db)[-1]["changed_by"] == owner
        assert conn.execute("SELECT current_user").fetchone()[0] == migrator, "the committed change ended it too"
    finally:
        conn.close()


def test_a_session_role_the_login_role_may_not_use_is_refused_at_connect(awa_db):
    awa_db.setup_least_privilege(runtime_count=1)
    runtime = awa_db.roles["runtime1"].name
    with pytest.raises(ConnectionFailed, match=f"could not switch to session_role '{runtime}'.*GRANT {runtime} TO"):
        connect({**awa_db.login_args("migrator"), "session_role": runtime})
