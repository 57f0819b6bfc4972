"""The event source awa.operations.shard_advice and the shipped rulebooks, on real load.

The source is loaded the way ansible-rulebook loads it (by path, from the
collection) and run without Java on PostgreSQL 17 and 18: real awa-pg 0.6.9
producers contend on one lane (behind test_advice's lane holder), and the
events are what an operator's rules see; a change made by hand, recorded in
the change ledger, holds the source, restarted or not. What both rulebooks
hand on for a real event is rendered by ansible-rulebook 1.3.2's own code,
and both are valid for it. Then the example rulebook runs end to end under
ansible-rulebook (Java 17, which hack/test.sh installs) against the demo's
test bed: the advice changes the opted-in queue one step with the
change-window playbook, and only once. The controller rulebook launches a
job template of an automation controller, which this machine does
not have: its launch is not run.
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
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_rulebook.action.control import Control
from ansible_rulebook.action.helper import Helper
from ansible_rulebook.action.metadata import Metadata
from ansible_rulebook.action.run_job_template import RunJobTemplate
from ansible_rulebook.json_generator import generate_dict_rulesets
from ansible_rulebook.rules_parser import parse_rule_sets
from ansible_rulebook.util import substitute_variables
from ansible_rulebook.validators import Validate
from psycopg import sql

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.plugin_utils.advice_events import ERROR_KEY, EVENT_KEY

from awa_testbed import environment
from awa_testbed.awadb import AwaDatabase, DbRole
from awa_testbed.collection import collections_path
from awa_testbed.fleet import Fleet
from awa_testbed.pgserver import PgServer
from enqueue_shards_support import ansible_adhoc, ansible_env, change, shard_counts, wait_until
from test_advice import GAINFUL, contend, loaded

SOURCE = Path("ansible_collections/awa/operations/extensions/eda/plugins/event_source/shard_advice.py")
REPO = Path(__file__).resolve().parents[2]
RULEBOOKS = REPO / "extensions" / "eda" / "rulebooks"


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


def actionable_windows(advice: list[dict]) -> list[int]:
    """The indexes of the windows whose advice became an event."""
    return [index for index, entry in enumerate(advice) if entry["actionable"]]


def raises_after_the_event(advice: list[dict]) -> int:
    """Raise verdicts after the first actionable one: what the cooldown must keep from becoming events."""
    actionable = actionable_windows(advice)
    return sum(entry["verdict"] == "raise" for entry in advice[actionable[0] + 1:]) if actionable else 0


def test_contention_becomes_one_held_event_one_step_up_and_an_idle_queue_none(awa_db, fleet):
    change(awa_db, "busy", 1)
    change(awa_db, "idle", 1)
    fleet.worker("w", ["busy=64", "idle=4"])
    contend(fleet, "busy")
    loaded(awa_db, "busy")
    args = {"connection": awa_db.login_args(), "queues": ["busy", "idle"], "gains": GAINFUL, "window": 2,
            "interval": 2, "stable": 2, "cooldown": 3600, "every_window": True}

    # A raise held for two windows becomes one event; later raises within the cooldown become none. The source is
    # read until two raises have followed the event, whichever windows they fall in.
    events = collect(args, lambda seen: raises_after_the_event(advice_of(seen, "busy")) >= 2, timeout=120)

    busy, idle = advice_of(events, "busy"), advice_of(events, "idle")
    verdicts = [(a["verdict"], a["actionable"]) for a in busy]
    actionable = actionable_windows(busy)
    assert len(actionable) == 1 and actionable[0] >= 1, verdicts
    held = busy[actionable[0]]
    assert verdicts[actionable[0] - 1:actionable[0] + 1] == [("raise", False), ("raise", True)], verdicts
    assert raises_after_the_event(busy) >= 2, verdicts
    assert (held["shards"], held["to"], held["advised_to"], held["windows"]) == (1, 2, 4, 2)
    assert held["message"].startswith("busy: raise enqueue_shards 1 -> 4.")
    assert "per-key FIFO does not hold" in held["ordering"]
    assert held["evidence"]["lane_lock_waiters"] >= 0.5 and held["evidence"]["path"] == "insert"
    assert idle and all((a["verdict"], a["actionable"]) == ("keep", False) for a in idle)
    # The source only reads: the count is still 1.
    assert shard_counts(awa_db).get("busy", 1) == 1  # no queue_meta row: the default, 1

    # What the rulebooks hand on for that event: exactly the change-window playbook's variables for the change.
    variables = {**RULEBOOK_VARS, "awa_shard_advice_queues": ["busy", "idle"]}
    needed = {"enqueue_shards_queues": [{"queue": "busy", "shards": 2}],
              "enqueue_shards_reason": f"awa.operations.shard_advice: {held['message']}"}
    job_template, sent = rule_action("shard_advice_controller", {EVENT_KEY: held}, variables)
    assert (job_template["name"], job_template["organization"]) == ("Change enqueue_shards", "Default")
    assert sent == needed  # shards the integer 2, not the string "2"
    assert playbook_variables_problems(sent) == []
    playbook, handed = rule_action("shard_advice", {EVENT_KEY: held}, variables)
    # run_playbook adds the event as ansible_eda; the change is the same (and runs end to end below).
    assert playbook["name"] == "awa.operations.set_enqueue_shards"
    assert {key: value for key, value in handed.items() if key != "ansible_eda"} == needed


def test_a_change_by_hand_holds_the_source_and_a_restarted_source_still_holds_it(awa_db, fleet):
    # An operator raised busy by hand a moment ago and lowered it back to 1, with the module: both are in the ledger.
    change(awa_db, "busy", 2)
    process, lowered = ansible_adhoc({**awa_db.login_args(), "queue": "busy", "shards": 1, "reason": "by hand"})
    assert process.returncode == 0 and lowered["changed"], process.stdout
    fleet.worker("w", ["busy=64"])
    contend(fleet, "busy")
    loaded(awa_db, "busy")
    args = {"connection": awa_db.login_args(), "queues": ["busy"], "gains": GAINFUL, "window": 2, "interval": 2,
            "stable": 1, "cooldown": 3600, "every_window": True}

    # stable 1: without the ledger, the first raise would be an event. Reversing the lowering waits two cooldowns.
    # (The source runs until it advised raise that often, whichever windows advised it.)
    held = raises(collect(args, lambda seen: len(raises(seen)) >= 2))
    # Stopped and started again (nothing is remembered in between): still held.
    restarted = raises(collect(args, lambda seen: len(raises(seen)) >= 1))
    # The same load with a cooldown of 1 s, long past since the change: the first raise is an event.
    past = raises(collect(dict(args, cooldown=1), lambda seen: len(raises(seen)) >= 1))

    assert [(a["shards"], a["actionable"]) for a in held + restarted] == [(1, False)] * 3, held + restarted
    assert [(a["shards"], a["to"], a["actionable"]) for a in past] == [(1, 2, True)], past
    assert shard_counts(awa_db)["busy"] == 1


def raises(events: list[dict]) -> list[dict]:
    """The source's raise advice for busy (any window advising something else left out)."""
    return [advice for advice in advice_of(events, "busy") if advice["verdict"] == "raise"]


def test_the_source_imports_its_collection_as_ansible_imports_an_installed_one_and_leaves_no_loader(tmp_path):
    """ansible-rulebook runs the file by path, where `ansible-galaxy collection list` found it, and makes no
    collection importable: the source imports the rest of its collection through ansible-core's collection loader,
    from the configured collections path alone (no PYTHONPATH), then takes the loader out again, so that
    ansible-rulebook's next run by path - one of its own event filters - still runs (the end-to-end test below runs
    it under ansible-rulebook itself)."""
    probe = ("import os, runpy, sys, ansible_rulebook; source = runpy.run_path(sys.argv[1]); "
             "runpy.run_path(os.path.join(os.path.dirname(ansible_rulebook.__file__), 'event_filter', 'noop.py')); "
             "print(sorted(name for name in source if name == 'main'), 'ansible_collections' in sys.modules, "
             "[type(finder).__name__ for finder in sys.meta_path if 'Collection' in type(finder).__name__])")
    env = {key: value for key, value in ansible_env().items() if key != "PYTHONPATH"}
    loaded_source = subprocess.run([sys.executable, "-c", probe, str(collections_path() / SOURCE)], env=env,
                                   cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert loaded_source.stdout.strip() == "['main'] True []", loaded_source.stderr
    assert "sys.path" not in (REPO / "extensions" / "eda" / "plugins" / "event_source" / "shard_advice.py").read_text(
        encoding="utf-8")


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


# ---- the shipped rulebooks, as ansible-rulebook 1.3.2 reads them ---------------------------------

RULEBOOK_VARS = {
    "awa_shard_advice_connection": {"login_host": "db1.example.com", "login_db": "app", "login_user": "awa_monitor"},
    "awa_shard_advice_queues": ["orders"],
    "awa_shard_advice_job_template": "Change enqueue_shards",
}


def rulebook(name: str) -> list[dict]:
    return yaml.safe_load((RULEBOOKS / f"{name}.yml").read_text(encoding="utf-8"))


def rule_action(name: str, event: dict, variables: dict) -> tuple[dict, dict]:
    """The first rule of a shipped rulebook acting on ``event``: its action's arguments and the extra vars it hands
    on, built by ansible-rulebook's own code (rule_set_runner renders the arguments with substitute_variables over
    the variables and the event; the action collects its extra vars with its Helper)."""
    ruleset = rulebook(name)[0]
    rule = ruleset["rules"][0]
    ((action, args),) = rule["action"].items()
    context = {**variables, "event": event}
    rendered = {key: substitute_variables(value, context) for key, value in args.items()}
    metadata = Metadata(rule=rule["name"], rule_uuid="", rule_set=ruleset["name"], rule_set_uuid="", rule_run_at="")
    control = Control(queue=None, inventory="", hosts=["all"], variables=context, project_data_file="")
    if action == "run_job_template":
        launch = RunJobTemplate(metadata, control, **rendered)
        return rendered, launch.helper.collect_extra_vars(launch.job_args.get("extra_vars", {}),
                                                          rendered.get("include_events", True))
    assert action == "run_playbook", action
    return rendered, Helper(metadata, control, action).collect_extra_vars(rendered.get("extra_vars", {}))


def playbook_variables_problems(extra_vars: dict) -> list[str]:
    """What the change-window playbook's role spec (meta/argument_specs.yml) says about ``extra_vars``."""
    specs = yaml.safe_load((REPO / "roles/enqueue_shards/meta/argument_specs.yml").read_text(encoding="utf-8"))
    options = specs["argument_specs"]["main"]["options"]
    validator = ArgumentSpecValidator({name: options[name] for name in extra_vars})
    return [str(error) for error in validator.validate(extra_vars).errors]


@pytest.mark.parametrize("name", ["shard_advice", "shard_advice_controller"])
def test_the_shipped_rulebooks_are_valid_for_ansible_rulebook(name):
    loaded_rulebook = rulebook(name)
    Validate.rulebook(loaded_rulebook)
    rulesets = parse_rule_sets(loaded_rulebook, RULEBOOK_VARS)
    generate_dict_rulesets(rulesets, RULEBOOK_VARS)
    # The controller's rulebook watches and decides exactly as the one run end to end below.
    cli, controller = rulebook("shard_advice")[0], rulebook("shard_advice_controller")[0]
    assert controller["sources"] == cli["sources"]
    assert [rule["condition"] for rule in controller["rules"]] == [rule["condition"] for rule in cli["rules"]]


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
            if rulebook.poll() is None:  # an ansible-rulebook that ended by itself is reported by its log below
                os.killpg(rulebook.pid, signal.SIGTERM)
            rulebook.wait(timeout=30)
    finally:
        programs.cleanup()
    output = log.read_text(encoding="utf-8")
    assert "PLAY RECAP" in output, output
    recap = output[output.index("PLAY RECAP"):]
    assert "failed=0" in recap and "unreachable=0" in recap, output
    assert output.count("PLAY RECAP") == 1, output
    # One step (1 -> 2) of the advised 4, by the playbook, with the advice as its reason; then every runtime has it.
    assert shard_counts(awa_db)["demo"] == 2, output
    reasons = [reason for (reason,) in awa_db.query("SELECT reason FROM awa_operations.enqueue_shards_changes")]
    assert len(reasons) == 1 and reasons[0].startswith("awa.operations.shard_advice: demo: raise enqueue_shards 1 -> 4."), reasons
    assert "| 1 -> 2            | 2 of 2        |" in output and "converged: yes" in output, output
