"""A controller that dies in the middle of a change window, and the same command run again - on PostgreSQL 17 and 18
(issue 48).

ansible-playbook runs in a session of its own and is killed with its whole
process group (SIGKILL: every worker and the modules it runs), as a dropped
SSH session or a cancelled AWX job ends it. The demo's test bed with four
Awa applications, on three inventory hosts (this machine, a local connection
each). The tests run in order on one bed per major, each raising queue
demo's count once more:

* killed after the first batch's restart: the same command again finishes,
  without switching the count again, and restarts only the services that
  were not yet restarted;
* killed during the change itself, while its transaction waits for the
  queue's lock: the change module, in a worker process that outlives the
  controller, switches the count once it has the lock, or nothing is
  written; the same command again leaves one ledger record either way, and
  its summary says which it found.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from ansible_collections.awa.operations.plugins.module_utils.change.lost_commit import QUEUE_LOCK_PREFIX
from ansible_collections.awa.operations.plugins.module_utils.db.options import APPLICATION_NAME

from awa_testbed.waiting import wait_until
from enqueue_shards_support import ledger_rows, session_holding, sessions_waiting_for_an_advisory_lock, shard_counts
from rollout_support import (HOSTS, hosts_inventory, program_pids, restart_command, restarted,
                             set_enqueue_shards, start_enqueue_shards, summary_row)

# Only bounds how long a broken run takes to fail.
WINDOW_SECONDS = 600


def killed(window: subprocess.Popen) -> None:
    """SIGKILL to the controller's whole process group, then reaped."""
    os.killpg(window.pid, signal.SIGKILL)
    window.wait(timeout=60)


def test_a_controller_killed_after_the_first_batch_s_restart_is_finished_by_the_same_command(fleet_bed, tmp_path):
    state_dir, db = fleet_bed
    inventory = hosts_inventory(tmp_path, HOSTS)
    # Two batches of hosts: [producer-a (awa-app-1, awa-app-2), producer-b (awa-app-3)], then [producer-c (awa-app-4)].
    options = {"inventory": inventory, "batch_size": 2, "restart_command": restart_command(state_dir, tmp_path)}
    shards = shard_counts(db).get("demo", 1) + 1
    recorded, before = len(ledger_rows(db)), program_pids(state_dir)

    window = start_enqueue_shards(state_dir, shards, output=tmp_path / "killed.out", **options)
    # The next batch restarts only once this one's runtimes are live: the kill lands between the two.
    wait_until(lambda: len(restarted(tmp_path)) == 3, WINDOW_SECONDS, "the first batch's restarts", interval=0.05)
    killed(window)

    first = restarted(tmp_path)
    assert sorted(first) == ["awa-app-1", "awa-app-2", "awa-app-3"]
    assert shard_counts(db)["demo"] == shards and len(ledger_rows(db)) == recorded + 1
    again = set_enqueue_shards(state_dir, shards, **options)

    assert again.returncode == 0, again.stdout
    assert "demo: enqueue_shards " f"{shards} -> {shards} on demo - already so, nothing written" in again.stdout
    assert len(ledger_rows(db)) == recorded + 1, "the count is not switched again"
    # What the first run restarted is found done; the others restart, each once.
    now = program_pids(state_dir)
    for host, program in (("producer-a", "awa-app-1"), ("producer-a", "awa-app-2"), ("producer-b", "awa-app-3")):
        assert f"{host}/{program}: left alone - its runtime (pid {now[program]}) runs the count" in again.stdout
    assert "Restarting 1 producer service(s) on 1 host(s) in 1 batch(es)" in again.stdout
    assert sorted(restarted(tmp_path)) == sorted(before)
    assert "inventory: 4 of 4 runtimes of the producer services live on the count" in again.stdout


def newest_record(state_dir: Path) -> dict:
    """The window's record the newest run left in the report directory (the test bed's state folder)."""
    return json.loads(max(state_dir.glob("enqueue_shards-*.json"), key=os.path.getmtime).read_text(encoding="utf-8"))


@pytest.mark.parametrize("signal_sent", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT (Ctrl-C)"])
def test_a_window_cut_short_after_its_first_batch_leaves_a_record_of_it(fleet_bed, tmp_path, signal_sent):
    state_dir, db = fleet_bed
    options = {"inventory": hosts_inventory(tmp_path, HOSTS), "batch_size": 2,
               "restart_command": restart_command(state_dir, tmp_path)}
    shards = shard_counts(db).get("demo", 1) + 1

    window = start_enqueue_shards(state_dir, shards, output=tmp_path / "cut.out", **options)
    # The record is written once the batch is judged: the second batch restarts only after that.
    wait_until(lambda: len(restarted(tmp_path)) > 3, WINDOW_SECONDS, "the second batch's restart", interval=0.05)
    os.killpg(window.pid, signal_sent)
    code = window.wait(timeout=120)

    assert code != 0
    outcome = newest_record(state_dir)["outcome"]
    assert outcome["last_step"] == "batch 1 of 2" and not outcome["done"], outcome
    assert sorted(outcome["services"]["restarted"]) == ["producer-a/awa-app-1", "producer-a/awa-app-2",
                                                        "producer-b/awa-app-3"]
    assert outcome["message"].startswith("The window had run up to batch 1 of 2 when this record was written: if "
                                         "it ends here, the window was interrupted.")
    assert outcome["queues"]["demo"]["asked"] == shards


def test_a_controller_killed_during_the_change_is_finished_by_the_same_command_with_one_recorded_change(fleet_bed, tmp_path):
    state_dir, db = fleet_bed
    inventory = hosts_inventory(tmp_path, HOSTS)
    options = {"inventory": inventory, "batch_size": "100%", "restart_command": restart_command(state_dir, tmp_path),
               "lock_timeout": WINDOW_SECONDS}
    current = shard_counts(db).get("demo", 1)
    recorded, before = len(ledger_rows(db)), program_pids(state_dir)

    # Another session holds the queue's lock: the change's transaction is open, waiting for it, when the kill lands.
    with session_holding(db, "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", QUEUE_LOCK_PREFIX + "demo"):
        window = start_enqueue_shards(state_dir, current + 1, output=tmp_path / "killed.out", **options)
        wait_until(lambda: sessions_waiting_for_an_advisory_lock(db) == 1, WINDOW_SECONDS,
                   "the change waiting for the queue's lock")
        killed(window)
        assert (shard_counts(db).get("demo", 1), len(ledger_rows(db))) == (current, recorded)
    # Ansible runs each task in a worker of its own session, which outlives the controller: the change module may
    # still commit once it has the lock. Either it did, once, or nothing was written.
    wait_until(lambda: not db.scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                     (APPLICATION_NAME,)), WINDOW_SECONDS, "the killed window's change to end")
    switched = shard_counts(db).get("demo", 1) == current + 1
    assert len(ledger_rows(db)) == recorded + switched and program_pids(state_dir) == before

    again = set_enqueue_shards(state_dir, current + 1, **options)

    assert again.returncode == 0, again.stdout
    assert shard_counts(db)["demo"] == current + 1 and len(ledger_rows(db)) == recorded + 1
    # The summary says what this run found: the count already switched, or switched by it.
    said = (f"demo: enqueue_shards {current + 1} -> {current + 1} on demo - already so, nothing written" if switched
            else f"demo: enqueue_shards {current} -> {current + 1} on demo - changed in one transaction")
    if switched:
        set_by = ledger_rows(db)[-1]
        assert f"already so, nothing written - change #{set_by['id']} set it from {current} at " in again.stdout
    assert said in again.stdout
    # The window's whole move either way; a count found already so names the change that set it.
    assert summary_row(again.stdout)[1:3] == [f"{current} -> {current + 1}", "4 of 4"]
    assert summary_row(again.stdout)[5] == "yes / yes"
    assert sorted(restarted(tmp_path)) == sorted(before)
