"""Proof that the test bed runs the real things: servers, Awa schema, runtimes, producers."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from awa_testbed import pgserver
from awa_testbed.file_order import costliest_files_first, seconds_by_file
from awa_testbed.lifecycle import pid_alive
from awa_testbed.pgserver import PgServer
from awa_testbed.waiting import poll, wait_until
from awa_testbed.worker import rotation_intervals

AWA_0_6_9_SCHEMA_VERSION = 40


def test_server_runs_the_requested_major(pg, pg_major):
    assert pg.version_num() // 10000 == pg_major
    with pg.connect() as conn:
        assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
        # The server does not run as root.
        data_dir_owner = conn.execute("SELECT pg_stat_file('postmaster.pid')").fetchone()
        assert data_dir_owner is not None


def test_awa_schema_is_migrated_and_queue_storage_active(awa_db):
    assert awa_db.scalar("SELECT max(version) FROM awa.schema_version") == AWA_0_6_9_SCHEMA_VERSION
    state, engine = awa_db.query("SELECT state, current_engine FROM awa.storage_status()")[0]
    assert (state, engine) == ("active", "queue_storage")
    assert awa_db.scalar("SELECT awa.active_queue_storage_schema()") == "awa"


def test_fresh_migrate_leaves_the_canonical_engine(db_factory):
    """docs/awa-internals.md §1: migrate alone does not activate queue storage on 0.6.9."""
    database = db_factory.create(activate=False)
    try:
        assert database.query("SELECT state, current_engine FROM awa.storage_status()")[0] == (
            "canonical", "canonical")
        assert database.scalar("SELECT awa.active_queue_storage_schema()") is None
    finally:
        database.drop()


def test_awa_0_6_8_database_has_enqueue_shards(db_factory):
    database = db_factory.create(awa_version="0.6.8")
    try:
        assert database.scalar(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_schema = 'awa' AND table_name = 'queue_meta' AND column_name = 'enqueue_shards'") == 1
    finally:
        database.drop()


def test_the_functional_tests_runtimes_rotate_their_leases_every_two_seconds(awa_db, fleet):
    """conftest sets AWA_TESTBED_ROTATE_MS to 2000,5000: three lease rotations take 4 s or more (Awa's 250 ms: 0.75)."""
    fleet.worker("w1", ["rotation=1"])
    generation = "SELECT generation FROM awa.lease_ring_state"
    first = wait_until(lambda: awa_db.scalar(generation) or None, 60, "the runtime's first lease rotation")
    started = time.monotonic()
    wait_until(lambda: awa_db.scalar(generation) >= first + 3, 60, "three more lease rotations")
    assert time.monotonic() - started >= 4.0


def test_the_rotation_intervals_are_read_as_lease_then_queue_milliseconds():
    assert rotation_intervals(None) == {}
    assert rotation_intervals("2000,5000") == {"queue_storage_lease_rotate_interval_ms": 2000,
                                               "queue_storage_queue_rotate_interval_ms": 5000}
    with pytest.raises(SystemExit, match="expected LEASE_MS,QUEUE_MS"):
        rotation_intervals("2000")


def test_a_fast_server_keeps_its_files_in_memory_when_there_is_room_and_a_durable_one_on_disk(monkeypatch, tmp_path):
    monkeypatch.setattr(pgserver, "MEMORY_FOLDER", tmp_path)
    monkeypatch.setattr(pgserver, "MEMORY_FOLDER_MIN_FREE", 1)
    assert pgserver.scratch_folder(durable=False) == tmp_path
    assert pgserver.scratch_folder(durable=True) is None
    monkeypatch.setattr(pgserver, "MEMORY_FOLDER_MIN_FREE", 1 << 60)
    assert pgserver.scratch_folder(durable=False) is None, "a folder without room is not used"
    monkeypatch.setattr(pgserver, "MEMORY_FOLDER", tmp_path / "missing")
    assert pgserver.scratch_folder(durable=False) is None


def test_producer_enqueues_100_and_a_worker_completes_all(awa_db, fleet):
    producer = fleet.producer("p1", "proof", mode="insert", rate=0, count=100)
    producer.wait(60)
    tags = fleet.enqueued_tags("proof")
    assert len(tags) == 100
    assert fleet.producer_errors() == []

    fleet.worker("w1", ["proof=8"])
    counts = fleet.wait_all_completed(tags, timeout=60)
    assert {tag: counts[tag] for tag in tags} == dict.fromkeys(tags, 1)
    ran = awa_db.scalar("SELECT count(DISTINCT tag) FROM testbed.completions WHERE worker = 'w1'")
    assert ran == 100
    assert fleet.awa_tally_when_finished("proof", 100).completed == 100, "Awa's own tally agrees"


def test_runtime_publishes_its_snapshot_and_restarts_as_a_new_instance(awa_db, fleet):
    worker = fleet.worker("w1", ["proof"])
    first_pid = worker.pid
    rows = _wait_for_runtime_rows(awa_db, 1)
    assert rows[0][1] == first_pid
    worker.restart()
    assert worker.pid != first_pid
    rows = _wait_for_runtime_rows(awa_db, 2)
    by_pid = {pid: (instance, shutting_down) for instance, pid, shutting_down in rows}
    assert by_pid[first_pid][1] is True, "a graceful stop marks the old row shutting_down"
    assert by_pid[worker.pid][1] is False
    assert by_pid[first_pid][0] != by_pid[worker.pid][0]


def _wait_for_runtime_rows(awa_db, count, timeout=20.0):
    satisfied, rows = poll(
        lambda: awa_db.query("SELECT instance_id, pid, shutting_down FROM awa.runtime_instances ORDER BY started_at"),
        lambda rows: len(rows) >= count, timeout)
    assert satisfied, f"expected {count} runtime rows, saw {rows}"
    return rows


def test_servers_and_programs_leave_no_process_behind(db_factory):
    """A server and a runtime of their own: after teardown neither pid exists."""
    from awa_testbed.fleet import Fleet  # pylint: disable=import-outside-toplevel
    server = PgServer(db_factory.server.major)
    server.start()
    postmaster = server.postmaster_pid()
    try:
        database = db_factory.__class__(server).create()
        programs = Fleet(database)
        worker = programs.worker("w1", ["proof"])
        worker_pid = worker.pid
        programs.cleanup()
    finally:
        server.destroy()
    assert not pid_alive(worker_pid)
    assert not pid_alive(postmaster)
    leftover = subprocess.run(["pgrep", "-f", str(server.data_dir)], capture_output=True, text=True, check=False)
    assert leftover.stdout.strip() == ""
    assert not server.base_dir.exists()


def test_a_program_started_from_a_thread_is_refused_before_it_runs(awa_db, fleet):
    """The kernel stops a child when the *thread* that started it ends (PR_SET_PDEATHSIG), so a runtime started
    from a helper thread would vanish mid-test; the test bed refuses to start one there, with the reason."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        attempt = pool.submit(fleet.worker, "from_thread", ["proof"])
        with pytest.raises(RuntimeError, match="from the main thread"):
            attempt.result(timeout=30)
    assert not awa_db.query("SELECT 1 FROM awa.runtime_instances")


def test_a_companion_that_fails_to_stop_still_lets_the_programs_stop(awa_db, fleet):
    """A helper beside the programs (such as the lane holder) that fails at stop is reported, and the programs
    still stop: they must not run on into the next test."""
    class FailsToStop:  # pylint: disable=too-few-public-methods
        def stop(self) -> None:
            raise RuntimeError("companion could not stop")

    worker = fleet.worker("w1", ["proof"])
    fleet.attach(FailsToStop())
    with pytest.raises(RuntimeError, match="companion could not stop"):
        fleet.stop_all()
    assert not worker.running()


def test_the_costliest_test_files_are_handed_out_first_each_files_tests_in_their_order():
    """hack/test.sh's three workers get the minutes-long files first, not last (awa_testbed.file_order)."""
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in
             ("a.py::t1", "b.py::t1[pg17]", "a.py::t2", "c.py::t1", "b.py::t1[pg18]", "d.py::t1")]
    # c.py is not in the table: it counts as the median known file (5 s), so it keeps its place before d.py.
    recorded = {"a.py": 1.0, "b.py": 300.0, "d.py": 5.0, "gone.py": 9.0}
    ordered = [item.nodeid for item in costliest_files_first(items, recorded)]
    assert ordered == ["b.py::t1[pg17]", "b.py::t1[pg18]", "c.py::t1", "d.py::t1", "a.py::t1", "a.py::t2"]
    assert seconds_by_file([("a.py::t1", 0.25), ("a.py::t1", 2.0), ("b.py::t2[pg18]", 1.04)]) == {
        "a.py": 2.2, "b.py": 1.0}
