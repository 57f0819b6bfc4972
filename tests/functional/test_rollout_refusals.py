"""Every refusal the runbook lists, through the change-window playbook, on PostgreSQL 17 and 18.

Each reaches the operator with the module's own message (or the input rule's)
and the words "nothing was changed", and the database is left as it was. So
does a window resumed with --start-at-task past its change, and a dry run
of a lowering whose backlog cannot drain in time is warned of before it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from awa_testbed.environment import wait_for_live_runtimes
from awa_testbed.pgserver import free_port
from enqueue_shards_support import ansible_command, change, ready_depth_by_shard, snapshot
from rollout_support import PLAYBOOK, REPO, failure_message

INVENTORY = REPO / "tests" / "functional" / "inventories" / "local.yml"


def run_playbook(tmp_path: Path, connection: dict, queues: list[dict] | None, *flags: str,
                 inventory: Path = INVENTORY, env: dict[str, str] | None = None, playbook: Path = PLAYBOOK,
                 **variables) -> subprocess.CompletedProcess:
    """The playbook against one database (``env``: with libpq's variables; ``queues`` None: no
    enqueue_shards_queues); a producer service that is never reached (preflight refuses first)."""
    extra = {**({"enqueue_shards_queues": queues} if queues is not None else {}),
             "enqueue_shards_connection": connection,
             "enqueue_shards_services": ["never-restarted"], "enqueue_shards_restart_command": "false {service}",
             "enqueue_shards_report_dir": str(tmp_path),
             **{f"enqueue_shards_{name}": value for name, value in variables.items()}}
    (tmp_path / "vars.json").write_text(json.dumps(extra), encoding="utf-8")
    return ansible_command("ansible-playbook", "-i", str(inventory), str(playbook), "-e", f"@{tmp_path / 'vars.json'}",
                           *flags, env_extra=env)


def set_enqueue_shards(tmp_path: Path, connection: dict, queues: list[dict] | None, *flags: str, **options) -> str:
    """``run_playbook``, which must fail: its output."""
    process = run_playbook(tmp_path, connection, queues, *flags, **options)
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


def test_a_queue_the_database_has_never_seen_is_refused_by_preflight_naming_the_queue_meant(awa_db, tmp_path):
    change(awa_db, "orders", 2, new_queue=True)
    before = snapshot(awa_db)
    for flags in (("--check",), ()):
        output = set_enqueue_shards(tmp_path, awa_db.login_args(), [{"queue": "ordres", "shards": 4}], *flags)
        assert failure_message(output) == (
            "Preflight refused queue ordres, nothing was changed: the database has never seen queue 'ordres' - no "
            "awa.queue_meta row, no lanes, no jobs and no runtime serving it (did you mean orders?). A change window "
            "changes queues that exist: correct its name in enqueue_shards_queues, or - to prepare a new queue before "
            "its first producer - set new_queue: true on its entry.")
        assert "Preflight | refuse what the change cannot safely act on" in output[output.rfind("TASK ["):]
        assert "awa_enqueue_shards for this queue" not in output, "no advice to run the change for it"
        assert snapshot(awa_db) == before


def test_a_misspelt_queue_only_a_runtime_serves_yet_is_refused_naming_it(awa_db, fleet, tmp_path):
    """Before its count is first changed and before its first job, a queue is known by the runtimes serving it."""
    worker = fleet.worker("orders-worker", ["orders"])
    wait_for_live_runtimes(awa_db, [worker.pid], 60)
    assert not awa_db.query("SELECT queue FROM awa.queue_meta"), "no queue_meta row"
    before = snapshot(awa_db)
    output = set_enqueue_shards(tmp_path, awa_db.login_args(), [{"queue": "ordres", "shards": 4}], "--check")
    assert failure_message(output).startswith(
        "Preflight refused queue ordres, nothing was changed: the database has never seen queue 'ordres' - no "
        "awa.queue_meta row, no lanes, no jobs and no runtime serving it (did you mean orders?)."), output
    assert snapshot(awa_db) == before


def test_a_new_queue_asked_for_as_such_passes_preflight_and_the_change_would_prepare_it(awa_db, tmp_path):
    before = snapshot(awa_db)
    output = run_playbook(tmp_path, awa_db.login_args(), [{"queue": "invoices", "shards": 4, "new_queue": True}],
                          "--check", pickup="refresh", services=[]).stdout
    assert "note: invoices is new to the database: the change prepares it - its lanes, grants and count (new_queue)" \
        in output
    assert "invoices: enqueue_shards 1 -> 4 on invoices - check mode, would create 16 lanes" in output, output
    assert snapshot(awa_db) == before


# Each entry point of the role that takes the queues, in one play: its failure, whatever it is, printed after a marker.
ENTRY_POINTS_PLAY = """
- name: Each entry point of the role with a misspelt variable
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run {{ item }}
      ansible.builtin.include_tasks: entry_point.yml
      loop: [preflight, change, rollout, wait]
"""
ENTRY_POINT_TASKS = """
- name: The entry point, its failure caught
  block:
    - name: Include it
      ansible.builtin.include_role:
        name: awa.operations.enqueue_shards
        tasks_from: "{{ item }}"
  rescue:
    - name: Say how it failed
      ansible.builtin.debug:
        msg: "ENTRY POINT {{ item }}: {{ ansible_failed_result.msg }}"
"""


def test_a_misspelt_required_variable_is_named_in_a_short_message_on_every_entry_point(awa_db, tmp_path):
    """enqueue_shards_queue for enqueue_shards_queues: not Ansible's check of the role's argument spec, which would
    print the whole spec (16 KB), but the validate phase's message, naming the variable meant."""
    before = snapshot(awa_db)
    typo = [{"queue": "orders", "shards": 4}]
    expected = ("Invalid input for localhost, nothing was changed: enqueue_shards_queue is not a variable of the role "
                "awa.operations.enqueue_shards (did you mean enqueue_shards_queues?): it would be ignored; "
                "`ansible-doc -t role awa.operations.enqueue_shards` lists them | enqueue_shards_queues must name at "
                "least one queue, e.g. [{queue: orders, shards: 8}]")

    output = set_enqueue_shards(tmp_path, awa_db.login_args(), None, "--check", queue=typo)
    assert failure_message(output) == expected
    assert "argument_spec_data" not in output and len(output) < 8000, len(output)

    (tmp_path / "entry_points.yml").write_text(ENTRY_POINTS_PLAY, encoding="utf-8")
    (tmp_path / "entry_point.yml").write_text(ENTRY_POINT_TASKS, encoding="utf-8")
    output = run_playbook(tmp_path, awa_db.login_args(), None, playbook=tmp_path / "entry_points.yml",
                          queue=typo).stdout
    said = {}
    for line in output.splitlines():
        for entry in ("preflight", "change", "rollout", "wait"):
            marker = f"ENTRY POINT {entry}: "
            if marker in line:
                said[entry] = json.loads(line.split(": ", 1)[1])[len(marker):]
    assert said == dict.fromkeys(("preflight", "change", "rollout", "wait"), expected), output
    assert "argument_spec_data" not in output
    assert snapshot(awa_db) == before


def test_a_misspelt_key_of_a_queue_entry_or_of_the_connection_is_named_in_a_short_message(awa_db, tmp_path):
    """shard for shards, login_usr for login_user, restrat for restart, a timeout in words: the validate phase's
    message naming the one meant, not Ansible's check of the role's argument spec, whose result printed the whole spec
    on one line (about 20,000 characters)."""
    before = snapshot(awa_db)
    login = awa_db.login_args()
    connection = {**{name: value for name, value in login.items() if name != "login_user"},
                  "login_usr": login["login_user"]}

    output = set_enqueue_shards(tmp_path, connection, [{"queue": "orders", "shard": 4}], "--check", pickup="restrat",
                                converge_timeout="an hour")

    assert failure_message(output) == (
        "Invalid input for localhost, nothing was changed: enqueue_shards_queues[0] has no key shard (did you mean "
        "shards?); it takes queue, shards, stripes, new_queue | enqueue_shards_connection has no key login_usr (did "
        "you mean login_user?); it takes login_user, login_password, login_host, login_port, login_unix_socket, "
        "login_db, ssl_mode, ca_cert, ssl_cert, ssl_key, target_session_attrs, connect_params, session_role | "
        "enqueue_shards_pickup must be one of restart, refresh, got 'restrat' (did you mean restart?) | argument "
        "'enqueue_shards_converge_timeout' is of type str and we were unable to convert to float: str cannot be "
        "converted to a float")
    assert "argument_spec_data" not in output
    assert max(map(len, output.splitlines())) <= 2000, max(map(len, output.splitlines()))
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
                    'of hosts (2), a percentage of them ("25%"), or a list of either ([1, "25%", "100%"], the last '
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
                                "--start-at-task", "Wait | until every live runtime of the window runs with the new count")

    message = failure_message(output)
    assert message.startswith(
        "The change window is not done: orders holds enqueue_shards 1, not the 2 asked. This run did not set it: it "
        "started past the change (--start-at-task, or --tags without enqueue_shards_change), or another change came "
        "after it. Nothing more was done. To resume, run the same command again without --start-at-task (or those "
        "--tags): it changes nothing already done and restarts only the services that do not run the count yet; or, "
        "once the count asked is set, only the wait "
        "(--tags enqueue_shards_wait,enqueue_shards_summary, or the role's wait entry point). The window's report: ")
    assert "To back out" not in output, "this run changed nothing to back out"
    [report] = [json.loads(path.read_text(encoding="utf-8")) for path in tmp_path.glob("enqueue_shards-*.json")]
    assert report["outcome"]["done"] is False and report["outcome"]["stopped_at"].startswith("Summary | stop unless")
    assert report["outcome"]["queues"]["orders"] == {"asked": 2, "before": None, "after": 1, "converged": True,
                                                     "drained": True, "set_by": None}
    assert snapshot(awa_db) == before


def test_a_dry_run_warns_before_a_lowering_whose_backlog_no_worker_drains(awa_db, tmp_path):
    change(awa_db, "orders", 4)
    # 200 jobs spread over the four shards by their ordering keys, and no worker serves the queue.
    awa_db.query("SELECT count(awa.insert_job_compat('test_job', 'orders', p_ordering_key => convert_to('key-' || n, "
                 "'UTF8'))) FROM generate_series(1, 200) AS n")
    backlog = sum(depth for shard, depth in ready_depth_by_shard(awa_db, "orders").items() if shard >= 1)
    before = snapshot(awa_db)

    process = run_playbook(tmp_path, awa_db.login_args(), [{"queue": "orders", "shards": 1}], "--check",
                           drain_timeout=600)
    assert process.returncode == 0, process.stdout
    output = process.stdout

    assert backlog > 0
    assert (f"warning: lowering orders to 1 leaves {backlog} ready jobs on shards 1 and above, and none of its jobs "
            "was claimed while preflight watched it: no worker serves it, so they cannot drain within "
            "enqueue_shards_drain_timeout (10 min) and the drain wait would time out. Start its workers first, or "
            "raise enqueue_shards_drain_timeout") in output
    assert snapshot(awa_db) == before
