"""The role awa.operations.enqueue_shards through its playbook, on a whole test bed.

PostgreSQL 18, a least-privilege Awa database and two Awa applications
(worker runtime and producer) under supervisord, as in the demo. These tests
cover what the role refuses before it changes anything, and a rolling restart
whose first batch does not come back: the rollout stops there, and the next
run finishes it. The happy path (check mode, raise, idempotence, lowering with
drain) runs in molecule on PostgreSQL 17 and 18 (extensions/molecule).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from awa_testbed import environment
from awa_testbed.awadb import AwaDatabase
from awa_testbed.pgserver import PgServer
from awa_testbed.supervisor import Supervisor
from enqueue_shards_support import ansible_command, shard_counts, snapshot

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "extensions" / "testbed" / "inventory.yml"
PLAYBOOK = REPO / "playbooks" / "set_enqueue_shards.yml"


@pytest.fixture(scope="module")
def testbed() -> Iterator[Path]:
    state_dir = Path(tempfile.mkdtemp(prefix="awa-rollout-"))
    try:
        environment.up(state_dir, major=18, apps=2, queue="demo")
        yield state_dir
    finally:
        environment.down(state_dir)


@pytest.fixture(scope="module")
def awa_db(testbed) -> AwaDatabase:
    state = environment.load_state(testbed)
    return AwaDatabase(PgServer.from_description(state["server"]), state["database"], "0.6.9")


def program_pids(state_dir: Path) -> dict[str, int | None]:
    supervisor = Supervisor(state_dir)
    return {name: supervisor.program_pid(name) for name in environment.load_state(state_dir)["programs"]}


def set_enqueue_shards(state_dir: Path, shards: int, **variables) -> subprocess.CompletedProcess:
    """The change-window playbook against the test bed, queue demo -> ``shards``."""
    vars_file = state_dir / "extra-vars.json"
    vars_file.write_text(json.dumps({"enqueue_shards_queues": [{"queue": "demo", "shards": shards}], **variables}),
                         encoding="utf-8")
    return ansible_command("ansible-playbook", "-i", str(INVENTORY), str(PLAYBOOK), "-e", f"@{vars_file}",
                           env_extra={"AWA_TESTBED_STATE": str(state_dir)})


def test_invalid_input_is_refused_before_anything_changes(testbed, awa_db):
    before, pids = snapshot(awa_db), program_pids(testbed)

    process = set_enqueue_shards(testbed, 65, enqueue_shards_batch_size=0, enqueue_shards_restart_command="",
                                 enqueue_shards_converge_timeout=0)

    assert process.returncode != 0
    assert "Invalid input for localhost, nothing was changed" in process.stdout
    for problem in ("shards must be between 1 (strict FIFO) and 64, got: demo=65",
                    "enqueue_shards_batch_size must be at least 1, got 0",
                    "enqueue_shards_restart_command is empty",
                    "timeouts must be greater than 0 and at most 86400 seconds: enqueue_shards_converge_timeout=0"):
        assert problem in process.stdout, problem
    assert (snapshot(awa_db), program_pids(testbed)) == (before, pids)


def test_preflight_refuses_missing_lanes_when_repair_is_off(testbed, awa_db):
    # The applications created only the lanes they wrote to, lazily: priorities 1, 3 and 4 are missing.
    before, pids = snapshot(awa_db), program_pids(testbed)

    process = set_enqueue_shards(testbed, 4, enqueue_shards_repair=False)

    assert process.returncode != 0
    assert "Preflight refused queue demo, nothing was changed: lanes or runtime-role grants are missing" \
        in process.stdout
    assert (snapshot(awa_db), program_pids(testbed)) == (before, pids)


def test_a_batch_that_does_not_come_back_stops_the_rollout_and_the_next_run_finishes_it(testbed, awa_db):
    pids = program_pids(testbed)

    # The "restart" restarts nothing, so no new runtime ever comes back.
    stopped = set_enqueue_shards(testbed, 4, enqueue_shards_restart_command="true {service}",
                                 enqueue_shards_restart_timeout=4)

    assert stopped.returncode != 0
    assert "Rollout stopped at batch 1 of 2 (localhost/awa-app-1)" in stopped.stdout
    assert "0 of 1 restarted runtimes are live and healthy" in stopped.stdout
    assert "(item=awa-app-2)" not in stopped.stdout, "the second batch was attempted"
    assert shard_counts(awa_db)["demo"] == 4, "the change itself is committed"
    assert program_pids(testbed) == pids

    finished = set_enqueue_shards(testbed, 4)

    assert finished.returncode == 0, finished.stdout
    assert "demo: enqueue_shards 4 -> 4 on demo - already so, nothing written" in finished.stdout
    assert "Restarting 2 producer service(s) in 2 batch(es)" in finished.stdout
    assert all(now != pids[name] for name, now in program_pids(testbed).items())
    assert "demo  | 4 -> 4            | 2 of 2 " in finished.stdout
