"""Proof that the test bed runs the real things: servers, Awa schema, runtimes, producers."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from awa_testbed import environment, pgserver, shapes
from awa_testbed.file_order import costliest_files_first, seconds_by_file
from awa_testbed.lifecycle import pid_alive
from awa_testbed.pgserver import PgServer
from awa_testbed.waiting import poll, wait_until
from awa_testbed.worker import rotation_intervals
from enqueue_shards_support import ansible_command

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


# Producer hosts in the shapes the rollout role meets (awa_testbed.shapes): two booted from one image (pid namespaces
# of their own), one running its service in a container, one sharing this machine's with a service of two replicas
# and one that only enqueues.
SHAPES = {"host-1": {"awa-app-1": "bare", "awa-app-2": "bare"}, "host-2": {"awa-app-1": "bare"},
          "host-3": {"ctr-app": "container"},
          "host-4": {"programs": {"rep-app": {"replicas": 2}, "web-app": "enqueue_only"}, "pid_namespace": False}}


@pytest.fixture(scope="module", params=[18], ids=["pg18"])
def shapes_bed(request) -> Iterator[Path]:
    """One bed of the four shapes for this module's tests, on PostgreSQL 18 only: the test bed's own tests."""
    with shapes.temporary(SHAPES, major=request.param) as state_dir:
        yield state_dir


def _live(state_dir: Path) -> Counter:
    """(hostname, pid) of the bed's live runtimes, as many as there are."""
    return Counter(environment.live_runtimes(environment.database(environment.load_state(state_dir))))


def _renewed_runtimes(host: shapes.ProducerHost, program: str, old: list[tuple[str | None, int]], state_dir: Path):
    """The program's identities once they are all new and live (after a restart)."""
    def renewed():
        found = host.runtime_identities(program)
        fresh = len(found) == host.programs[program].runtimes and not set(found) & set(old)
        return fresh and not Counter(found) - _live(state_dir) and found
    return wait_until(renewed, 60, f"{host.name}/{program}'s runtimes to start again")


def test_hosts_of_one_image_give_their_programs_the_same_pids_and_their_runtimes_report_them(shapes_bed):
    hosts = shapes.load(shapes_bed)
    first, second = hosts["host-1"], hosts["host-2"]
    assert first.pid("awa-app-1") == second.pid("awa-app-1") == 2, "supervisord is pid 1; program 1, pid 2"
    assert first.machine_pid("awa-app-1") != second.machine_pid("awa-app-1")
    identities = [("host-1", 2), ("host-2", 2)]
    assert first.runtime_identities("awa-app-1") + second.runtime_identities("awa-app-1") == identities
    assert not Counter(identities) - _live(shapes_bed), "both runtimes live, each with its host's HOSTNAME and pid 2"
    # The status command run inside the host (through its interpreter, as the role's module runs it) says pid 2.
    status = subprocess.run([first.interpreter, *shlex.split(first.status_command.format(service="awa-app-1"))[1:]],
                            capture_output=True, text=True, check=True)
    started, pid = status.stdout.split()
    assert int(pid) == 2
    assert float(started) == pytest.approx(psutil.Process(first.machine_pid("awa-app-1")).create_time(), abs=0.01)


def test_ansible_runs_each_hosts_modules_inside_it_and_reads_its_namespaces_pids(shapes_bed, tmp_path):
    """The inventory's hosts, read by the role's module with their status commands: each host's pids, as the host
    itself sees them."""
    inventory = shapes.write_inventory(shapes_bed, tmp_path / "inventory.yml")
    read = ansible_command("ansible", "-i", str(inventory), "awa_producers", "-o",
                           "-m", "awa.operations.awa_producer_services",
                           "-a", json.dumps({"services": "{{ enqueue_shards_services }}", "method": "command",
                                             "status_command": "{{ enqueue_shards_status_command }}"}))
    assert read.returncode == 0, read.stdout + read.stderr
    results = {line.split(" | ")[0]: json.loads(line.split(" => ", 1)[1]) for line in read.stdout.splitlines()
               if " | SUCCESS => " in line}
    hosts = shapes.load(shapes_bed)
    assert {host: {service["service"]: service["main_pid"] for service in result["services"]}
            for host, result in results.items()} == {
        name: {program: host.pid(program) for program in host.programs} for name, host in hosts.items()}
    assert results["host-1"]["services"][0]["main_pid"] == results["host-2"]["services"][0]["main_pid"] == 2


def test_a_container_runs_its_runtime_as_pid_1_with_a_new_hostname_at_every_start(shapes_bed):
    host = shapes.load(shapes_bed)["host-3"]
    [(hostname, pid)] = before = host.runtime_identities("ctr-app")
    assert re.fullmatch(r"ctr-[0-9a-f]{12}", hostname) and pid == 1
    # The service's main pid is the container's unshare (as a podman run unit's); the runtime is its descendant.
    unshare = psutil.Process(host.machine_pid("ctr-app"))
    assert unshare.name() == "unshare"
    assert any(shapes.namespace_pids(child.pid)[-1] == 1 for child in unshare.children(recursive=True))

    host.control("restart", "ctr-app")

    [(renamed, pid)] = _renewed_runtimes(host, "ctr-app", before, shapes_bed)
    assert renamed != hostname and re.fullmatch(r"ctr-[0-9a-f]{12}", renamed) and pid == 1
    db = environment.database(environment.load_state(shapes_bed))
    assert db.scalar("SELECT bool_and(shutting_down) FROM awa.runtime_instances WHERE hostname = %s", (hostname,)), \
        "the stop signal reached the runtime (pid 1 of its container): it shut down gracefully"


def test_a_service_of_replicas_runs_each_in_a_container_and_restarts_them_all_when_one_ends(shapes_bed):
    host = shapes.load(shapes_bed)["host-4"]
    before = host.runtime_identities("rep-app")
    assert sorted(pid for dummy, pid in before) == [1, 1]
    assert sorted(re.sub(r"-[0-9a-f]{12}$", "", hostname) for hostname, dummy in before) == ["rep-app-r1", "rep-app-r2"]
    assert not Counter(before) - _live(shapes_bed)
    service = host.machine_pid("rep-app")
    [replica, *dummy] = [process for process in psutil.Process(service).children(recursive=True)
                         if shapes.namespace_pids(process.pid)[-1] == 1]

    replica.kill()

    after = _renewed_runtimes(host, "rep-app", before, shapes_bed)
    assert host.machine_pid("rep-app") != service, "the whole service was restarted"
    assert len({hostname for hostname, dummy in after}) == 2


def test_an_enqueue_only_program_enqueues_and_runs_no_runtime(shapes_bed):
    host = shapes.load(shapes_bed)["host-4"]
    assert host.runtime_identities("web-app") == []
    db = environment.database(environment.load_state(shapes_bed))
    producer = f"web-app@host-4-{host.pid('web-app')}"
    enqueued = "SELECT count(*) FROM testbed.enqueued WHERE producer = %s"
    first = db.scalar(enqueued, (producer,))
    wait_until(lambda: db.scalar(enqueued, (producer,)) > first, 30, "web-app to enqueue one more job")
    assert db.scalar("SELECT count(*) FROM awa.runtime_instances WHERE hostname = 'host-4'") == 0


def test_the_worker_runs_again_with_its_environment_file_so_that_proc_shows_it(shapes_bed):
    """As systemd's EnvironmentFile= puts the file's variables in the environment a process starts with."""
    host = shapes.load(shapes_bed)["host-2"]
    value = f"probe-{os.getpid()}"
    Path(host.env_file).write_text(f"# written by the test\nAWA_TESTBED_PROBE={value}\n", encoding="utf-8")
    before = host.runtime_identities("awa-app-1")

    host.control("restart", "awa-app-1")

    [(hostname, pid)] = _renewed_runtimes(host, "awa-app-1", before, shapes_bed)
    assert (hostname, pid) == ("host-2", host.pid("awa-app-1")), "the same process (pid), executed again"
    environ = psutil.Process(host.machine_pid("awa-app-1")).environ()
    assert environ["AWA_TESTBED_PROBE"] == value and environ["HOSTNAME"] == "host-2"
