"""awa_enqueue_shards_info against real Awa runtimes on PostgreSQL 17 and 18."""

from __future__ import annotations

import json
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from psycopg import sql

from awa_testbed.environment import wait_for_live_runtimes

from ansible_collections.awa.operations.plugins.module_utils.errors import LockTimeout, WaitTimeout
from ansible_collections.awa.operations.plugins.module_utils.info import read

from enqueue_shards_support import ansible_command, change, info, session_holding, snapshot

# What an `awa migrate` holds on the table it alters: even reads wait for it.
DDL_LOCK = "LOCK TABLE awa.queue_enqueue_heads IN ACCESS EXCLUSIVE MODE"


def run_info_module(module_args: str):
    """``ansible localhost -m awa.operations.awa_enqueue_shards_info -a ARGS`` (with its action plugin)."""
    return ansible_command("ansible", "localhost", "-m", "awa.operations.awa_enqueue_shards_info", "-a", module_args,
                           env_extra={"ANSIBLE_PYTHON_INTERPRETER": sys.executable})


def test_convergence_counts_restarts_and_drops_a_runtime_sigkilled_during_the_wait(awa_db, fleet):
    workers = [fleet.worker(name, ["conv=2"]) for name in ("w1", "w2", "w3")]
    wait_for_live_runtimes(awa_db, [worker.pid for worker in workers], 30)
    change(awa_db, "conv", 4)

    before = info(awa_db, queue="conv")["queues"]["conv"]
    assert (before["runtimes_converged"], before["runtimes_live"], before["converged"]) == (0, 3, False)
    assert {s["pid"] for s in before["stragglers"]} == {worker.pid for worker in workers}
    assert all("already running when the count changed" in s["reason"] for s in before["stragglers"])

    with pytest.raises(WaitTimeout) as timeout:
        info(awa_db, queue="conv", wait="converged", timeout=1)
    assert str(workers[0].pid) in timeout.value.message and "restart the runtimes named" in timeout.value.message
    assert timeout.value.result["queues"]["conv"]["runtimes_live"] == 3

    for converged, worker in enumerate(workers[:2], start=1):
        worker.restart()
        wait_for_live_runtimes(awa_db, [worker.pid], 30)
        now = info(awa_db, queue="conv")
        assert (now["queues"]["conv"]["runtimes_converged"], now["queues"]["conv"]["runtimes_live"]) == (converged, 3)
        assert f"{converged} of 3 live runtimes" in now["summary"]

    # The wait is running when the last straggler dies without a goodbye (SIGKILL): its row stays
    # "live" until Awa's staleness rule (30 s without a snapshot) drops it, then the wait succeeds.
    # The kill follows the wait's first poll, which saw the straggler live.
    first_poll = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        waiting = pool.submit(info, awa_db, queue="conv", wait="converged", timeout=90,
                              on_poll=lambda observed, elapsed: first_poll.set())
        assert first_poll.wait(60), "the wait did not poll"
        workers[2].kill()
        done = waiting.result(timeout=120)
    assert done["converged"] and done["queues"]["conv"]["runtimes_live"] == 2 and done["polls"] > 1
    killed = next(r for r in done["runtimes"] if r["pid"] == workers[2].pids[0])
    assert killed["stale"] and not killed["live"] and killed["seconds_since_seen"] >= 30


def test_wait_drained_returns_only_after_a_worker_drains_the_old_shards(awa_db, fleet):
    change(awa_db, "drain", 4)
    fleet.producer("p", "drain", mode="enqueue_many_copy", keyed=True, batch=50, count=200, rate=0).wait(60)
    change(awa_db, "drain", 1)

    state = info(awa_db, queue="drain")["queues"]["drain"]
    spread = {row["shard"]: row["ready_depth"] for row in state["shards"]}
    assert sum(spread.values()) == 200 and all(spread[shard] > 0 for shard in range(4))
    assert state["depth_beyond_count"] == sum(spread[shard] for shard in (1, 2, 3))
    assert state["converged"] and not state["drained"]

    with pytest.raises(WaitTimeout) as timeout:
        info(awa_db, queue="drain", wait="drained", timeout=1)
    assert "ready jobs remain on shards at or above the count" in timeout.value.message
    assert timeout.value.result["queues"]["drain"]["depth_beyond_count"] > 0

    fleet.worker("w", ["drain=8"])
    drained = info(awa_db, queue="drain", wait="drained", timeout=60)
    assert drained["drained"] and drained["queues"]["drain"]["depth_beyond_count"] == 0
    # Ready depth 0 means claimed, not yet completed: the worker still finishes every job.
    counts = fleet.wait_all_completed(fleet.enqueued_tags("drain"), timeout=60)
    assert len(counts) == 200 and set(counts.values()) == {1}


def test_grant_health_finds_a_missing_update_and_runtime_roles_fixes_it(awa_db, fleet):
    awa_db.setup_least_privilege(runtime_count=2)
    runtime1, runtime2 = awa_db.roles["runtime1"].name, awa_db.roles["runtime2"].name
    change(awa_db, "grants", 2, role="migrator", runtime_roles=[runtime1, runtime2])
    sequence = awa_db.scalar("SELECT seq_name FROM awa.queue_enqueue_heads WHERE queue = 'grants' "
                             "AND priority = 2 AND enqueue_shard = 1")
    awa_db.query(sql.SQL("REVOKE UPDATE ON SEQUENCE {} FROM {}").format(
        sql.Identifier("awa", sequence), sql.Identifier(runtime2)))

    found = info(awa_db, role="migrator", queue="grants", runtime_roles=[runtime1, runtime2])["queues"]["grants"]
    assert found["grants"]["missing"] == [
        {"role": runtime2, "privileges": ["UPDATE"], "sequences": 1, "examples": [sequence]}]
    assert any(runtime2 in finding and "Fix: run awa.operations.awa_enqueue_shards" in finding
               for finding in found["findings"])

    fixed = change(awa_db, "grants", 2, role="migrator", runtime_roles=[runtime1, runtime2])
    assert fixed["changed"] and fixed["grants_added"] == 1 and fixed["lanes_created"] == 0
    after = info(awa_db, role="migrator", queue="grants", runtime_roles=[runtime1, runtime2])["queues"]["grants"]
    assert after["grants"]["missing"] == [] and after["findings"] == []


def test_lanes_a_runtime_role_created_itself_are_flagged(awa_db, fleet):
    """The 0.6.9 hazard: lanes created lazily by one runtime role are unusable by another."""
    awa_db.setup_least_privilege(runtime_count=2)
    runtime1, runtime2 = awa_db.roles["runtime1"].name, awa_db.roles["runtime2"].name
    fleet.producer("p1", "lazy", role="runtime1", count=5, rate=0).wait(60)
    found = info(awa_db, queue="lazy", runtime_roles=[runtime1, runtime2])["queues"]["lazy"]
    assert found["grants"]["sequence_owners"] == {runtime1: 2}
    assert [entry["role"] for entry in found["grants"]["missing"]] == [runtime2]
    assert any(f"owned by runtime role {runtime1}" in finding for finding in found["findings"])

    # Once every runtime role is granted, the ownership is no longer a finding (it was reported on every run).
    change(awa_db, "lazy", 1, runtime_roles=[runtime1, runtime2])
    after = info(awa_db, queue="lazy", runtime_roles=[runtime1, runtime2])["queues"]["lazy"]
    assert after["grants"]["sequence_owners"][runtime1] == 2
    assert (after["grants"]["missing"], after["findings"]) == ([], [])


def test_a_snapshot_that_reports_its_count_is_judged_by_it(awa_db):
    """No released Awa publishes its shard count yet: these rows are simulated, standing in for one that does."""
    change(awa_db, "reported", 4)
    for instance, reported in (("00000000-0000-4000-8000-000000000001", 4),
                               ("00000000-0000-4000-8000-000000000002", 1)):
        awa_db.query(
            "INSERT INTO awa.runtime_instances (instance_id, pid, version, started_at, last_seen_at, "
            "snapshot_interval_ms, healthy, postgres_connected, poll_loop_alive, heartbeat_alive, shutting_down, "
            "leader, queues) VALUES (%s, 1, '0.8.0-simulated', now() - interval '1 hour', now(), 10000, true, true, "
            "true, true, false, false, %s::jsonb)",
            (instance, json.dumps([{"queue": "reported", "config": {"enqueue_shards": reported}}])))
    state = info(awa_db, queue="reported")["queues"]["reported"]
    assert (state["runtimes_converged"], state["runtimes_live"]) == (1, 2)
    assert [s["instance_id"] for s in state["stragglers"]] == ["00000000-0000-4000-8000-000000000002"]
    assert "reports enqueue_shards=1" in state["stragglers"][0]["reason"]


def test_every_queue_is_reported_with_its_stripes_and_a_summary(awa_db):
    change(awa_db, "alpha", 3)
    change(awa_db, "striped", 2, stripes=2)
    everything = info(awa_db)
    assert set(everything["queues"]) == {"alpha", "striped"}
    striped = everything["queues"]["striped"]
    assert striped["physical_queues"] == ["striped#0", "striped#1"]
    assert striped["enqueue_shards"] == {"striped#0": 2, "striped#1": 2}
    assert striped["lanes_complete"] == 16 and striped["lanes_missing"] == []
    assert [row["shard"] for row in everything["queues"]["alpha"]["shards"]] == [0, 1, 2]
    assert everything["summary_lines"][0].startswith("alpha: enqueue_shards 3 (was 1, change #")
    assert any(line.startswith("  striped#1: ready by shard 0:0 1:0") for line in everything["summary_lines"])
    assert everything["converged"] and everything["drained"]
    chosen = info(awa_db, queues=["striped", "never_used"])
    assert list(chosen["queues"]) == ["striped", "never_used"]
    assert chosen["queues"]["never_used"]["enqueue_shards"] == {"never_used": 1}
    assert len(chosen["queues"]["never_used"]["lanes_missing"]) == 4


def test_ansible_wait_prints_progress_every_poll_and_fails_naming_the_straggler(awa_db, fleet):
    worker = fleet.worker("w1", ["ansible_q"])
    wait_for_live_runtimes(awa_db, [worker.pid], 30)
    change(awa_db, "ansible_q", 2)
    login = " ".join(f"{key}={value}" for key, value in awa_db.login_args().items())
    failed = run_info_module(f"{login} queue=ansible_q wait=converged wait_timeout=3 wait_sleep=1")
    assert failed.returncode != 0
    # One line per poll; how many polls fit in wait_timeout depends on how fast the machine runs a module.
    polls = int(re.search(r'"polls": (\d+)', failed.stdout).group(1))
    # Each line says the seconds waited against wait_timeout.
    assert len(re.findall(r"\d+s of 3s waiting until converged: ansible_q: 0/1 runtimes on 2 shards",
                          failed.stdout)) == polls >= 1
    assert f"pid {worker.pid}" in failed.stdout and "Timed out after" in failed.stdout

    worker.restart()
    done = run_info_module(f"{login} queue=ansible_q wait=converged wait_timeout=60 wait_sleep=1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "s of 60s done: ansible_q: 1/1 runtimes on 2 shards" in done.stdout


def test_depths_of_many_lanes_are_read_a_thousand_lanes_per_transaction(awa_db, fleet, monkeypatch):
    """Reading a lane's cursors locks its sequences until the transaction ends; big reads are chunked."""
    monkeypatch.setattr(read, "DEPTH_LANES_PER_TRANSACTION", 8)  # one 2-shard queue per transaction
    for queue in ("chunk_a", "chunk_b", "chunk_c"):
        change(awa_db, queue, 2)
        fleet.producer(f"p_{queue}", queue, mode="enqueue_many_copy", keyed=True, batch=20, count=20, rate=0).wait(60)
    everything = info(awa_db)
    for queue in ("chunk_a", "chunk_b", "chunk_c"):
        assert everything["queues"][queue]["ready_depth"] == 20
        assert sum(row["ready_depth"] for row in everything["queues"][queue]["shards"]) == 20


@pytest.mark.parametrize("wait", ["none", "converged"])
def test_a_read_behind_ddl_fails_at_lock_timeout_naming_the_holder_and_a_wait_stops_there(awa_db, wait):
    change(awa_db, "behind_ddl", 2)
    before = snapshot(awa_db)
    # The pool outlives the lock: a read that waited for the lock would end once the lock is released.
    with ThreadPoolExecutor(max_workers=1) as pool, session_holding(awa_db, DDL_LOCK) as holder_pid:
        reading = pool.submit(info, awa_db, queue="behind_ddl", wait=wait, timeout=600, lock_timeout=1)
        with pytest.raises(LockTimeout) as failure:
            reading.result(timeout=60)  # far below wait_timeout
    message = failure.value.message
    assert message.startswith("reading the shard state of 'behind_ddl': a lock was not granted within lock_timeout "
                              "(1s: canceling statement due to lock timeout)")
    assert f"pid {holder_pid} " in message and DDL_LOCK in message
    assert snapshot(awa_db) == before


def test_ansible_reads_behind_ddl_fail_at_lock_timeout_without_waiting_out_wait_timeout(awa_db):
    change(awa_db, "behind_ddl", 2)
    login = " ".join(f"{key}={value}" for key, value in awa_db.login_args().items())
    with session_holding(awa_db, DDL_LOCK) as holder_pid:
        # ansible_command gives up after 120 s, far below wait_timeout.
        failed = run_info_module(f"{login} queue=behind_ddl wait=converged wait_timeout=600 lock_timeout=1")
    assert failed.returncode != 0
    assert "a lock was not granted within lock_timeout (1s" in failed.stdout and f"pid {holder_pid} " in failed.stdout
    assert "waiting until converged" not in failed.stdout, "the first poll failed: no progress line"
