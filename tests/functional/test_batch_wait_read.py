"""The rollout's batch wait reads only what its verdict needs (``lanes: false``), on PostgreSQL 17 and 18.

Between the batches of a rolling restart the role waits with its internal
read (``awa.operations.__role.enqueue_shards_rollout_info``), ``wait:
restarted`` and ``health: true``; its verdict reads the runtimes, the new
runtimes and the health counters. Without the lanes a poll reads those, each
queue's count and last change, in the same number of statements for one
queue or ten (benchmarks/batch_wait.py measures 1, 10 and 100), and says the
same of them as the full read. Given the services a batch restarted, it waits
for their runtimes (their pids) and for no other new runtime.
"""

from __future__ import annotations

import json

import pytest

from awa_testbed.environment import wait_for_live_runtimes

from ansible_collections.awa.operations.plugins.module_utils.db.connection import open_connection
from ansible_collections.awa.operations.plugins.module_utils.info.wait import ReadSession as Reopening
from ansible_collections.awa.operations.plugins.module_utils.info.views import LANE_KEYS
from ansible_collections.awa.operations.plugins.module_utils.info.wait import wait_in_session

from benchmarks.tracing import protocol_trace
from enqueue_shards_support import ansible_command, ansible_python, change

# The change window on the floor core too (conftest.py, --floor-python).
pytestmark = pytest.mark.floor

QUEUES = [f"batch{n}" for n in range(10)]
ROLE_READ = "awa.operations.__role.enqueue_shards_rollout_info"


def poll(conn, queues: list[str], *, lanes: bool, known: tuple[str, ...] = ()) -> tuple[dict, int]:
    """One poll of the batch wait as the role asks for it; the read and its statements on the wire."""
    with protocol_trace(conn) as wire:
        read = wait_in_session(Reopening(conn, None), "none", 0, 1, health=True, queues=queues, known_runtimes=known,
                               expected_new_runtimes=1, lanes=lanes)
    return read, wire.statements


def runtimes_of(read: dict) -> list[tuple]:
    return [(view["instance_id"], view["live"], view["converged"], view["pending_queues"]) for view in read["runtimes"]]


def test_a_poll_without_lanes_says_what_the_verdict_reads_in_the_same_statements_for_one_queue_or_ten(awa_db, fleet):
    for queue in QUEUES:
        change(awa_db, queue, 4)
    worker = fleet.worker("w", [f"{QUEUES[0]}=4"])  # started after the changes: on every count
    # The poll below reads no more than once: a new runtime counts once it is live and healthy.
    wait_for_live_runtimes(awa_db, [worker.pid], 30, healthy=True)
    change(awa_db, QUEUES[1], 8)  # and now a straggler of this one
    with open_connection(awa_db.login_args()) as conn:
        one, one_statements = poll(conn, QUEUES[:1], lanes=False)
        light, light_statements = poll(conn, QUEUES, lanes=False)
        full, full_statements = poll(conn, QUEUES, lanes=True)

    assert one_statements == light_statements < full_statements, (one_statements, light_statements, full_statements)
    assert [view["pid"] for view in light["new_runtimes"]] == [worker.pid] and light["expected_new_runtimes"] == 1
    assert runtimes_of(light) == runtimes_of(full) and runtimes_of(light)[0][3] == [QUEUES[1]]
    assert light["converged"] is full["converged"] is False
    assert {key: light["health"][key] for key in ("deadlocks", "queues")} == {
        key: full["health"][key] for key in ("deadlocks", "queues")}
    assert set(light["health"]["queues"]) == set(QUEUES)
    assert "drained" not in light and not any(key in view for view in light["queues"].values() for key in LANE_KEYS)
    assert all(key in full["queues"][QUEUES[0]] for key in LANE_KEYS)


def test_the_role_s_wait_for_restarted_runtimes_without_lanes_through_ansible(awa_db, fleet):
    change(awa_db, "orders", 4)
    worker = fleet.worker("w", ["orders=4"])
    wait_for_live_runtimes(awa_db, [worker.pid], 30)
    # detail: as the role asks (its module defaults), for the new runtimes.
    args = {**awa_db.login_args(), "queues": ["orders"], "wait": "restarted", "expected_new_runtimes": 1,
            "known_runtimes": [], "health": True, "lanes": False, "wait_timeout": 60, "wait_sleep": 0.5, "detail": True}
    process = ansible_command("ansible", "localhost", "-m", ROLE_READ,
                              "-a", json.dumps(args), env_extra={"ANSIBLE_PYTHON_INTERPRETER": str(ansible_python())})
    assert process.returncode == 0, process.stdout + process.stderr
    result = json.loads(process.stdout[process.stdout.index("{", process.stdout.find("localhost | ")):])
    assert "done: 1/1 restarted runtimes live and healthy; orders: 1/1 runtimes on 4 shards\n" in process.stdout
    assert [view["pid"] for view in result["new_runtimes"]] == [worker.pid] and result["health"]["queues"]["orders"]
    assert result["waited"] and "lanes" not in result["queues"]["orders"] and "drained" not in result

    args.update(wait="drained")
    refused = ansible_command("ansible", "localhost", "-m", ROLE_READ,
                              "-a", json.dumps(args), env_extra={"ANSIBLE_PYTHON_INTERPRETER": str(ansible_python())})
    assert refused.returncode != 0 and "lanes=false reads no lane depths" in refused.stdout


def test_the_role_s_wait_for_the_services_it_restarted_waits_for_their_pids_and_nothing_else(awa_db, fleet):
    change(awa_db, "orders", 4)
    restarted, elsewhere = fleet.worker("restarted", ["orders=4"]), fleet.worker("elsewhere", ["orders=4"])
    wait_for_live_runtimes(awa_db, [restarted.pid, elsewhere.pid], 30)
    args = {**awa_db.login_args(), "queues": ["orders"], "wait": "restarted", "known_runtimes": [], "lanes": False,
            "restarted_services": [{"reports_as": [{"pid": restarted.pid}]}], "wait_timeout": 60,
            "wait_sleep": 0.5, "detail": True}
    process = ansible_command("ansible", "localhost", "-m", ROLE_READ,
                              "-a", json.dumps(args), env_extra={"ANSIBLE_PYTHON_INTERPRETER": str(ansible_python())})
    assert process.returncode == 0, process.stdout + process.stderr
    result = json.loads(process.stdout[process.stdout.index("{", process.stdout.find("localhost | ")):])
    # The other new runtime does not stand in for the restarted service's: it is not one of the new runtimes.
    assert [view["pid"] for view in result["new_runtimes"]] == [restarted.pid] and result["expected_new_runtimes"] == 1

    # A service whose runtime never comes: the wait times out, though another new runtime is live.
    args.update(restarted_services=[{"reports_as": [{"pid": 1}]}], wait_timeout=2)
    timed_out = ansible_command("ansible", "localhost", "-m", ROLE_READ,
                                "-a", json.dumps(args), env_extra={"ANSIBLE_PYTHON_INTERPRETER": str(ansible_python())})
    assert timed_out.returncode != 0 and "0 of 1 restarted runtimes are live and healthy" in timed_out.stdout
