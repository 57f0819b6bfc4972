"""The producers' environment file holds secrets; a change window never prints one, on PostgreSQL 17 and 18.

The demo's test bed (two Awa applications under supervisord, which load the
file when they start) with an environment file as an operator's looks: the
database URL with the runtime role's real password, a token, and a comment
that still holds the previous token. The change-window playbook rotates the
token and changes two values that are safe to show. Every way out is read
for the secrets - the output at -vvv and at default verbosity, the diff, the
summary, the run's JSON report, and the message of a file that cannot be
written - and the changed variables must be named.

The change itself, and the window a file that cannot be written stops half
way, run as AWX and AAP run a job: through ansible-runner, the connection
(with its password) and the environment among the job's extra variables.
AWX stores what the runner records - the return code, the stats, every job
event with its stdout and its ``event_data`` (each task's result, ``res``),
and the ``set_stats`` outcome a workflow's next node gates on - so each is
read here: one event per phase, the outcome, and no secret in any event.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from awa_testbed import environment
from awa_testbed.binaries import SUPPORTED_MAJORS
from rollout_support import (failure_message, program_pids, set_enqueue_shards, set_enqueue_shards_as_awx_does,
                             summary_row)

# The change window on the floor core too (conftest.py, --floor-python).
pytestmark = pytest.mark.floor

REGION = "eu-test-1"
# The role's phases, in the order their tasks run (a batch's tasks are the pickup's).
PHASES = ["Validate", "Reach", "Preflight", "Change", "Pickup", "Wait", "Summary", "Record"]


@pytest.fixture(scope="module", params=SUPPORTED_MAJORS, ids=lambda major: f"pg{major}")
def secret_bed(request) -> Iterator[Path]:
    """The demo's test bed on PostgreSQL ``major`` (a job a second per application, as the testbed fixture)."""
    with environment.temporary(major=request.param, apps=2, queue="demo", produce_rate=1.0) as state_dir:
        yield state_dir


def token() -> str:
    return "tok-" + secrets.token_urlsafe(12)


def leaked(state_dir: Path, output: str, values: list[str]) -> list[str]:
    """The values found in the output or in any JSON report of the bed."""
    reports = "".join(path.read_text(encoding="utf-8") for path in state_dir.glob("enqueue_shards-*.json"))
    return [value for value in values if value in output or value in reports]


def phases(events: list[dict]) -> list[str]:
    """The role's phases in the order their tasks started, each once."""
    started = [event["event_data"]["task"].split(" | ")[0] for event in events
               if event["event"] == "playbook_on_task_start" and event["event_data"].get("role") == "enqueue_shards"]
    return [phase for index, phase in enumerate(started) if phase in PHASES and phase not in started[:index]]


def reports(state_dir: Path) -> list[dict]:
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(state_dir.glob("enqueue_shards-*.json"))]


def environment_of(state: dict, results_token: str) -> dict:
    """The inventory's environment: the URL as it was, the rotated token, and two values safe to show."""
    return {"AWA_DATABASE_URL": state["runtime_url"], "AWA_RESULTS_TOKEN": results_token, "AWA_REGION": REGION,
            "AWA_OVERRIDE_REFRESH_MS": 500}


def test_the_check_and_the_change_name_each_changed_variable_and_print_no_secret(secret_bed):
    state = environment.load_state(secret_bed)
    env_file = Path(state["env_file"])
    old_token, new_token = token(), token()
    before = (f"# hand-written; the token before: {token()}\nAWA_DATABASE_URL={state['runtime_url']}\n"
              f"AWA_RESULTS_TOKEN={old_token}\nAWA_OVERRIDE_REFRESH_MS=1000\n")
    env_file.write_text(before, encoding="utf-8")
    values = [state["login"]["login_password"], state["runtime_url"].split("@")[0].rsplit(":", 1)[1], old_token,
              new_token, before.splitlines()[0].rsplit(" ", 1)[1]]
    pids = program_pids(secret_bed)
    settings = {"environment": environment_of(state, new_token), "env_file_show": ["AWA_REGION"]}

    check = set_enqueue_shards(secret_bed, 2, "--check", "--diff", "-vvv", **settings)

    output = check.stdout + check.stderr
    assert check.returncode == 0, check.stdout
    for line in ("~AWA_OVERRIDE_REFRESH_MS=500 (changed from 1000)", "+AWA_REGION=eu-test-1 (added)",
                 "~AWA_RESULTS_TOKEN=******** (changed)", " unchanged: AWA_DATABASE_URL",
                 # The role's four header lines in, the comment with the old token out.
                 "~4 comment lines added, 1 removed (not shown: a comment may hold a secret)"):
        assert f"\n{line}\n" in check.stdout, line
    # -vvv prints the module's result: its diff is the same masked text.
    assert f'"prepared": "--- {env_file}\\n+++ {env_file}\\n' in check.stdout
    assert leaked(secret_bed, output, values) == []
    assert env_file.read_text(encoding="utf-8") == before and program_pids(secret_bed) == pids

    change = set_enqueue_shards_as_awx_does(secret_bed, "change", 2, "--diff", connection=state["login"], **settings)

    stdout, events = change.stdout, change.events
    assert (change.rc, change.status) == (0, "successful"), stdout
    assert change.stats["failures"] == {} and change.stats["ok"]["localhost"] > 0
    assert phases(events) == PHASES
    assert "\n~AWA_RESULTS_TOKEN=******** (changed)\n" in stdout
    assert summary_row(stdout)[1:3] == ["1 -> 2", "2 of 2"]
    # The summary's last lines: the window's start and end, and its back-out.
    assert re.search(r"The window: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d -> \d\d:\d\d:\d\d UTC \(", stdout)
    outcome = change.artifact_data["awa_enqueue_shards_outcome"]
    assert (outcome["done"], outcome["stopped_at"]) == (True, None)
    assert outcome["queues"] == {"demo": {"asked": 2, "before": 1, "after": 2, "converged": True, "drained": True,
                                          "set_by": None}}
    assert outcome["services"] == {"restarted": ["localhost/awa-app-1", "localhost/awa-app-2"], "skipped": [],
                                   "left": []}
    # The summary prints the back-out in its JSON result: quotes escaped.
    assert outcome["backout_queues"] == [{"queue": "demo", "shards": 1}]
    assert json.dumps(outcome["backout"])[1:-1] in stdout
    assert outcome["started"] < outcome["ended"]
    assert reports(secret_bed)[-1]["outcome"] == outcome
    # No secret in any event AWX would store (stdout and event_data), nor in the output or a report.
    assert leaked(secret_bed, json.dumps(events) + stdout, values) == []
    written = env_file.read_text(encoding="utf-8").splitlines()
    assert f"AWA_RESULTS_TOKEN={new_token}" in written and f"AWA_REGION={REGION}" in written


def test_a_file_that_cannot_be_written_stops_the_window_with_its_reason_and_no_secret(secret_bed):
    state = environment.load_state(secret_bed)
    env_file = Path(state["env_file"])
    rotated = token()
    values = [state["login"]["login_password"], state["runtime_url"].split("@")[0].rsplit(":", 1)[1], rotated]
    pids = program_pids(secret_bed)
    # Immutable: even root cannot replace it, and the move into place fails after the temporary file is written.
    subprocess.run(["chattr", "+i", str(env_file)], check=True)
    try:
        stopped = set_enqueue_shards_as_awx_does(secret_bed, "stopped", 3, "--diff", "-vvv", connection=state["login"],
                                                 environment=environment_of(state, rotated))
    finally:
        subprocess.run(["chattr", "-i", str(env_file)], check=True)

    stdout, events = stopped.stdout, stopped.events
    assert (stopped.rc, stopped.status) == (2, "failed")
    assert stopped.stats["failures"] == {"localhost": 1} and stopped.stats["rescued"] == {"localhost": 1}
    # The rollout's stop names the host with the module's reason; then what is done and left, and the report.
    message = failure_message(stdout)
    assert (f"localhost (The environment file {env_file} was not written: Operation not permitted. Nothing was "
            "restarted.)") in message
    [report] = [report for report in reports(secret_bed) if report["outcome"]["queues"]["demo"]["asked"] == 3]
    outcome = stopped.artifact_data["awa_enqueue_shards_outcome"]
    assert report["outcome"] == outcome and report["stopped"]["task"] == outcome["stopped_at"]
    assert outcome["stopped_at"].startswith("Pickup | the plan") and not outcome["done"]
    # The count is committed (3) by this window (no earlier change set it), no runtime runs it yet (and drained is
    # said only once converged).
    assert {key: value for key, value in outcome["queues"]["demo"].items() if key != "before"} == {
        "asked": 3, "after": 3, "converged": False, "drained": False, "set_by": None}
    # The host's run failed before it read its services: they are skipped, neither checked nor restarted.
    assert outcome["services"] == {"restarted": [], "left": [],
                                   "skipped": ["localhost/awa-app-1", "localhost/awa-app-2"]}
    assert ("So far skipped, not checked or restarted: localhost/awa-app-1, localhost/awa-app-2. The window's report: "
            in message)
    assert message.endswith(outcome["backout"]) and outcome["backout"].startswith("To back out")
    assert leaked(secret_bed, json.dumps(events) + stdout, values) == []
    assert rotated not in env_file.read_text(encoding="utf-8") and program_pids(secret_bed) == pids
