"""The role awa.operations.enqueue_shards through its playbook, on a whole test bed.

PostgreSQL 18, a least-privilege Awa database and two Awa applications
(worker runtime and producer) under supervisord, as in the demo; the restart
contract's status command tells the role when each program started. The tests
run in order on the one bed and tell a change window's rough days: a dry run
that says what is planned and what is true now, a restart that fails in the
middle of a batch, the re-run that restarts only what still runs the old
count, a runtime outside the inventory (named, not waited for), and a
lowering of a paused queue.
The happy path over real systemd hosts runs in molecule (extensions/molecule).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from awa_testbed import environment
from awa_testbed.binaries import awa_cli
from awa_testbed.processes import worker
from enqueue_shards_support import shard_counts, snapshot
from rollout_support import PLAYBOOK, TESTBED_INVENTORY, program_pids, set_enqueue_shards, summary_row

# The change window on the floor core too (conftest.py, --floor-python).
pytestmark = pytest.mark.floor


def test_preflight_refuses_missing_lanes_when_repair_is_off(testbed, testbed_db):
    # The applications created only the lanes they wrote to, lazily: priorities 1, 3 and 4 are missing.
    before, pids = snapshot(testbed_db), program_pids(testbed)

    process = set_enqueue_shards(testbed, 4, repair=False)

    assert process.returncode != 0
    assert "Preflight refused queue demo, nothing was changed: lanes or runtime-role grants are missing" \
        in process.stdout
    assert (snapshot(testbed_db), program_pids(testbed)) == (before, pids)


def test_check_mode_says_what_is_planned_and_what_is_true_now(testbed, testbed_db):
    before, pids = snapshot(testbed_db), program_pids(testbed)

    process = set_enqueue_shards(testbed, 4, "--check", "--diff", batch_size=[1, "100%"])

    assert process.returncode == 0, process.stdout
    assert ("Check mode: would restart 2 producer service(s) on 1 host(s) in 1 batch(es) of 1 host(s) "
            "(enqueue_shards_batch_size 1, 100%): [localhost/awa-app-1, localhost/awa-app-2]") in process.stdout
    row = summary_row(process.stdout)
    # The demo's applications enqueue and work all along: shard 0 may hold a ready job at the moment of the read.
    assert row[:3] + row[4:] == ["demo", "1 -> 4", "0 of 2 (they restart)", "0", "not yet (check mode)"]
    assert re.fullmatch(r"0:\d+", row[3]), row
    assert (snapshot(testbed_db), program_pids(testbed)) == (before, pids)


def test_a_restart_that_fails_stops_the_rollout_with_its_own_message(testbed, testbed_db):
    pids = program_pids(testbed)
    ctl = " ".join(environment.load_state(testbed)["supervisorctl"])
    # Both programs are one batch; the restart of awa-app-2 exits 3 with a message, awa-app-1's works.
    command = f"sh -c 'if [ \"$0\" = awa-app-2 ]; then echo \"no such unit: $0\" >&2; exit 3; fi; exec {ctl} restart \"$0\"' {{service}}"

    stopped = set_enqueue_shards(testbed, 4, batch_size=2, restart_command=command)

    assert stopped.returncode != 0
    assert ("Rollout stopped at batch 1 of 1 (localhost/awa-app-1, localhost/awa-app-2): localhost/awa-app-2 did not "
            "come back: the restart failed: exit status 3: no such unit: awa-app-2. Health readings: deadlocks 0; "
            "failed jobs 0; retried jobs 0. No later batch was restarted.") in stopped.stdout
    assert "ansible_failed_task" not in stopped.stdout
    # The neighbour in the batch was restarted and its health checked: it came back.
    assert "1/1 restarted runtimes live and healthy" in stopped.stdout
    assert "localhost/awa-app-1 did not" not in stopped.stdout
    after = program_pids(testbed)
    assert after["awa-app-1"] != pids["awa-app-1"] and after["awa-app-2"] == pids["awa-app-2"]
    assert shard_counts(testbed_db)["demo"] == 4, "the change itself is committed"


def seconds(text: str) -> float:
    """A duration as the role says it (``45s``, ``14 min``, ``2 h 5 min``), in seconds."""
    units = {"s": 1, "min": 60, "h": 3600}
    return sum(float(number) * units[unit] for number, unit in re.findall(r"(\d+(?:\.\d+)?) ?(s|min|h)\b", text))


def estimate_bounds(output: str) -> tuple[float, float]:
    """The bounds of the window's time its preflight said, before the change."""
    said = re.search(r"The window should take about [^;]+; at least (.+?) \(the pauses\), at most (.+?) \(the timeouts",
                     output)
    assert said, output
    return seconds(said.group(1)), seconds(said.group(2))


def test_the_re_run_restarts_only_what_still_runs_the_old_count(testbed):
    pids = program_pids(testbed)

    finished = set_enqueue_shards(testbed, 4)

    assert finished.returncode == 0, finished.stdout
    assert "demo: enqueue_shards 4 -> 4 on demo - already so, nothing written" in finished.stdout
    assert "Restarting 1 producer service(s) on 1 host(s) in 1 batch(es) of at most 1 host(s): [localhost/awa-app-2]" in finished.stdout
    assert f"localhost/awa-app-1: left alone - its runtime (pid {pids['awa-app-1']}) runs the count" in finished.stdout
    assert (f"localhost/awa-app-2: restart - its runtime (pid {pids['awa-app-2']}) runs an older count"
            in finished.stdout)
    after = program_pids(testbed)
    assert after["awa-app-1"] == pids["awa-app-1"] and after["awa-app-2"] != pids["awa-app-2"]
    assert summary_row(finished.stdout)[1:3] == ["1 -> 4", "2 of 2"]
    # A successful summary ends with the window's start and end and the back-out; so does its report.
    window = re.search(r'"The window: (\S+ \S+) -> (\S+) UTC \(.*, the database\'s clock\)\."', finished.stdout)
    assert window, finished.stdout
    # The window's variables file (rollout_support writes one a window), as the run was given it.
    [variables] = set(re.findall(rf"-e @({re.escape(str(testbed))}/extra-vars-\w+\.json)", finished.stdout))
    backout = ("To back out (the previous counts, the same options): ansible-playbook -i "
               f"{TESTBED_INVENTORY} -e @{variables} {PLAYBOOK} -e "
               "'{\"enqueue_shards_queues\": [{\"queue\": \"demo\", \"shards\": 1}]}'")
    assert json.dumps(backout) in finished.stdout  # the summary's line, as the callback prints it
    report_path = re.search(r"The window's report: (\S+?)\. Its outcome is published as awa_enqueue_shards_outcome",
                            finished.stdout).group(1)
    outcome = json.loads(Path(report_path).read_text(encoding="utf-8"))["outcome"]
    assert (outcome["done"], outcome["stopped_at"], outcome["backout"], outcome["backout_queues"]) == (
        True, None, backout, [{"queue": "demo", "shards": 1}])
    assert outcome["started"].replace("T", " ")[:19] == window.group(1)
    # Said before the change: how long it should take, within bounds the window's real time keeps.
    least, most = estimate_bounds(finished.stdout)
    assert least <= outcome["total_seconds"] <= most, (least, outcome["total_seconds"], most)
    assert outcome["services"] == {"restarted": ["localhost/awa-app-2"], "skipped": [], "left": []}

    again = set_enqueue_shards(testbed, 4)

    assert again.returncode == 0 and "No producer service to restart." in again.stdout
    assert program_pids(testbed) == after


def test_a_runtime_outside_the_inventory_is_named_outside_the_window_not_waited_for(testbed, testbed_db, tmp_path):
    pids = program_pids(testbed)
    state = environment.load_state(testbed)
    outsider = worker("outsider", state["runtime_url"], ["demo"], log_dir=tmp_path).start()
    try:
        environment.wait_for_live_runtimes(testbed_db, [outsider.pid])
        # The count changes while the outsider runs: the inventory's programs are restarted; every one of them is
        # told apart by pid, so the outsider is no service's - outside the change window, named, not waited for.
        process = set_enqueue_shards(testbed, 6, converge_timeout=60)
        assert process.returncode == 0, process.stdout
        outside = [line for line in process.stdout.splitlines() if "outside the change window" in line]
        assert len(outside) == 2 and all(f"pid {outsider.pid} on host" in line for line in outside), outside
        assert "Restarting 2 producer service(s) on 1 host(s) in 1 batch(es)" in process.stdout
        assert "inventory: 2 of 2, 1 outside runtimes of the producer services live on the count" in process.stdout
        restarted = program_pids(testbed)
        assert all(restarted[name] != pids[name] for name in pids)

        # The re-run restarts nothing: every program of the inventory already runs the count.
        rerun = set_enqueue_shards(testbed, 6, converge_timeout=60)
        assert rerun.returncode == 0 and "No producer service to restart." in rerun.stdout
        assert f"pid {outsider.pid} on host" in rerun.stdout
        assert program_pids(testbed) == restarted
    finally:
        outsider.stop()


def test_a_raise_restarts_only_the_services_that_enqueue_into_the_queue(testbed, testbed_db):
    """awa-app-2 declares that it enqueues into billing only: the raise of demo leaves it untouched, and the wait
    does not wait for its runtime, which keeps the old count by design."""
    pids = program_pids(testbed)
    shards = shard_counts(testbed_db).get("demo", 1) + 2

    process = set_enqueue_shards(testbed, shards, service_queues={"awa-app-2": ["billing"]})

    assert process.returncode == 0, process.stdout
    assert "Restarting 1 producer service(s) on 1 host(s) in 1 batch(es) of at most 1 host(s): [localhost/awa-app-1]" in process.stdout
    assert ("localhost/awa-app-2: untouched - it enqueues only into billing, which this change does not concern "
            "(enqueue_shards_service_queues)") in process.stdout
    after = program_pids(testbed)
    assert after["awa-app-1"] != pids["awa-app-1"] and after["awa-app-2"] == pids["awa-app-2"]


def test_lowering_a_paused_queue_says_so_and_finishes_once_it_is_resumed(testbed, testbed_db):
    if shard_counts(testbed_db).get("demo", 1) <= 2:  # run alone: raise first, so that 2 is a lowering
        assert set_enqueue_shards(testbed, 6).returncode == 0
    awa = [str(awa_cli()), "--database-url", testbed_db.url()]
    subprocess.run([*awa, "queue", "pause", "demo"], check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "awa_testbed", "enqueue", "--state", str(testbed), "--count", "400"],
                   check=True, capture_output=True)

    stopped = set_enqueue_shards(testbed, 2, drain_timeout=4)

    assert stopped.returncode != 0
    assert "note: demo is paused: its workers claim nothing until it is resumed (awa queue resume demo), so after " \
           "this lowering its old shards cannot drain" in stopped.stdout
    assert "ready beyond the count (paused: nothing drains until it is resumed)" in stopped.stdout
    assert re.search(r"\] +\d+s of 4s waiting until drained: demo: ", stopped.stdout), "each line says its timeout"
    assert "Timed out after" in stopped.stdout and "waiting until drained" in stopped.stdout

    subprocess.run([*awa, "queue", "resume", "demo"], check=True, capture_output=True)
    finished = set_enqueue_shards(testbed, 2, drain_timeout=120)

    assert finished.returncode == 0, finished.stdout
    assert summary_row(finished.stdout)[4:] == ["0", "yes / yes"]
