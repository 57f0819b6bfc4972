"""Shared helpers of the awa_enqueue_shards functional tests.

They run the change through the collection's Python API or through real
Ansible, and read what an Awa operator would look at: ``awa.queue_meta``, the
lanes (head rows and their sequences), the change ledger and the exact ready
depth per shard (docs/awa-internals.md §9).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from awa_testbed import queue_facts
from awa_testbed.awadb import AwaDatabase
from awa_testbed.pgserver import PgServer
from awa_testbed.collection import collections_path
from awa_testbed.waiting import wait_until  # the tests' one wait, imported from here by most of them

from ansible_collections.awa.operations.plugins.module_utils.change.lost_commit import QUEUE_LOCK_PREFIX
from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.errors import AwaOperationsError
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import PRIORITIES
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request
from ansible_collections.awa.operations.plugins.module_utils.info.wait import wait_for_shards_info

LEDGER = "awa_operations.enqueue_shards_changes"
# Keys of a result that differ between two runs of the same plan.
RUN_SPECIFIC_KEYS = ("check_mode", "duration", "ledger", "change_id")


# -- running the change ---------------------------------------------------

def change(db: AwaDatabase, queue: str, shards: object, *, role: str | None = None, check_mode: bool = False,
           lock_timeout: float = 5.0, login: dict | None = None, new_queue: bool = True, **request) -> dict:
    """One run of the module's core, as ``role`` (superuser when None) or with the connection options ``login``;
    like the module, it reconnects with them to look up a commit whose connection was lost. Most tests prepare
    their queues in a fresh database, before any producer: ``new_queue`` (true here, false in the module) lets them."""
    options = login or db.login_args(role)
    with open_connection(options) as conn:
        return change_queues(conn, validate_request(queue, shards, new_queue=new_queue, **request),
                             check_mode=check_mode, lock_timeout=lock_timeout,
                             reconnect=lambda: connect(options))


def info(db: AwaDatabase, role: str | None = None, wait: str = "none", timeout: float = 0, *,
         login: dict | None = None, **options) -> dict:
    """One read (or wait) of the info module's core, as ``role`` (superuser when None) or with the
    connection options ``login``, polling every 0.5 s."""
    with open_connection(login or db.login_args(role)) as conn:
        return wait_for_shards_info(conn, wait, timeout, 0.5, **options)


def refused(db: AwaDatabase, queue: object, shards: object, **options) -> AwaOperationsError:
    """Run a change that must be refused: assert it wrote nothing, return the error."""
    before = snapshot(db)
    with pytest.raises(AwaOperationsError) as refusal:
        change(db, queue, shards, **options)
    assert snapshot(db) == before, "a refused change wrote to the database"
    return refusal.value


def comparable(result: dict) -> dict:
    """A result without what legitimately differs between a check run and a real run."""
    return {key: value for key, value in result.items() if key not in RUN_SPECIFIC_KEYS}


# -- what is in the database ------------------------------------------------

CATALOG_SQL = """
SELECT n.nspname, n.nspacl::text, c.relname, c.relkind::text, pg_get_userbyid(c.relowner), c.relacl::text
FROM pg_namespace AS n LEFT JOIN pg_class AS c ON c.relnamespace = n.oid AND c.relkind IN ('r', 'p', 'S', 'v')
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'
ORDER BY 1, 3
"""
# Tables whose rows a shard-count change may write.
WRITTEN_TABLES = ("awa.queue_meta", "awa.queue_lanes", "awa.queue_enqueue_heads", "awa.queue_claim_heads", LEDGER)


def snapshot(db: AwaDatabase) -> dict[str, list]:
    """Every schema, relation (with owner and ACL) and row a change could write."""
    with db.connect() as conn:
        state = {"catalog": conn.execute(CATALOG_SQL).fetchall()}
        for table in WRITTEN_TABLES:
            if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None:
                query = sql.SQL("SELECT to_jsonb(t)::text FROM {} AS t ORDER BY 1").format(
                    sql.Identifier(*table.split(".")))
                state[table] = [row[0] for row in conn.execute(query)]
    return state


def shard_counts(db: AwaDatabase) -> dict[str, int]:
    """Every ``awa.queue_meta`` row: queue -> enqueue_shards."""
    return dict(db.query("SELECT queue, enqueue_shards FROM awa.queue_meta"))


COMPLETE_LANES_SQL = """
SELECT h.queue, h.priority, h.enqueue_shard
FROM awa.queue_enqueue_heads AS h
JOIN awa.queue_claim_heads AS c USING (queue, priority, enqueue_shard)
JOIN pg_class AS es ON es.relname = h.seq_name AND es.relnamespace = 'awa'::regnamespace AND es.relkind = 'S'
JOIN pg_class AS cs ON cs.relname = c.seq_name AND cs.relnamespace = 'awa'::regnamespace AND cs.relkind = 'S'
JOIN awa.queue_lanes AS l USING (queue, priority)
"""


def complete_lanes(db: AwaDatabase, queue: str) -> set[tuple[int, int]]:
    """(priority, shard) of every lane of ``queue`` with lane row, both heads and both sequences."""
    rows = db.query(sql.SQL(COMPLETE_LANES_SQL) + sql.SQL("WHERE h.queue = %s"), (queue,))
    return {(priority, shard) for dummy, priority, shard in rows}


def lanes_below(shards: int) -> set[tuple[int, int]]:
    """The lanes a count of ``shards`` needs: every priority 1..4 on every shard below it."""
    return {(priority, shard) for priority in PRIORITIES for shard in range(shards)}


def lane_objects(db: AwaDatabase) -> dict[str, set]:
    """Every head row and lane sequence in the database (to prove none appeared or vanished)."""
    return {
        "enqueue_heads": set(db.query("SELECT queue, priority, enqueue_shard FROM awa.queue_enqueue_heads")),
        "claim_heads": set(db.query("SELECT queue, priority, enqueue_shard FROM awa.queue_claim_heads")),
        "sequences": {row[0] for row in db.query(
            "SELECT relname FROM pg_class WHERE relkind = 'S' AND relnamespace = 'awa'::regnamespace "
            "AND relname ~ '^queue_(enqueue|claim)_seq_'")},
    }


def ready_depth_by_shard(db: AwaDatabase, queue: str) -> dict[int, int]:
    """shard -> jobs ready to claim, counted the way Awa counts them (docs/awa-internals.md §9)."""
    return queue_facts.ready_depth_by_shard(db.dsn(), queue)


def completed_shards(db: AwaDatabase, queue: str, tag_prefix: str = "") -> set[int]:
    """Shards of ``queue`` that test-bed workers completed jobs from (tags starting with ``tag_prefix``)."""
    rows = db.query("SELECT DISTINCT enqueue_shard FROM testbed.completions WHERE queue = %s AND starts_with(tag, %s)",
                    (queue, tag_prefix))
    return {row[0] for row in rows}


def ledger_rows(db: AwaDatabase) -> list[dict]:
    if db.scalar("SELECT to_regclass(%s)", (LEDGER,)) is None:
        return []
    return [row[0] for row in db.query(f"SELECT to_jsonb(c) FROM {LEDGER} AS c ORDER BY id")]


def sequence_owners(db: AwaDatabase, queue: str) -> set[str]:
    """The roles owning the enqueue sequences of ``queue``'s lanes."""
    return {row[0] for row in db.query(
        "SELECT DISTINCT pg_get_userbyid(c.relowner) FROM awa.queue_enqueue_heads AS h "
        "JOIN pg_class AS c ON c.relname = h.seq_name AND c.relnamespace = 'awa'::regnamespace WHERE h.queue = %s",
        (queue,))}


def enqueued_per_producer(db: AwaDatabase) -> dict[str, int]:
    """Jobs each test-bed producer recorded as enqueued, by producer name."""
    return dict(db.query("SELECT producer, count(*) FROM testbed.enqueued GROUP BY 1 ORDER BY 1"))


def database_log(server: PgServer, dbname: str) -> list[tuple[int, str]]:
    """(backend pid, message) of every line the server logged in database ``dbname``."""
    # log_line_prefix "%m [%p] %u@%d " (awa_testbed.pgserver): "2026-12-01 12:00:00.000 UTC [pid] user@db LOG:  ..."
    pattern = re.compile(r"^\S+ \S+ \S+ \[(\d+)\] \S*@" + re.escape(dbname) + r" \w+:  (.*)$")
    text = server.log_path.read_text(encoding="utf-8", errors="replace")
    return [(int(found.group(1)), found.group(2)) for found in map(pattern.match, text.splitlines()) if found]


def next_transaction_id(db: AwaDatabase) -> int:
    """The cluster's next transaction id; reading it assigns none."""
    return int(db.scalar("SELECT txid_snapshot_xmax(txid_current_snapshot())"))


@contextlib.contextmanager
def session_holding(db: AwaDatabase, statement: str, *params) -> Iterator[int]:
    """Another session holding a lock in an open transaction; yields its pid."""
    with psycopg.connect(db.dsn()) as holder:
        holder.execute(statement, params)
        yield holder.info.backend_pid
        holder.rollback()


def backend_waiting_on_lock(db: AwaDatabase) -> int | None:
    """The pid of the module's session while it waits for a lock, if it does."""
    return db.scalar("SELECT pid FROM pg_stat_activity WHERE application_name = 'awa.operations' "
                     "AND wait_event_type = 'Lock' AND datname = current_database()")


class Run(threading.Thread):
    """One run of the change in its own thread and its own session."""

    def __init__(self, db: AwaDatabase, queue: str, shards: int, **options) -> None:
        super().__init__(daemon=True)
        self.args = (db, queue, shards)
        self.options = options
        self.result: dict | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = change(*self.args, **self.options)
        except BaseException as exc:  # pylint: disable=broad-exception-caught
            self.error = exc

    def outcome(self, timeout: float = 30.0) -> dict:
        self.join(timeout)
        assert not self.is_alive(), "the run did not finish"
        if self.error is not None:
            raise self.error
        return self.result


def sessions_waiting_for_an_advisory_lock(db: AwaDatabase) -> int:
    return db.scalar("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")


def run_together(db: AwaDatabase, queue: str, targets: list[int], **options) -> list[dict]:
    """Start one run per target while the queue's lock is held, so all of them
    are waiting at once, then let them go."""
    runs = [Run(db, queue, shards, **options) for shards in targets]
    with session_holding(db, "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", QUEUE_LOCK_PREFIX + queue):
        for run in runs:
            run.start()
        wait_until(lambda: sessions_waiting_for_an_advisory_lock(db) == len(runs), 10,
                   f"{len(runs)} runs waiting for the queue lock")
    return [run.outcome() for run in runs]


# -- real Ansible -------------------------------------------------------------

def ansible_env() -> dict[str, str]:
    return {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collections_path()), "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
            "ANSIBLE_DEPRECATION_WARNINGS": "false", "ANSIBLE_RETRY_FILES_ENABLED": "false"}


# Set for a test that runs on the floor core (conftest.py, --floor-python): the Python whose ansible-core it runs.
ANSIBLE_PYTHON_VARIABLE = "AWA_TEST_ANSIBLE_PYTHON"


def ansible_python() -> Path:
    """The Python whose ansible-core a test runs: this interpreter's, or the floor core's venv's (conftest.py)."""
    return Path(os.environ.get(ANSIBLE_PYTHON_VARIABLE) or sys.executable)


def ansible_command(program: str, *args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``ansible``/``ansible-playbook`` from the environment of ``ansible_python()``."""
    executable = ansible_python().parent / program
    return subprocess.run([str(executable), *args], env={**ansible_env(), **(env_extra or {})}, capture_output=True,
                          text=True, timeout=300, check=False)


def ansible_adhoc(module_args: dict, *flags: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``ansible localhost -m awa.operations.awa_enqueue_shards -a JSON``: the process and its result."""
    process = ansible_command("ansible", "localhost", "-m", "awa.operations.awa_enqueue_shards",
                              "-a", json.dumps(module_args), *flags)
    # The default callback prints "localhost | STATUS => {json}" (a text diff, if any, comes first).
    marker = process.stdout.find("localhost | ")
    assert marker >= 0, f"no result in ansible output:\n{process.stdout}\n{process.stderr}"
    result = json.loads(process.stdout[process.stdout.index("{", marker):])
    return process, result
