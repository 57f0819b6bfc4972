"""Every refusal the runbook lists, through the change-window playbook, on PostgreSQL 17 and 18.

Each reaches the operator with the module's own message (or the input rule's)
and the words "nothing was changed", and the database is left as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

from awa_testbed.pgserver import free_port
from enqueue_shards_support import ansible_command, change, snapshot
from rollout_support import PLAYBOOK, REPO, failure_message

INVENTORY = REPO / "tests" / "functional" / "inventories" / "local.yml"


def set_enqueue_shards(tmp_path: Path, connection: dict, queues: list[dict], *flags: str,
                       inventory: Path = INVENTORY, env: dict[str, str] | None = None, **variables) -> str:
    """The playbook against one database (``env``: with libpq's variables); a producer service that is never reached
    (preflight refuses first)."""
    extra = {"enqueue_shards_queues": queues, "enqueue_shards_connection": connection,
             "enqueue_shards_services": ["never-restarted"], "enqueue_shards_restart_command": "false {service}",
             **{f"enqueue_shards_{name}": value for name, value in variables.items()}}
    (tmp_path / "vars.json").write_text(json.dumps(extra), encoding="utf-8")
    process = ansible_command("ansible-playbook", "-i", str(inventory), str(PLAYBOOK), "-e", f"@{tmp_path / 'vars.json'}",
                              *flags, env_extra=env)
    assert process.returncode != 0, process.stdout
    return process.stdout


def test_queue_storage_that_is_not_active_is_refused(db_factory, tmp_path):
    database = db_factory.create(activate=False)
    try:
        before = snapshot(database)
        message = failure_message(set_enqueue_shards(tmp_path, database.login_args(), [{"queue": "orders", "shards": 4}]))
        assert message.startswith("Preflight refused, nothing was changed: ")
        assert "The queue-storage engine is not active in database" in message
        assert "storage_auto_finalize_if_fresh" in message
        assert snapshot(database) == before
    finally:
        database.drop()


def test_stripes_that_do_not_match_the_stored_layout_are_refused(awa_db, tmp_path):
    change(awa_db, "events", 2, stripes=2)
    before = snapshot(awa_db)
    message = failure_message(set_enqueue_shards(tmp_path, awa_db.login_args(), [{"queue": "events", "shards": 4, "stripes": 3}]))
    assert message == (
        "Preflight refused queue events, nothing was changed: enqueue_shards_queues sets stripes: 3, but the queue is "
        "stored with 2 stripe(s) (events#0, events#1). Set stripes to the runtimes' queue_storage_queue_stripe_count, "
        "or leave it out to use the stored layout.")
    assert snapshot(awa_db) == before


def test_bad_credentials_are_refused_naming_the_server_and_the_passwords_source_not_the_password(awa_db, tmp_path):
    """As the README's quick start connects: the server and the password from libpq's environment."""
    awa_db.setup_least_privilege(runtime_count=1)
    migrator, host, port = awa_db.roles["migrator"].name, awa_db.server.host, awa_db.server.port
    connection = {"login_db": awa_db.name, "login_user": migrator}
    before = snapshot(awa_db)
    output = set_enqueue_shards(tmp_path, connection, [{"queue": "orders", "shards": 4}],
                                env={"PGHOST": host, "PGPORT": str(port), "PGPASSWORD": "not-the-password-Zq7"})
    message = failure_message(output)
    assert message.startswith(f"Preflight refused, nothing was changed: could not connect to database "
                              f"{awa_db.name!r} on {host}:{port} as {migrator!r} with the password from PGPASSWORD: "), \
        message
    assert "password authentication failed" in message
    assert "not-the-password-Zq7" not in output
    assert snapshot(awa_db) == before


def test_an_unknown_runtime_role_is_refused(awa_db, tmp_path):
    before = snapshot(awa_db)
    message = failure_message(set_enqueue_shards(tmp_path, awa_db.login_args(), [{"queue": "orders", "shards": 4}],
                                                 runtime_roles=["awa_runtme"]))
    assert message.startswith("Preflight refused, nothing was changed: runtime_roles do not exist")
    assert "awa_runtme" in message
    assert snapshot(awa_db) == before


def test_an_unreachable_database_is_refused(awa_db, tmp_path):
    before = snapshot(awa_db)
    connection = {**awa_db.login_args(), "login_port": free_port()}
    message = failure_message(set_enqueue_shards(tmp_path, connection, [{"queue": "orders", "shards": 4}]))
    assert message.startswith("Preflight refused, nothing was changed: could not connect to database")
    assert "Connection refused" in message or "connection refused" in message
    assert snapshot(awa_db) == before


def test_bad_input_is_refused_before_the_database_is_read(awa_db, tmp_path):
    before = snapshot(awa_db)
    message = failure_message(set_enqueue_shards(
        tmp_path, {"login_host": awa_db.server.host},
        [{"queue": "orders", "shards": 65}, {"queue": "a#1", "shards": 2}],
        batch_size=[1, "0%"], lock_timeout=-1, batchsize=2, max_deadlocks=-1))
    assert message.startswith("Invalid input for localhost, nothing was changed: ")
    for problem in ("enqueue_shards_batchsize is not a variable of the role",
                    "enqueue_shards_queues[0] ('orders'): shards must be between 1 and 64, got 65",
                    "enqueue_shards_queues[1] ('a#1'): queue 'a#1' contains '#'",
                    "enqueue_shards_connection lacks login_user and login_db",
                    "enqueue_shards_lock_timeout must be between 0 and 3600 seconds",
                    "enqueue_shards_batch_size: '0%' is not a percentage above 0 and up to 100. Give a whole number "
                    'of services (2), a percentage of them ("25%"), or a list of either ([1, "25%", "100%"], the last '
                    "entry repeated)",
                    "enqueue_shards_max_deadlocks must be a whole number of at least 0, or null for no limit"):
        assert problem in message, problem
    assert snapshot(awa_db) == before


def test_an_empty_or_misspelled_producer_group_is_named_before_anything_is_read(tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  children:\n    awa_producer:\n      hosts:\n        localhost:\n", encoding="utf-8")
    message = failure_message(set_enqueue_shards(tmp_path, {"login_host": "db.invalid"}, [{"queue": "orders", "shards": 4}],
                                                 inventory=inventory))
    assert message == ("The inventory group awa_producers is not in the inventory, so the change window would run on "
                       "no producer host and change nothing: nothing was changed. Put the hosts that run the producer "
                       "services in awa_producers (did you mean awa_producer?); the inventory's groups: "
                       "awa_producer.")


def test_an_environment_file_the_producer_host_cannot_take_is_refused_before_the_change(awa_db, tmp_path):
    before = snapshot(awa_db)
    env_file = tmp_path / "producer.env"
    # The file and the inventory hold secrets: the refusal, at -vvv, shows none (nor the login password).
    secrets = ["pw-old-Zq7x", "pw-new-Zq7x", "tok-new-9Xc", "pw-login-Zq7x"]
    text = f"AWA_DATABASE_URL=postgres://app:{secrets[0]}@db/awa\n"
    env_file.write_text(text, encoding="utf-8")
    output = set_enqueue_shards(tmp_path, {**awa_db.login_args(), "login_password": secrets[3]},
                                [{"queue": "orders", "shards": 4}], "-vvv",
                                env_file=str(env_file), env_file_group="no-such-group-awa",
                                environment={"AWA_DATABASE_URL": f"postgres://app:{secrets[1]}@db/awa",
                                             "AWA_API_TOKEN": secrets[2]})
    message = failure_message(output)
    assert not [secret for secret in secrets if secret in output]
    assert message == (
        f"Invalid input for localhost, nothing was changed: its environment file {env_file} was not written: there is "
        "no group no-such-group-awa on this host for the file; correct enqueue_shards_env_file, "
        "enqueue_shards_env_file_owner or enqueue_shards_env_file_group for this host, or prepare the host")
    assert env_file.read_text(encoding="utf-8") == text and snapshot(awa_db) == before
