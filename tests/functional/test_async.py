"""Both modules under Ansible's ``async`` (AWX's long waits): real ansible-playbook runs on PostgreSQL 17 and 18.

Each playbook runs a module with ``async`` and ``poll`` above 0 (Ansible polls
the job itself), then with ``poll: 0`` followed by ``async_status`` until the
job ends, as AWX users write it. For the info module the wait really waits:
a real Awa runtime keeps the old count until the test restarts it, several
polls into each wait.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from awa_testbed.environment import wait_for_live_runtimes

from enqueue_shards_support import ansible_env, change, ledger_rows, shard_counts, wait_until

PLAYBOOK_TIMEOUT = 240.0


def write_playbook(folder: Path, login: dict, tasks: list[dict], record: list[str]) -> Path:
    """A play on localhost with the connection as module_defaults, whose last task writes the ``record``ed
    registered results to results.json."""
    results = folder / "results.json"
    recorded = "{{ {" + ", ".join(f"'{name}': {name}" for name in record) + "} | to_json }}"
    play = [{
        "name": "awa.operations under async",
        "hosts": "localhost",
        "gather_facts": False,
        "module_defaults": {"group/awa.operations.awa": login},
        "tasks": [*tasks, {"name": "Record the results",
                           "ansible.builtin.copy": {"content": recorded, "dest": str(results), "mode": "0600"}}],
    }]
    path = folder / "playbook.yml"
    path.write_text(json.dumps(play, indent=2), encoding="utf-8")
    return path


def start_playbook(playbook: Path, log: Path) -> subprocess.Popen:
    """ansible-playbook from this interpreter's environment, its output in ``log``."""
    executable = Path(sys.executable).parent / "ansible-playbook"
    with log.open("w", encoding="utf-8") as output:
        return subprocess.Popen([str(executable), str(playbook)], stdout=output, stderr=subprocess.STDOUT,
                                env={**ansible_env(), "ANSIBLE_PYTHON_INTERPRETER": sys.executable})


def finished(process: subprocess.Popen, log: Path) -> tuple[str, dict]:
    """Wait for the playbook to end; its output and recorded results."""
    try:
        process.wait(timeout=PLAYBOOK_TIMEOUT)
    finally:
        process.kill()
    output = log.read_text(encoding="utf-8")
    assert process.returncode == 0, output
    return output, json.loads((log.parent / "results.json").read_text(encoding="utf-8"))


def lines_after(log: Path, marker: str, line: str) -> int:
    """How often ``line`` appears in the output after ``marker`` (a task's banner)."""
    output = log.read_text(encoding="utf-8")
    return output[output.index(marker):].count(line) if marker in output else 0


def test_the_change_module_under_async_polled_and_followed_with_async_status(awa_db, tmp_path):
    tasks = [
        {"name": "Raise under async, polled by Ansible", "awa.operations.awa_enqueue_shards":
            {"queue": "async_polled", "shards": 4, "new_queue": True}, "async": 60, "poll": 1, "register": "polled"},
        {"name": "Raise under async in the background", "awa.operations.awa_enqueue_shards":
            {"queue": "async_background", "shards": 2, "new_queue": True}, "async": 60, "poll": 0, "register": "started"},
        {"name": "Follow the background raise", "ansible.builtin.async_status": {"jid": "{{ started.ansible_job_id }}"},
         "register": "followed", "until": "followed.finished", "retries": 60, "delay": 1},
    ]
    playbook = write_playbook(tmp_path, awa_db.login_args(), tasks, ["polled", "started", "followed"])

    output, results = finished(start_playbook(playbook, tmp_path / "output.log"), tmp_path / "output.log")

    polled, started, followed = results["polled"], results["started"], results["followed"]
    assert polled["ansible_job_id"] and polled["finished"] is True and not polled.get("failed"), output
    assert (polled["changed"], polled["queue"], polled["shards"], polled["lanes_created"]) == (
        True, "async_polled", 4, 16)
    assert started["ansible_job_id"] and (started["started"], started["finished"]) == (True, False)
    assert followed["finished"] is True and not followed.get("failed"), output
    assert (followed["changed"], followed["queue"], followed["shards"], followed["lanes_created"]) == (
        True, "async_background", 2, 8)
    assert shard_counts(awa_db) == {"async_polled": 4, "async_background": 2}
    assert [(row["to_shards"], row["physical_queues"]) for row in ledger_rows(awa_db)] == [
        (4, ["async_polled"]), (2, ["async_background"])]


WAIT = {"queue": "async_wait", "wait": "converged", "wait_timeout": 90, "wait_sleep": 1}
POLLED_TASK = "Wait under async, polled by Ansible"
FOLLOW_TASK = "Follow the background wait"


def test_the_info_modules_wait_under_async_polled_and_followed_with_async_status(awa_db, fleet, tmp_path):
    worker = fleet.worker("w", ["async_wait"])
    wait_for_live_runtimes(awa_db, [worker.pid], 30)
    change(awa_db, "async_wait", 2)  # the runtime keeps 1 until it restarts
    tasks = [
        {"name": "Refused: async shorter than wait_timeout", "awa.operations.awa_enqueue_shards_info":
            {**WAIT, "wait_timeout": 300}, "async": 30, "poll": 0, "register": "refused", "ignore_errors": True},
        {"name": POLLED_TASK, "awa.operations.awa_enqueue_shards_info": WAIT, "async": 120, "poll": 1,
         "register": "polled"},
        {"name": "Change the count again", "awa.operations.awa_enqueue_shards": {"queue": "async_wait", "shards": 4}},
        {"name": "Wait under async in the background", "awa.operations.awa_enqueue_shards_info": WAIT,
         "async": 120, "poll": 0, "register": "started"},
        {"name": FOLLOW_TASK, "ansible.builtin.async_status": {"jid": "{{ started.ansible_job_id }}"},
         "register": "followed", "until": "followed.finished", "retries": 120, "delay": 1},
    ]
    playbook = write_playbook(tmp_path, awa_db.login_args(), tasks, ["refused", "polled", "started", "followed"])
    log = tmp_path / "output.log"
    process = start_playbook(playbook, log)
    try:
        # Several of Ansible's polls into each wait, the runtime restarts: the wait sees it on its next poll.
        wait_until(lambda: lines_after(log, f"TASK [{POLLED_TASK}]", "ASYNC POLL on localhost") >= 3
                   or process.poll() is not None, PLAYBOOK_TIMEOUT, "three of Ansible's polls of the first wait")
        worker.restart()
        wait_until(lambda: lines_after(log, f"TASK [{FOLLOW_TASK}]", f"FAILED - RETRYING: [localhost]: {FOLLOW_TASK}")
                   >= 3 or process.poll() is not None, PLAYBOOK_TIMEOUT, "three async_status polls of the second wait")
        worker.restart()
    except BaseException:
        process.kill()
        raise
    output, results = finished(process, log)

    refused = results["refused"]
    assert refused["failed"] and "ansible_job_id" not in refused
    assert refused["msg"] == ("async (30s) would end the job before wait_timeout (300s), and Ansible would stop the "
                              "wait without naming what it waited for: give async more seconds than wait_timeout "
                              "(for example async: 360) or a shorter wait_timeout")
    polled, started, followed = results["polled"], results["started"], results["followed"]
    assert polled["ansible_job_id"] and polled["finished"] is True, output
    assert (polled["converged"], polled["waited"], polled["queues"]["async_wait"]["enqueue_shards"]) == (
        True, True, {"async_wait": 2})
    assert polled["polls"] >= 3, polled["polls"]
    assert started["ansible_job_id"] and (started["started"], started["finished"]) == (True, False)
    assert followed["finished"] is True, output
    assert (followed["converged"], followed["waited"], followed["queues"]["async_wait"]["enqueue_shards"]) == (
        True, True, {"async_wait": 4})
    assert followed["polls"] >= 3, followed["polls"]
    # A detached job cannot print: the wait's progress lines appear only without async.
    assert "waiting until converged" not in output
