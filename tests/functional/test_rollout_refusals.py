"""Every refusal the runbook lists, through the change-window playbook, on PostgreSQL 17 and 18.

Each reaches the operator with the module's own message (or the input rule's)
and the words "nothing was changed", and the database is left as it was. So
does a window resumed with --start-at-task past its change, and a dry run
of a lowering whose backlog cannot drain in time is warned of before it.
"""

from __future__ import annotations

import json
from pathlib import Path

from awa_testbed.pgserver import free_port
from enqueue_shards_support import ansible_command, change, ready_depth_by_shard, snapshot
from rollout_support import PLAYBOOK, REPO, failure_message

INVENTORY = REPO / "tests" / "functional" / "inventories" / "local.yml"


def set_enqueue_shards(tmp_path: Path, connection: dict, queues: list[dict], *flags: str,
                       inventory: Path = INVENTORY, refused: bool = True, **variables) -> str:
    """The playbook against one database; a producer service that is never reached (preflight refuses first).
    Unless ``refused`` is false, the run must fail."""
    extra = {"enqueue_shards_queues": queues, "enqueue_shards_connection": connection,
             "enqueue_shards_services": ["never-restarted"], "enqueue_shards_restart_command": "false {service}",
             "enqueue_shards_report_dir": str(tmp_path),
             **{f"enqueue_shards_{name}": value for name, value in variables.items()}}
    (tmp_path / "vars.json").write_text(json.dumps(extra), encoding="utf-8")
    process = ansible_command("ansible-playbook", "-i", str(inventory), str(PLAYBOOK), "-e", f"@{tmp_path / 'vars.json'}",
                              *flags)
    assert (process.returncode != 0) is refused, process.stdout
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


def test_bad_credentials_are_refused_without_showing_the_password(awa_db, tmp_path):
    awa_db.setup_least_privilege(runtime_count=1)
    connection = {**awa_db.login_args("migrator"), "login_password": "not-the-password-Zq7"}
    before = snapshot(awa_db)
    output = set_enqueue_shards(tmp_path, connection, [{"queue": "orders", "shards": 4}])
    message = failure_message(output)
    assert message.startswith("Preflight refused, nothing was changed: could not connect to database")
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


def test_a_window_resumed_past_its_change_does_not_claim_a_count_it_did_not_set(awa_db, tmp_path):
    """Issue 49, section 7: started at the wait, 2 asked, the queue at 1 - every live runtime (none) runs 1."""
    before = snapshot(awa_db)

    output = set_enqueue_shards(tmp_path, awa_db.login_args(), [{"queue": "orders", "shards": 2}],
                                "--start-at-task", "Wait | until every live runtime runs with the new count")

    message = failure_message(output)
    assert message.startswith(
        "The change window is not done: orders holds enqueue_shards 1, not the 2 asked. This run did not set it: it "
        "started past the change (--start-at-task, or --tags without enqueue_shards_change), or another change came "
        "after it. Nothing more was done. To resume, run the same command again: it changes nothing already done and "
        "restarts only the services that do not run the count yet; or, once the count asked is set, only the wait "
        "(--tags enqueue_shards_wait,enqueue_shards_summary, or the role's wait entry point). The window's report: ")
    assert "To back out" not in output, "this run changed nothing to back out"
    [report] = [json.loads(path.read_text(encoding="utf-8")) for path in tmp_path.glob("enqueue_shards-*.json")]
    assert report["outcome"]["done"] is False and report["outcome"]["stopped_at"].startswith("Summary | stop unless")
    assert report["outcome"]["queues"]["orders"] == {"asked": 2, "before": None, "after": 1, "converged": True,
                                                     "drained": True}
    assert snapshot(awa_db) == before


def test_a_dry_run_warns_before_a_lowering_whose_backlog_no_worker_drains(awa_db, tmp_path):
    change(awa_db, "orders", 4)
    # 200 jobs spread over the four shards by their ordering keys, and no worker serves the queue.
    awa_db.query("SELECT count(awa.insert_job_compat('test_job', 'orders', p_ordering_key => convert_to('key-' || n, "
                 "'UTF8'))) FROM generate_series(1, 200) AS n")
    backlog = sum(depth for shard, depth in ready_depth_by_shard(awa_db, "orders").items() if shard >= 1)
    before = snapshot(awa_db)

    output = set_enqueue_shards(tmp_path, awa_db.login_args(), [{"queue": "orders", "shards": 1}], "--check",
                                refused=False, drain_timeout=600)

    assert backlog > 0
    assert (f"warning: lowering orders to 1 leaves {backlog} ready jobs on shards 1 and above, and none of its jobs "
            "was claimed while preflight watched it: no worker serves it, so they cannot drain within "
            "enqueue_shards_drain_timeout (10 min) and the drain wait would time out. Start its workers first, or "
            "raise enqueue_shards_drain_timeout") in output
    assert snapshot(awa_db) == before
