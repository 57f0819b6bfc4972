"""What an operator sees of an ad hoc change or read of one queue: a screen, with the detail an option away.

Issue 58: with Ansible's YAML callback an ad hoc check-mode change of one queue of 16 shards printed 1,328 lines
and the info module's read of it 1,296 (its summary at line 988) - each lane and shard, each runtime (stale ones
from earlier restarts too), the statements. Without ``detail`` each prints at most 80 lines; with it, all of it.
On PostgreSQL 17 and 18, with real Awa runtimes: 14 live, and 2 rows of runtimes restarted since.
"""

from __future__ import annotations

import json

from awa_testbed.environment import wait_for_live_runtimes

from enqueue_shards_support import ansible_command, change

SCREEN = 80
YAML = {"ANSIBLE_STDOUT_CALLBACK": "default", "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml"}
JSON = {"ANSIBLE_STDOUT_CALLBACK": "default", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}


def adhoc(module: str, args: dict, *flags: str, result_format: dict[str, str]) -> str:
    """``ansible localhost -m awa.operations.MODULE -a JSON -v FLAGS``: what it prints."""
    process = ansible_command("ansible", "localhost", "-m", f"awa.operations.{module}", "-a", json.dumps(args), "-v",
                              *flags, env_extra=result_format)
    assert process.returncode == 0, process.stdout + process.stderr
    return process.stdout


def result_of(printed: str) -> dict:
    """The result the JSON callback printed after ``localhost | STATUS =>`` (a diff, if any, comes first)."""
    return json.loads(printed[printed.index("{", printed.index("localhost | ")):])


def test_one_queue_s_change_and_read_fit_a_screen_and_detail_returns_all_of_it(awa_db, fleet):
    change(awa_db, "orders", 16)
    workers = [fleet.worker(f"worker{index}", ["orders"]) for index in range(14)]
    for worker in workers[:2]:
        worker.restart()  # a new runtime; Awa keeps the row of the one that shut down
    wait_for_live_runtimes(awa_db, [worker.pid for worker in workers], 60)
    assert awa_db.scalar("SELECT count(*) FROM awa.runtime_instances") == 16
    read_args = {**awa_db.login_args(), "queue": "orders"}
    change_args = {**read_args, "shards": 8}

    read = adhoc("awa_enqueue_shards_info", read_args, result_format=YAML)
    changed = adhoc("awa_enqueue_shards", change_args, "--check", "--diff", result_format=YAML)

    assert len(read.splitlines()) <= SCREEN, read
    assert len(changed.splitlines()) <= SCREEN, changed
    for printed in (read, changed):
        assert "  runtimes: 14 of 14 live runtimes on the current count" in printed
        assert "  ready by shard 0:0 1:0 2:0 3:0" in printed
        assert "instance_id" not in printed and "enqueue_cursor" not in printed and "SELECT" not in printed
    assert "+        enqueue_shards: 8" in changed, "the diff"

    full = result_of(adhoc("awa_enqueue_shards_info", {**read_args, "detail": True}, result_format=JSON))
    assert sorted(runtime["live"] for runtime in full["runtimes"]) == [False] * 2 + [True] * 14
    view = full["queues"]["orders"]
    assert (len(view["lanes"]), len(view["shards"]), view["summary_lines"]) == (64, 16, full["summary_lines"])
    assert full["summary"] == "\n".join(full["summary_lines"]) and len(full["new_runtimes"]) == 14
    planned = result_of(adhoc("awa_enqueue_shards", {**change_args, "detail": True}, "--check", result_format=JSON))
    assert planned["queries"] and planned["queries"][-1].startswith("INSERT INTO awa.queue_meta")
    assert len(planned["observed"]["runtimes"]) == 16 and len(planned["observed"]["queues"]["orders"]["lanes"]) == 64
