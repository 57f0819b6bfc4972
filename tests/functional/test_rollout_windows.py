"""The change window as large fleets and AWX run it: a batch's hosts at once, two windows at once, a producer that
starts outside the window - on PostgreSQL 17 and 18 (issue 48).

The demo's test bed with four Awa applications under supervisord, each
inventory host a part of this machine (a local connection; the test bed's
restart and status commands, the status command printing each program's
pid): every runtime is told apart by pid. The tests run in order on one bed
per major, each raising queue demo's count once more:

* with every restart slow and the whole fleet in one batch, the restarts of
  the batch's hosts overlap, each with every other; a producer that starts
  outside the inventory meanwhile (a deploy, an autoscaler) does not stand in
  for the batch's own restarts: the window finishes and names it as outside;
* two windows at once on disjoint ``--limit``s (AWX's job slicing runs a job
  template so) both finish: the count switched once, each service restarted
  once, every runtime on the count, each window naming the other's runtimes
  as outside it and never waiting for them.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from awa_testbed import environment
from awa_testbed.processes import worker
from awa_testbed.waiting import wait_until
from enqueue_shards_support import info, ledger_rows, shard_counts
from rollout_support import (HOSTS, hosts_inventory, outside_pids, program_pids, restart_command, restarted,
                             start_enqueue_shards)

# A window's wall clock bound: it only bounds how long a broken run takes to fail.
WINDOW_SECONDS = 600


def finished(window: subprocess.Popen, output: Path) -> tuple[int, str]:
    """The window's exit status and its output, once it has ended."""
    code = window.wait(timeout=WINDOW_SECONDS)
    return code, output.read_text(encoding="utf-8")


def converge_wait_totals(output: str) -> set[int]:
    """The runtimes the convergence wait counted on each poll (``demo: N/TOTAL runtimes``): the window's own."""
    task = output.split("Wait | until every live runtime of the window runs with the new count", 1)[1].split("TASK [", 1)[0]
    return {int(total) for total in re.findall(r"demo: \d+/(\d+) runtimes", task)}


def test_a_batch_s_hosts_restart_at_once_and_a_producer_started_meanwhile_is_outside_the_window(fleet_bed, tmp_path):
    state_dir, db = fleet_bed
    hosts = {f"producer-{index}": [program] for index, program in enumerate(environment.load_state(state_dir)["programs"])}
    # Every restart is slow and says when it began and ended; awa-app-1's waits until the test has started a
    # producer outside the inventory while the batch's other restarts run.
    log, go = shlex.quote(str(tmp_path)), shlex.quote(str(tmp_path / "go"))
    command = restart_command(state_dir, tmp_path, before=(
        f'date +%s.%N > {log}/"$1".began; if [ "$1" = awa-app-1 ]; then touch {log}/waiting; '
        f'while [ ! -e {go} ]; do sleep 0.1; done; else sleep 3; fi'), after=f'date +%s.%N > {log}/"$1".ended')
    shards = shard_counts(db).get("demo", 1) + 1
    before = program_pids(state_dir)

    window = start_enqueue_shards(state_dir, shards, inventory=hosts_inventory(tmp_path, hosts), output=tmp_path / "out",
                                  batch_size="100%", restart_command=command)
    wait_until((tmp_path / "waiting").exists, WINDOW_SECONDS, "the batch's restarts")
    outsider = worker("outsider", environment.load_state(state_dir)["runtime_url"], ["demo"], log_dir=tmp_path).start()
    try:
        environment.wait_for_live_runtimes(db, [outsider.pid])
        (tmp_path / "go").touch()
        code, output = finished(window, tmp_path / "out")

        assert code == 0, output
        assert "Restarting 4 producer service(s) on 4 host(s) in 1 batch(es)" in output
        assert sorted(restarted(tmp_path)) == sorted(before)
        began, ended = ({program: float((tmp_path / f"{program}.{end}").read_text(encoding="utf-8"))
                         for program in before} for end in ("began", "ended"))
        # Each restart began before any other ended: every one overlaps every other.
        assert max(began.values()) < min(ended.values()), (began, ended)
        assert all(program_pids(state_dir)[program] != pid for program, pid in before.items())
        # The batch's wait counted the runtimes of its own four restarts, not the outsider's, which no service runs:
        # outside the window, named, not restarted.
        assert "Batch 1 of 1 is back: 4 of 4 restarted runtimes live and healthy" in output
        assert outsider.pid in outside_pids(output), output
        assert "inventory: 4 of 4, 1 outside runtimes of the producer services live on the count" in output
        assert outsider.running()
    finally:
        outsider.stop()


def test_two_windows_at_once_on_disjoint_limits_each_restart_their_own_and_name_the_other_s_outside(fleet_bed, tmp_path):
    state_dir, db = fleet_bed
    inventory = hosts_inventory(tmp_path, HOSTS)
    command = restart_command(state_dir, tmp_path)
    shards = shard_counts(db).get("demo", 1) + 1
    recorded, before = len(ledger_rows(db)), program_pids(state_dir)
    limits = {"producer-a": ["awa-app-1", "awa-app-2"], "producer-b,producer-c": ["awa-app-3", "awa-app-4"]}

    records = set(state_dir.glob("enqueue_shards-*.json"))
    windows = {limit: start_enqueue_shards(state_dir, shards, "--limit", limit, inventory=inventory,
                                           output=tmp_path / f"{limit}.out", batch_size=1, restart_command=command)
               for limit in limits}
    outcomes = {limit: finished(window, tmp_path / f"{limit}.out") for limit, window in windows.items()}
    # Started in the same second, each kept a record of its own.
    written = [json.loads(path.read_text(encoding="utf-8")) for path in set(state_dir.glob("enqueue_shards-*.json"))
               - records]
    assert sorted(sorted(record["outcome"]["services"]["restarted"]) for record in written) == [
        ["producer-a/awa-app-1", "producer-a/awa-app-2"], ["producer-b/awa-app-3", "producer-c/awa-app-4"]]

    assert [code for code, dummy in outcomes.values()] == [0, 0], outcomes
    # The count was switched once, by one of them; each service was restarted once, by its own window.
    assert shard_counts(db)["demo"] == shards and len(ledger_rows(db)) == recorded + 1
    assert sorted(restarted(tmp_path)) == sorted(before)
    after = program_pids(state_dir)
    read = info(db, queue="demo")
    live = {runtime["pid"] for runtime in read["runtimes"] if runtime["live"]}
    assert read["converged"] and live == set(after.values()), read["summary_lines"]
    for limit, (dummy, output) in outcomes.items():
        others = {pids[program] for pids in (before, after) for program in before if program not in limits[limit]}
        # Each names the other's runtimes as outside it, and its convergence wait counted only its own two.
        assert outside_pids(output) and outside_pids(output) <= others, (limit, others, output)
        assert converge_wait_totals(output) == {len(limits[limit])}, output
