"""Shared helpers of the rollout tests: the change-window playbook against a test bed, and what it printed.

The test bed (``python -m awa_testbed up``) runs Awa applications under
supervisord; its inventory (extensions/testbed) gives the role the restart
and status commands, so these tests exercise the restart contract.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from awa_testbed import environment
from awa_testbed.supervisor import Supervisor
from enqueue_shards_support import ansible_command, ansible_env

REPO = Path(__file__).resolve().parents[2]
TESTBED_INVENTORY = REPO / "extensions" / "testbed" / "inventory.yml"
PLAYBOOK = REPO / "playbooks" / "set_enqueue_shards.yml"
BACKOUT_PREFIX = "To back out (the previous counts, the same options): "


def producer_inventory(folder: Path, producers: dict[str, dict]) -> Path:
    """An inventory in FOLDER: localhost runs the database steps, PRODUCERS (host: its variables) are the producers.

    The test bed's group_vars (its connection, its restart contract) apply to it as to the test bed's inventory.
    """
    inventory = folder / "inventory.yml"
    groups = {"awa_db_controller": {"hosts": {"localhost": None}},
              "awa_producers": {"hosts": {host: variables or None for host, variables in producers.items()}}}
    inventory.write_text(json.dumps({"all": {"children": groups}}, indent=2), encoding="utf-8")
    (folder / "group_vars").symlink_to(TESTBED_INVENTORY.parent / "group_vars")
    return inventory


def program_pids(state_dir: Path) -> dict[str, int | None]:
    supervisor = Supervisor(state_dir)
    return {name: supervisor.program_pid(name) for name in environment.load_state(state_dir)["programs"]}


def set_enqueue_shards(state_dir: Path, shards: int, *flags: str, inventory: Path = TESTBED_INVENTORY,
                       env: dict[str, str] | None = None, **variables) -> subprocess.CompletedProcess:
    """The change-window playbook against the test bed, queue demo -> ``shards`` (``env``: more environment for
    ansible-playbook, which the producer host's modules run with)."""
    vars_file = state_dir / "extra-vars.json"
    vars_file.write_text(json.dumps({"enqueue_shards_queues": [{"queue": "demo", "shards": shards}],
                                     **{f"enqueue_shards_{name}": value for name, value in variables.items()}}),
                         encoding="utf-8")
    return ansible_command("ansible-playbook", "-i", str(inventory), str(PLAYBOOK), "-e", f"@{vars_file}", *flags,
                           env_extra={"AWA_TESTBED_STATE": str(state_dir), **(env or {})})


@dataclasses.dataclass
class Job:
    """What AWX and AAP keep of a job, read from ansible-runner's artifacts: the return code and status, the stdout,
    every job event (each with its stdout and event_data), the stats and the set_stats data of the playbook_on_stats
    event."""

    rc: int
    status: str
    stdout: str
    events: list[dict]
    stats: dict
    artifact_data: dict


def set_enqueue_shards_as_awx_does(state_dir: Path, name: str, shards: int, *flags: str, **variables) -> Job:
    """The change-window playbook against the test bed as AWX and AAP run a job: ansible_runner.run with a private
    data directory of its own (``state_dir``/runner/``name``), process isolation off, the job template's extra
    variables in env/extravars (``-e @file``, where AWX writes them and a credential's injected ones).

    As ansible-core's own ansible-runner integration target does, the runner runs in a Python of its own (here: no
    thread of the test's process is copied into its pty fork); the job is read back from its artifacts.
    """
    private = state_dir / "runner" / name
    private.mkdir(parents=True)
    extravars = {"enqueue_shards_queues": [{"queue": "demo", "shards": shards}],
                 **{f"enqueue_shards_{key}": value for key, value in variables.items()}}
    # The playbook's interpreter's ansible-playbook, and this checkout as the collection.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    envvars = {**{key: value for key, value in ansible_env().items() if key.startswith("ANSIBLE_")},
               "PATH": path, "AWA_TESTBED_STATE": str(state_dir)}
    run = {"private_data_dir": str(private), "ident": "job", "playbook": str(PLAYBOOK),
           "inventory": str(TESTBED_INVENTORY), "extravars": extravars, "envvars": envvars,
           "cmdline": " ".join(flags), "process_isolation": False, "quiet": True, "timeout": 300}
    subprocess.run([sys.executable, "-c", "import json, sys, ansible_runner; ansible_runner.run(**json.load(sys.stdin))"],
                   input=json.dumps(run), text=True, check=True, timeout=360)
    artifacts = private / "artifacts" / "job"
    events = sorted((json.loads(path.read_text(encoding="utf-8")) for path in (artifacts / "job_events").glob("*.json")),
                    key=lambda event: event["counter"])
    [stats] = [event["event_data"] for event in events if event["event"] == "playbook_on_stats"]
    return Job(rc=int((artifacts / "rc").read_text(encoding="utf-8")),
               status=(artifacts / "status").read_text(encoding="utf-8").strip(),
               stdout=(artifacts / "stdout").read_text(encoding="utf-8"), events=events,
               stats={key: stats[key] for key in ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored")},
               artifact_data=stats["artifact_data"])


def summary_row(output: str, queue: str = "demo") -> list[str]:
    rows = [line.strip().strip('",') for line in output.splitlines() if line.strip().startswith(f'"{queue}  |')]
    assert rows, output
    return [cell.strip() for cell in rows[-1].split("|")]


def failure_message(output: str) -> str:
    """The message of the task that failed (the default callback prints ``FAILED! => {json}``)."""
    marker = output.rfind("FAILED! => ")
    assert marker >= 0, output
    result, dummy = json.JSONDecoder().raw_decode(output, output.index("{", marker))
    return result["msg"]


def backout_argv(message: str) -> list[str]:
    """The back-out command a stop message ends with, as argv."""
    assert BACKOUT_PREFIX in message, message
    return shlex.split(message[message.index(BACKOUT_PREFIX) + len(BACKOUT_PREFIX):])
