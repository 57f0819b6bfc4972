"""The change window on a bad day, through its playbook, with the restart command (supervisord) on PostgreSQL 18.

The module's test bed (two Awa applications under supervisord, the restart
contract's status command printing each program's start and pid; its faults
and counts reach no other module). The tests run in order on the one bed:

* an application that hangs before its Awa runtime registers stops the
  rollout, which names it; once the fault is gone the same change is run
  again and it is restarted, though its process started after the change
  (the bug: it was left alone, and the run said converged with 1 of 1);
* an application in a restart loop stops the rollout half way; the back-out
  the stop printed is run as printed, and every job ran exactly once and the
  count is the old one, its retired shards drained;
* the health gates - deadlocks, failed jobs, retried jobs - driven over their
  limits on the real database stop the rollout, naming gate, reading, limit;
* a producer host that does not answer stops the change window before
  anything is changed, or, within enqueue_shards_max_fail_percentage, the
  window goes on without it and never says converged.

The same faults on real systemd units over SSH: extensions/molecule/fleet.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from awa_testbed import environment
from awa_testbed.pgserver import free_port
from enqueue_shards_support import ansible_env, shard_counts, snapshot
from rollout_support import (TWO_HOSTS, backout_argv, failure_message, hosts_inventory, producer_inventory,
                             program_pids, set_enqueue_shards,
                             summary_row)

TESTBED = [sys.executable, "-m", "awa_testbed"]
# Seconds a batch waits for its new runtimes: the applications register in about a second here.
RESTART_TIMEOUT = 15


def bed_command(state_dir: Path, *args: str) -> None:
    """``python -m awa_testbed COMMAND --state DIR ARGS...``."""
    subprocess.run([*TESTBED, *args[:1], "--state", str(state_dir), *args[1:]], check=True, capture_output=True)


def run(state_dir: Path, shards: int, inventory: Path, **variables) -> subprocess.CompletedProcess:
    """The window on ``inventory`` (``two_hosts``: awa-app-1, then awa-app-2, a batch each)."""
    return set_enqueue_shards(state_dir, shards, inventory=inventory, batch_size=1, restart_timeout=RESTART_TIMEOUT,
                              converge_timeout=60, **variables)


@pytest.fixture
def two_hosts(tmp_path) -> Path:
    """The test bed's two programs as two producer hosts, one each: batch 1 restarts awa-app-1, batch 2 awa-app-2."""
    return hosts_inventory(tmp_path, TWO_HOSTS)


def test_an_application_that_hangs_before_its_runtime_registers_is_restarted_by_the_next_run(
        testbed, testbed_db, two_hosts):
    bed_command(testbed, "fault", "awa-app-2", "hang")
    stopped = run(testbed, 4, two_hosts)

    assert stopped.returncode != 0
    message = failure_message(stopped.stdout)
    hung = program_pids(testbed)["awa-app-2"]
    assert message.startswith(f"Rollout stopped at batch 2 of 2 (producer-b/awa-app-2): producer-b/awa-app-2 did not "
                              f"come back: it runs (pid {hung}) but no live Awa runtime has its pid - it hangs before "
                              "its runtime registers, or it is in a restart loop; 0 of 1 restarted runtimes")
    assert '"enqueue_shards_queues": [{"queue": "demo", "shards": 1}]' in message  # the back-out

    # The fault is removed; the hung process still runs, started after the change. The same change again:
    bed_command(testbed, "fault", "awa-app-2", "none")
    finished = run(testbed, 4, two_hosts)

    assert finished.returncode == 0, finished.stdout
    # Its host's only service hangs: no runtime is tied to a service there, so the host is judged by count.
    assert ("producer-b/awa-app-2: restart - the inventory runs 1 of 2 runtimes on the count and its runtimes cannot "
            "be told apart from the others by pid") in finished.stdout
    assert program_pids(testbed)["awa-app-2"] != hung
    assert summary_row(finished.stdout)[1:3] == ["1 -> 4", "2 of 2"]
    assert "inventory: 2 of 2 runtimes of the producer services live on the count" in finished.stdout
    assert shard_counts(testbed_db)["demo"] == 4


def test_a_rollout_stopped_half_way_by_a_restart_loop_is_backed_out_as_printed(testbed, testbed_db, two_hosts):
    bed_command(testbed, "fault", "awa-app-2", "crash")
    stopped = run(testbed, 6, two_hosts)

    assert stopped.returncode != 0
    message = failure_message(stopped.stdout)
    assert message.startswith("Rollout stopped at batch 2 of 2 (producer-b/awa-app-2): producer-b/awa-app-2 did not "
                              "come back"), message
    assert shard_counts(testbed_db)["demo"] == 6, "the change itself is committed"
    # The stopped window's record: what is done and what is left, for the change ticket.
    report_path = message.split("The window's report: ", 1)[1].split(". To back out", 1)[0]
    # awa-app-2 restarted, into its restart loop: not done.
    assert "So far restarted: producer-a/awa-app-1, producer-b/awa-app-2; not done: producer-b/awa-app-2." in message
    report = json.loads(Path(report_path).read_text(encoding="utf-8"))
    assert Path(report_path).parent == testbed and report["stopped"]["message"].startswith(message[:60])
    outcome = report["outcome"]
    assert (outcome["done"], outcome["stopped_at"]) == (
        False, "Batch | wait for the runtimes of the services it restarted, watch it for its pause, and judge it")
    assert {key: outcome["queues"]["demo"][key] for key in ("asked", "after", "converged")} == {
        "asked": 6, "after": 6, "converged": False}
    assert outcome["services"] == {"restarted": ["producer-a/awa-app-1", "producer-b/awa-app-2"], "skipped": [],
                                   "left": ["producer-b/awa-app-2"]}
    assert outcome["backout"] == message[message.index("To back out"):]
    assert report["batches"][-1]["ok"] is False

    # The operator repairs the application and backs the change out with the command the stop printed.
    bed_command(testbed, "fault", "awa-app-2", "none")
    # As printed, from another directory than the window's.
    elsewhere = two_hosts.parent / "elsewhere"
    elsewhere.mkdir()
    backout = subprocess.run(backout_argv(message), env={**ansible_env(), "AWA_TESTBED_STATE": str(testbed)},
                             capture_output=True, text=True, timeout=300, check=False, cwd=elsewhere)

    assert backout.returncode == 0, backout.stdout
    assert "demo: enqueue_shards 6 -> 4 on demo - changed in one transaction" in backout.stdout
    assert shard_counts(testbed_db)["demo"] == 4
    assert summary_row(backout.stdout)[1:][::4] == ["6 -> 4", "yes / yes"]  # and the retired shards drained
    settled = subprocess.run([*TESTBED, "status", "--state", str(testbed), "--settled", "5", "--wait", "120"],
                             capture_output=True, text=True, check=True).stdout
    assert "every one completed exactly once" in settled, settled


def test_the_health_gates_stop_the_rollout_naming_gate_reading_and_limit(testbed, testbed_db, two_hosts):
    ctl = " ".join(environment.load_state(testbed)["supervisorctl"])
    python = f"{sys.executable} -m awa_testbed"
    # Before the canary restarts: two sessions deadlock, jobs that fail for good, jobs that will be retried.
    bad_change = (f"sh -c '{python} deadlock --state {testbed} && "
                  f"{python} enqueue --state {testbed} --count 3 --failing --max-attempts 1 && "
                  f"{python} enqueue --state {testbed} --count 3 --failing --max-attempts 9 && "
                  f'exec {ctl} restart "$0"\' {{service}}')
    before = program_pids(testbed)

    stopped = run(testbed, 5, two_hosts, restart_command=bad_change, canary_pause=5, max_deadlocks=0,
                  max_failed_jobs=0, max_retried_jobs=0)

    assert stopped.returncode != 0
    message = failure_message(stopped.stdout)
    assert message.startswith("Rollout stopped at batch 1 of 2 (producer-a/awa-app-1): health gate deadlocks: ")
    for gate, variable in (("deadlocks", "max_deadlocks"), ("failed_jobs", "max_failed_jobs"),
                           ("retried_jobs", "max_retried_jobs")):
        assert f"health gate {gate}: " in message and f"over the limit of 0 (enqueue_shards_{variable})" in message
    assert "then back out" in message and '"enqueue_shards_queues": [{"queue": "demo", "shards": 4}]' in message
    after = program_pids(testbed)
    assert after["awa-app-1"] != before["awa-app-1"] and after["awa-app-2"] == before["awa-app-2"]


def test_a_producer_host_that_does_not_answer_stops_the_window_or_is_left_out_within_the_limit(
        testbed, testbed_db, tmp_path):
    inventory = producer_inventory(tmp_path, {"localhost": {}, "vanished": {
        "ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": free_port()}})
    database, pids = snapshot(testbed_db), program_pids(testbed)

    stopped = run(testbed, 6, inventory)

    assert stopped.returncode != 0
    assert failure_message(stopped.stdout).startswith(
        "Nothing was changed: 1 of 2 producer host(s) unreachable (50%, over enqueue_shards_max_fail_percentage 0): "
        "vanished (")
    assert "awa-app-1, awa-app-2 not checked or restarted" in failure_message(stopped.stdout)
    assert (snapshot(testbed_db), program_pids(testbed)) == (database, pids)

    went_on = run(testbed, 6, inventory, max_fail_percentage=50)

    assert went_on.returncode != 0, "never converged for the inventory"
    assert shard_counts(testbed_db)["demo"] == 6
    assert all(program_pids(testbed)[name] != pid for name, pid in pids.items())
    assert summary_row(went_on.stdout)[2] == "2 of 4" and summary_row(went_on.stdout)[5] == "no / no"
    assert "skipped, not checked or restarted (host unreachable): vanished/awa-app-1, vanished/awa-app-2" in went_on.stdout
    assert failure_message(went_on.stdout).startswith(
        "The change window is not done for the inventory: 2 of 4 inventory runtimes live on the count; not done: "
        "vanished/awa-app-1 (its host is unreachable), vanished/awa-app-2 (its host is unreachable)")
