"""The event source awa.operations.shard_advice and the example rulebook, on real load.

The source is loaded the way ansible-rulebook loads it (by path, from the
collection) and run without Java on PostgreSQL 17 and 18: real awa-pg 0.6.9
producers contend on one lane, and the events are what an operator's rules
see. Then the example rulebook runs end to end under ansible-rulebook (Java 17,
which hack/test.sh installs) against the demo's test bed: the advice changes the
opted-in queue one step with the change-window playbook, and only once.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from psycopg import sql

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.plugin_utils.advice_events import ERROR_KEY, EVENT_KEY

from awa_testbed import environment
from awa_testbed.awadb import AwaDatabase, DbRole
from awa_testbed.collection import collections_path
from awa_testbed.fleet import Fleet
from awa_testbed.pgserver import PgServer
from enqueue_shards_support import ansible_env, change, shard_counts, wait_until
from test_advice import GAINFUL, contend, loaded

SOURCE = Path("ansible_collections/awa/operations/extensions/eda/plugins/event_source/shard_advice.py")
REPO = Path(__file__).resolve().parents[2]


def source_main():
    """The plugin's ``main``, loaded as ansible-rulebook loads it (runpy, by path, from the collection)."""
    return runpy.run_path(str(collections_path() / SOURCE))["main"]


def collect(args: dict, until, timeout: float = 90.0) -> list[dict]:
    """Run the source until ``until(events)`` holds (or ``timeout``), then cancel it; the events it put."""
    events: list[dict] = []

    async def run() -> None:
        queue: asyncio.Queue = asyncio.Queue()
        task = asyncio.create_task(source_main()(queue, args))
        deadline = time.monotonic() + timeout
        try:
            while not until(events) and time.monotonic() < deadline:
                try:
                    events.append(await asyncio.wait_for(queue.get(), max(0.1, deadline - time.monotonic())))
                except asyncio.TimeoutError:
                    break
                if task.done():
                    task.result()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
    return events


def advice_of(events: list[dict], queue: str) -> list[dict]:
    return [event[EVENT_KEY] for event in events if EVENT_KEY in event and event[EVENT_KEY]["queue"] == queue]


def test_contention_becomes_one_held_event_one_step_up_and_an_idle_queue_none(awa_db, fleet):
    change(awa_db, "busy", 1)
    change(awa_db, "idle", 1)
    fleet.worker("w", ["busy=64", "idle=4"])
    contend(fleet, "busy")
    loaded(awa_db, "busy")
    args = {"connection": awa_db.login_args(), "queues": ["busy", "idle"], "gains": GAINFUL, "window": 2,
            "interval": 2, "stable": 2, "cooldown": 3600, "every_window": True}

    # Two windows to hold the raise, then two more: the cooldown keeps them from becoming events.
    events = collect(args, lambda seen: len(advice_of(seen, "busy")) >= 4)

    busy, idle = advice_of(events, "busy"), advice_of(events, "idle")
    assert [(a["verdict"], a["actionable"]) for a in busy] == [
        ("raise", False), ("raise", True), ("raise", False), ("raise", False)], [a["message"] for a in busy]
    held = busy[1]
    assert (held["shards"], held["to"], held["advised_to"], held["windows"]) == (1, 2, 4, 2)
    assert held["message"].startswith("busy: raise enqueue_shards 1 -> 4.")
    assert "per-key FIFO does not hold" in held["ordering"]
    assert held["evidence"]["lane_lock_waiters"] >= 0.5 and held["evidence"]["path"] == "insert"
    assert idle and all((a["verdict"], a["actionable"]) == ("keep", False) for a in idle)
    # The source only reads: the count is still 1.
    assert shard_counts(awa_db).get("busy", 1) == 1  # no queue_meta row: the default, 1


def test_an_unreadable_database_is_an_error_event_and_the_source_keeps_trying(awa_db):
    monitor = DbRole(f"{awa_db.name}_monitor", secrets.token_urlsafe(12))
    awa_db.roles["monitor"] = monitor
    create = sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}")
    awa_db.query(create.format(sql.Identifier(monitor.name), sql.Literal(monitor.password)))
    login = {**awa_db.login_args("monitor"), "login_password": "not-the-password"}
    args = {"connection": login, "window": 1, "interval": 1}

    events = collect(args, lambda seen: len(seen) >= 2, timeout=30)

    assert len(events) == 2 and all(ERROR_KEY in event for event in events), events
    message = events[0][ERROR_KEY]["message"]
    assert message.startswith("could not connect to database") and "password authentication failed" in message
    assert "not-the-password" not in json.dumps(events)
    assert events[0][ERROR_KEY]["retry_in_seconds"] == 1


def test_bad_arguments_stop_the_source_at_once_with_what_to_give():
    with pytest.raises(InvalidRequest, match="stable must be a whole number of windows between 1 and 1000, got 0"):
        asyncio.run(source_main()(asyncio.Queue(), {"stable": 0}))


# ---- the example rulebook under ansible-rulebook --------------------------------------------------

RULEBOOK_TIMEOUT = 240.0


def played(log: Path, marker: str) -> bool:
    return marker in log.read_text(encoding="utf-8")


def rulebook_command(vars_file: Path) -> list[str]:
    binary = Path(sys.executable).parent / "ansible-rulebook"
    return [str(binary), "-i", str(REPO / "extensions" / "testbed"), "--rulebook", "awa.operations.shard_advice",
            "--vars", str(vars_file)]


# hack/test.sh installs Java (hack/packages.sh) and fails this test if it would still be skipped (--no-skips).
@pytest.mark.skipif(shutil.which("java") is None,
                    reason="ansible-rulebook needs Java 17 or newer on PATH: apt-get install openjdk-17-jre-headless")
def test_the_example_rulebook_changes_an_opted_in_queue_one_step_with_the_change_window_playbook(testbed):
    state = environment.load_state(testbed)
    awa_db = AwaDatabase(PgServer.from_description(state["server"]), state["database"], "0.6.9")
    assert shard_counts(awa_db).get("demo", 1) == 1
    programs = Fleet(awa_db)
    vars_file = testbed / "shard-advice-vars.json"
    vars_file.write_text(json.dumps({
        "awa_shard_advice_connection": awa_db.login_args(), "awa_shard_advice_queues": ["demo"],
        "awa_shard_advice_gains": GAINFUL, "awa_shard_advice_window": 2, "awa_shard_advice_interval": 3,
        "awa_shard_advice_stable": 2, "awa_shard_advice_cooldown": 3600}), encoding="utf-8")
    log = testbed / "ansible-rulebook.log"
    try:
        contend(programs, "demo")
        loaded(awa_db, "demo", jobs=400)
        with log.open("w", encoding="utf-8") as output:
            rulebook = subprocess.Popen(rulebook_command(vars_file), stdout=output, stderr=subprocess.STDOUT,
                                        env={**ansible_env(), "AWA_TESTBED_STATE": str(testbed)},
                                        start_new_session=True)
        try:
            wait_until(lambda: played(log, "PLAY [") or rulebook.poll() is not None, RULEBOOK_TIMEOUT,
                       f"the rulebook to start the change-window playbook (log: {log})")
            # The advice is given: stop the contention, so the playbook is not starved of the 2 cores.
            programs.stop_all()
            wait_until(lambda: played(log, "PLAY RECAP") or rulebook.poll() is not None, RULEBOOK_TIMEOUT,
                       f"the change-window playbook run by the rulebook to end (log: {log})")
        finally:
            os.killpg(rulebook.pid, signal.SIGTERM)
            rulebook.wait(timeout=30)
    finally:
        programs.cleanup()
    output = log.read_text(encoding="utf-8")
    recap = output[output.index("PLAY RECAP"):]
    assert "failed=0" in recap and "unreachable=0" in recap, output
    assert output.count("PLAY RECAP") == 1, output
    # One step (1 -> 2) of the advised 4, by the playbook, with the advice as its reason; then every runtime has it.
    assert shard_counts(awa_db)["demo"] == 2, output
    reasons = [reason for (reason,) in awa_db.query("SELECT reason FROM awa_operations.enqueue_shards_changes")]
    assert len(reasons) == 1 and reasons[0].startswith("awa.operations.shard_advice: demo: raise enqueue_shards 1 -> 4."), reasons
    assert "| 1 -> 2            | 2 of 2        |" in output and "converged: yes" in output, output
