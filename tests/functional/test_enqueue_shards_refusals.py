"""Every refusal of awa_enqueue_shards says what is wrong and writes nothing; odd
queue names are data, stored literally, and work with real Awa programs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from awa_testbed.awadb import AwaDatabase, AwaDatabaseFactory
from awa_testbed.environment import wait_for_live_runtimes

from ansible_collections.awa.operations.plugins.module_utils.change.lost_commit import QUEUE_LOCK_PREFIX
from ansible_collections.awa.operations.plugins.module_utils.db.connection import open_connection
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    ConnectionFailed,
    DatabaseError,
    InvalidRequest,
    LockTimeout,
    PreconditionFailed,
    UnknownQueue,
)
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request, validate_requests

from enqueue_shards_support import (
    ansible_adhoc,
    ansible_command,
    change,
    complete_lanes,
    info,
    lane_objects,
    lanes_below,
    ledger_rows,
    refused,
    session_holding,
    shard_counts,
    snapshot,
)


@pytest.mark.parametrize("queue, shards, options, message", [
    pytest.param("orders", 0, {}, "shards must be between 1 and 64, got 0", id="shards-0"),
    pytest.param("orders", 65, {}, "shards must be between 1 and 64, got 65", id="shards-65"),
    pytest.param("orders", "8", {}, "shards must be an integer between 1 and 64, got '8'", id="shards-text"),
    pytest.param("orders", 8.0, {}, "shards must be an integer between 1 and 64, got 8.0", id="shards-float"),
    pytest.param("orders", True, {}, "shards must be an integer between 1 and 64, got True", id="shards-bool"),
    pytest.param("", 8, {}, "queue must be a non-empty name", id="queue-empty"),
    pytest.param(" \t", 8, {}, "queue must be a non-empty name", id="queue-blank"),
    pytest.param("orders#1", 8, {}, "give the logical queue name", id="queue-with-stripe-suffix"),
    pytest.param("q" * 256, 8, {}, "queue name is 256 characters long; at most 255", id="queue-too-long"),
    pytest.param("line\nbreak", 8, {}, "contains control characters (U+000A)", id="queue-newline"),
    pytest.param("nul\x00byte", 8, {}, "contains control characters (U+0000)", id="queue-nul"),
    pytest.param("orders", 8, {"stripes": 0}, "stripes must be between 1 and 64, got 0", id="stripes-0"),
])
def test_an_invalid_request_is_refused_before_touching_the_database(awa_db, queue, shards, options, message):
    error = refused(awa_db, queue, shards, **options)
    assert isinstance(error, InvalidRequest)
    assert message in error.message


NEVER_SEEN = ("the database has never seen queue {!r} - no awa.queue_meta row, no lanes, no jobs and no runtime "
              "serving it")


def test_a_queue_the_database_has_never_seen_is_refused_not_created_naming_the_queue_meant(awa_db):
    change(awa_db, "orders", 2)
    ordres = NEVER_SEEN.format("ordres") + " (did you mean orders?)"
    single = (f"{ordres[0].upper()}{ordres[1:]}. A change is for queues that exist: correct the name, or - to prepare "
              "a new queue before its first producer - set new_queue: true. Nothing was changed.")
    listed = (f"{ordres[0].upper()}{ordres[1:]}; {NEVER_SEEN.format('rfunds')}. A change is for queues that exist: "
              "correct the name, or - to prepare a new queue before its first producer - set new_queue: true on their "
              "entries of queues. No queue of the list was changed.")
    entries = [{"queue": "orders", "shards": 4}, {"queue": "ordres", "shards": 4}, {"queue": "rfunds", "shards": 2}]

    for check_mode in (True, False):
        error = refused(awa_db, "ordres", 4, new_queue=False, check_mode=check_mode)
        assert isinstance(error, UnknownQueue) and error.message == single
    before = snapshot(awa_db)
    with open_connection(awa_db.login_args()) as conn, pytest.raises(UnknownQueue) as failure:
        change_queues(conn, validate_requests(entries))
    assert failure.value.message == listed
    # Ad hoc, as an operator types it: the single form in check mode, the list form for real.
    for args, flags, message in (({"queue": "ordres", "shards": 4}, ["--check"], single),
                                 ({"queues": entries}, [], listed)):
        process, result = ansible_adhoc({**awa_db.login_args(), **args}, *flags)
        assert "FAILED" in process.stdout and result["msg"] == message, process.stdout
    assert snapshot(awa_db) == before and shard_counts(awa_db) == {"orders": 2}


def test_a_queue_awa_knows_by_a_scheduled_job_or_a_runtime_is_changed_and_a_new_one_only_when_asked(awa_db, fleet):
    """Awa's own tables tell a queue exists before it has a lane: a scheduled job waits in deferred_jobs, and a
    runtime names the queues it serves (the logical name, striped or not) before any job."""
    # No runtime runs yet: none is the maintenance leader that would promote the job into a lane.
    fleet.producer("scheduler", "later", scheduled_every=1, count=1, rate=0).wait(60)
    assert awa_db.query("SELECT queue FROM awa.deferred_jobs") == [("later",)]
    assert lane_objects(awa_db)["enqueue_heads"] == set() and shard_counts(awa_db) == {}, "no lane, no count yet"
    assert change(awa_db, "later", 2, new_queue=False)["lanes_created"] == 8

    worker = fleet.worker("idle-worker", ["idle"], stripes=2)
    wait_for_live_runtimes(awa_db, [worker.pid], 60)
    assert change(awa_db, "idle", 2, stripes=2, new_queue=False)["physical_queues"] == ["idle#0", "idle#1"]
    error = refused(awa_db, "invoices", 4, new_queue=False)
    assert error.message.startswith(NEVER_SEEN.format("invoices").capitalize()), error.message
    assert change(awa_db, "invoices", 4, new_queue=True)["lanes_created"] == 16
    assert change(awa_db, "invoices", 4, new_queue=False)["changed"] is False, "known now: a re-run needs no new_queue"
    assert shard_counts(awa_db) == {"later": 2, "idle#0": 2, "idle#1": 2, "invoices": 4}


def test_a_misspelt_queue_is_named_with_the_queue_a_job_names_or_a_runtime_serves_before_its_count(awa_db, fleet):
    """A queue whose count was never changed has no queue_meta row, and before its first job no lane: the queue a
    scheduled job names and the queue a live runtime serves are what a typo of them meant, for the change and the
    read alike (one statement reads every name the database knows)."""
    fleet.producer("scheduler", "invoices", scheduled_every=1, count=1, rate=0).wait(60)
    assert awa_db.query("SELECT queue FROM awa.deferred_jobs") == [("invoices",)]
    assert refused(awa_db, "invoces", 4, new_queue=False).message.startswith(
        NEVER_SEEN.format("invoces").capitalize() + " (did you mean invoices?)")
    awa_db.query("DELETE FROM awa.deferred_jobs")

    worker = fleet.worker("orders-worker", ["orders"])
    wait_for_live_runtimes(awa_db, [worker.pid], 60)
    assert shard_counts(awa_db) == {} and lane_objects(awa_db)["enqueue_heads"] == set(), "no row, no lane"
    error = refused(awa_db, "ordres", 4, new_queue=False)
    assert error.message.startswith(NEVER_SEEN.format("ordres").capitalize() + " (did you mean orders?)"), error.message
    read = info(awa_db, queue="ordres")
    assert read["queues"]["ordres"]["findings"][0] == f"ordres: {NEVER_SEEN.format('ordres')} (did you mean orders?)"


def database_without_awa(factory: AwaDatabaseFactory) -> AwaDatabase:
    return factory.empty()


def awa_0_5_7_database(factory: AwaDatabaseFactory) -> AwaDatabase:
    database = factory.create(awa_version="0.5.7", activate=False)
    assert database.scalar("SELECT to_regclass('awa.jobs') IS NOT NULL"), "awa 0.5.7 did migrate"
    assert not database.scalar(
        "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'awa' "
        "AND table_name = 'queue_meta' AND column_name = 'enqueue_shards')"), "0.5.7 has no enqueue_shards"
    return database


def canonical_engine_database(factory: AwaDatabaseFactory) -> AwaDatabase:
    return factory.create(activate=False)


@pytest.mark.parametrize("make_database, messages", [
    (database_without_awa, ["has no Awa schema 'awa'", "awa migrate"]),
    (awa_0_5_7_database, ["(schema version 11) has no enqueue shards", "Upgrade Awa to 0.6.8 or 0.6.9"]),
    (canonical_engine_database, ["queue-storage engine is not active", "state=canonical",
                                 "SELECT awa.storage_auto_finalize_if_fresh('awa')", "awa storage finalize"]),
], ids=["no-awa-schema", "awa-0.5.7", "queue-storage-not-active"])
def test_an_installation_the_change_cannot_apply_to_is_refused(
        db_factory, make_database: Callable[[AwaDatabaseFactory], AwaDatabase], messages: list[str]):
    database = make_database(db_factory)
    try:
        error = refused(database, "orders", 4)
        assert isinstance(error, PreconditionFailed)
        for message in messages:
            assert message in error.message
    finally:
        database.drop()


def test_a_runtime_role_that_does_not_exist_is_refused(awa_db):
    error = refused(awa_db, "orders", 4, runtime_roles=["awa_runtime_typo"])
    assert isinstance(error, PreconditionFailed)
    assert "runtime_roles do not exist" in error.message and "awa_runtime_typo" in error.message


def runtime_role_without_a_ledger(db: AwaDatabase) -> tuple[str, dict, list[str]]:
    db.setup_least_privilege(runtime_count=1)
    runtime = db.roles["runtime1"].name
    return "runtime1", {}, [f"does not exist and {runtime!r} may not create it",
                            f"GRANT CREATE ON DATABASE {db.name} TO {runtime}", "ledger: false"]


def migrator_and_a_ledger_the_superuser_created(db: AwaDatabase) -> tuple[str, dict, list[str]]:
    db.setup_least_privilege(runtime_count=1)
    change(db, "first", 2)  # an administrator's run creates the ledger, owned by the superuser
    migrator = db.roles["migrator"].name
    return "migrator", {}, [f"exists but {migrator!r} cannot INSERT into it",
                            f"GRANT USAGE ON SCHEMA awa_operations TO {migrator}",
                            f"GRANT INSERT, SELECT ON awa_operations.enqueue_shards_changes TO {migrator}"]


def runtime_role_with_only_the_documented_grants(db: AwaDatabase) -> tuple[str, dict, list[str]]:
    db.setup_least_privilege(runtime_count=1, awa_0_6_9_schema_create=False)
    return "runtime1", {"ledger": False}, ["permission denied for schema awa", "Nothing was changed"]


@pytest.mark.parametrize("prepare", [
    runtime_role_without_a_ledger,
    migrator_and_a_ledger_the_superuser_created,
    runtime_role_with_only_the_documented_grants,
], ids=["runtime-cannot-create-ledger", "migrator-cannot-use-ledger", "runtime-cannot-create-lanes"])
def test_missing_privileges_are_refused_naming_the_grant(awa_db, prepare):
    role, options, messages = prepare(awa_db)
    error = refused(awa_db, "orders", 4, role=role, **options)
    assert isinstance(error, PreconditionFailed)
    for message in messages:
        assert message in error.message


@pytest.mark.parametrize("source", ["PGPASSWORD", "PGPASSFILE"])
def test_a_wrong_password_names_the_server_libpq_used_and_where_the_password_came_from(
        awa_db, tmp_path, monkeypatch, source):
    """The server and port come from libpq's environment (PGHOST, PGPORT), as the README's quick start gives them;
    the message names that server - not the local socket - and the password's source, never its value."""
    awa_db.setup_least_privilege(runtime_count=1)
    migrator = awa_db.roles["migrator"].name
    host, port, wrong = awa_db.server.host, awa_db.server.port, "not-the-password-Zq7"
    monkeypatch.setenv("PGHOST", host)
    monkeypatch.setenv("PGPORT", str(port))
    if source == "PGPASSWORD":
        monkeypatch.setenv("PGPASSWORD", wrong)
        used = "with the password from PGPASSWORD"
    else:
        passfile = tmp_path / "pgpass"
        passfile.write_text(f"{host}:{port}:*:{migrator}:{wrong}\n", encoding="utf-8")
        passfile.chmod(0o600)
        monkeypatch.setenv("PGPASSFILE", str(passfile))
        used = f"with the password from an entry of the password file {passfile}"

    error = refused(awa_db, "orders", 4, login={"login_db": awa_db.name, "login_user": migrator})

    assert isinstance(error, ConnectionFailed)
    assert error.message.startswith(f"could not connect to database {awa_db.name!r} on {host}:{port} as "
                                    f"{migrator!r} {used}: "), error.message
    assert f'password authentication failed for user "{migrator}"' in error.message
    assert wrong not in error.message


@pytest.mark.parametrize("module, args", [("awa_enqueue_shards", {"queue": "orders", "shards": 4}),
                                          ("awa_enqueue_shards_info", {"queue": "orders"})])
def test_a_server_of_pghost_that_does_not_resolve_is_named_with_what_to_do(module, args):
    """PGHOST names the server and no login_host is given: psycopg, which resolves host names itself, says "failed to
    resolve host None"; the module names the host, where it came from and what to correct. Nothing is reached."""
    process = ansible_command("ansible", "localhost", "-m", f"awa.operations.{module}",
                              "-a", json.dumps({"login_db": "app", "login_user": "awa_migrator", **args}),
                              env_extra={"PGHOST": "no-such-host.invalid", "PGPORT": "5433"})
    result = json.loads(process.stdout[process.stdout.index("{", process.stdout.index("localhost | ")):])
    assert "FAILED" in process.stdout and "None" not in result["msg"], process.stdout
    assert result["msg"] == (
        "could not connect to database 'app' on no-such-host.invalid:5433 as 'awa_migrator': the host name "
        "'no-such-host.invalid' of PGHOST (the environment of the host that runs the module) does not resolve: Name "
        "or service not known. Correct PGHOST there, or give login_host")


@pytest.mark.parametrize("statement, params", [
    ("SELECT 1 FROM awa.queue_meta WHERE queue = %s FOR UPDATE", ("locked",)),
    ("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (QUEUE_LOCK_PREFIX + "locked",)),
], ids=["queue_meta-row", "another-run-of-the-module"])
def test_a_lock_held_too_long_fails_within_lock_timeout_naming_the_holder(awa_db, statement, params):
    change(awa_db, "locked", 2)
    with session_holding(awa_db, statement, *params) as holder_pid:
        started = time.monotonic()
        error = refused(awa_db, "locked", 4, lock_timeout=1)
        elapsed = time.monotonic() - started
    assert isinstance(error, LockTimeout)
    assert 1 <= elapsed < 4, f"failed after {elapsed:.1f}s with lock_timeout=1"
    assert f"pid {holder_pid} " in error.message and "Nothing was changed" in error.message
    assert shard_counts(awa_db) == {"locked": 2}


# What an `awa migrate` holds on the table it alters: even reads wait for it.
DDL_LOCK = "LOCK TABLE awa.queue_meta IN ACCESS EXCLUSIVE MODE"


def test_check_mode_behind_ddl_fails_at_lock_timeout_naming_the_holder(awa_db):
    change(awa_db, "behind_ddl", 2)
    before = snapshot(awa_db)
    # The pool outlives the lock: a run that waited for the lock would end once the lock is released.
    with ThreadPoolExecutor(max_workers=1) as pool, session_holding(awa_db, DDL_LOCK) as holder_pid:
        checking = pool.submit(change, awa_db, "behind_ddl", 4, check_mode=True, lock_timeout=1)
        with pytest.raises(LockTimeout) as failure:
            checking.result(timeout=60)
    assert failure.value.message.startswith(
        "changing enqueue_shards of queue 'behind_ddl': a lock was not granted within lock_timeout (1s")
    assert f"pid {holder_pid} " in failure.value.message and DDL_LOCK in failure.value.message
    assert snapshot(awa_db) == before


def test_an_error_raised_in_this_process_is_not_reported_as_a_lost_connection(awa_db):
    before = snapshot(awa_db)
    with open_connection(awa_db.login_args()) as conn, pytest.raises(DatabaseError) as failure:
        change_queues(conn, validate_request("orders", 4, new_queue=True), reason="nul\x00byte")
    assert "connection was lost" not in failure.value.message
    assert "NUL (0x00)" in failure.value.message and "before the statement reached the database" in failure.value.message
    assert snapshot(awa_db) == before


TRICKY_QUEUE_NAMES = {
    "single-quote": "o'rders",
    "double-quotes": 'say "hi"',
    "spaces": " spaced  out ",
    "unicode": "ünïcødé 队列 🚀",
    "sql-injection": "x'); DROP TABLE awa.queue_meta; --",
    "placeholders": "%(shards)s {queue} %s $1",
    "backslash": "back\\slash",
}


@pytest.mark.parametrize("queue", TRICKY_QUEUE_NAMES.values(), ids=TRICKY_QUEUE_NAMES.keys())
def test_queue_names_are_stored_literally(awa_db, queue):
    result = change(awa_db, queue, 3)

    assert result["physical_queues"] == [queue]
    assert shard_counts(awa_db) == {queue: 3}
    assert complete_lanes(awa_db, queue) == lanes_below(3)
    assert [row["queue"] for row in ledger_rows(awa_db)] == [queue]
    assert change(awa_db, queue, 3)["changed"] is False


def test_producers_and_a_worker_use_queues_with_such_names(awa_db, fleet):
    for queue in TRICKY_QUEUE_NAMES.values():
        change(awa_db, queue, 3)
    # With its default pool of 10 connections an awa-pg 0.6.9 runtime serving 7 queues
    # leaves the 5th and later ones unserved for about 90 s (with or without this module).
    fleet.worker("w1", [f"{queue}=2" for queue in TRICKY_QUEUE_NAMES.values()], extra=["--connections", "30"])
    for name, queue in TRICKY_QUEUE_NAMES.items():
        fleet.producer(name, queue, mode="insert", rate=0, count=5).wait(30)
    tags = fleet.enqueued_tags()
    counts = fleet.wait_all_completed(tags, timeout=60)
    assert {tag: counts[tag] for tag in tags} == dict.fromkeys(tags, 1)
    assert fleet.producer_errors() == []
    completed_in = {row[0] for row in awa_db.query("SELECT DISTINCT queue FROM testbed.completions")}
    assert completed_in == set(TRICKY_QUEUE_NAMES.values())
