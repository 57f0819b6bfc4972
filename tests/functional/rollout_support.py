"""Shared helpers of the rollout tests: the change-window playbook against a test bed, and what it printed.

The test bed (``python -m awa_testbed up``) runs Awa applications under
supervisord; its inventory (extensions/testbed) gives the role the restart
and status commands, so these tests exercise the restart contract.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from awa_testbed import environment
from awa_testbed.awadb import DEFAULT_AWA_VERSION, AwaDatabase
from awa_testbed.pgserver import PgServer
from awa_testbed.supervisor import Supervisor
from enqueue_shards_support import ansible_command, ansible_env, ansible_python

REPO = Path(__file__).resolve().parents[2]
TESTBED_INVENTORY = REPO / "extensions" / "testbed" / "inventory.yml"
PLAYBOOK = REPO / "playbooks" / "set_enqueue_shards.yml"
BACKOUT_PREFIX = "To back out (the previous counts, the same options): "
# Three producer hosts of this machine and the four programs of the conftest's fleet_bed they run.
HOSTS = {"producer-a": ["awa-app-1", "awa-app-2"], "producer-b": ["awa-app-3"], "producer-c": ["awa-app-4"]}
# Two producer hosts of this machine, one of the demo bed's two programs each: a batch of one host is one program.
TWO_HOSTS = {"producer-a": ["awa-app-1"], "producer-b": ["awa-app-2"]}
# A runtime the plan or the summary names as outside the change window.
OUTSIDE = re.compile(r"pid (\d+) on host")


@contextlib.contextmanager
def demo_bed(major: int, apps: int = 2) -> Iterator[tuple[Path, AwaDatabase]]:
    """The demo's test bed on PostgreSQL ``major`` with ``apps`` applications (a job a second each, as the testbed
    fixture): its state folder and its database."""
    with environment.temporary(major=major, apps=apps, queue="demo", produce_rate=1.0) as state_dir:
        state = environment.load_state(state_dir)
        yield state_dir, AwaDatabase(PgServer.from_description(state["server"]), state["database"], DEFAULT_AWA_VERSION)


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


def restart_command(state_dir: Path, folder: Path, before: str = "", after: str = "") -> str:
    """enqueue_shards_restart_command for the test bed: a script in ``folder`` that runs the shell text ``before``
    (``$1`` is the program), restarts the program with the test bed's supervisorctl, runs ``after`` and then
    appends the program's name to ``folder``/restarted."""
    script = folder / "restart"
    ctl = shlex.join(environment.load_state(state_dir)["supervisorctl"])
    log = shlex.quote(str(folder / "restarted"))
    script.write_text(f'#!/bin/sh\n{before}\n{ctl} restart "$1" || exit $?\n{after}\necho "$1" >> {log}\n',
                      encoding="utf-8")
    script.chmod(0o755)
    return f"{script} {{service}}"


def restarted(folder: Path) -> list[str]:
    """The programs ``restart_command``'s script restarted, in order."""
    log = folder / "restarted"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def outside_pids(output: str) -> set[int]:
    """The pids of the runtimes a window's output names as outside the change window."""
    return {int(pid) for line in output.splitlines() if "outside the change window" in line
            for pid in OUTSIDE.findall(line)}


def hosts_inventory(folder: Path, hosts: dict[str, list[str]]) -> Path:
    """An inventory in FOLDER whose producer hosts (all this machine) run the test bed's programs ``hosts`` names,
    each host with an environment file of its own: one file written by several hosts, each with its own text (the
    file names the host's services), would change on every run."""
    return producer_inventory(folder, {host: {"enqueue_shards_services": services,
                                              "enqueue_shards_env_file": str(folder / f"{host}.env"),
                                              # The programs do not read these files (they read the bed's own).
                                              "enqueue_shards_runtime_hostname": ""}
                                       for host, services in hosts.items()})


def program_pids(state_dir: Path) -> dict[str, int | None]:
    supervisor = Supervisor(state_dir)
    return {name: supervisor.program_pid(name) for name in environment.load_state(state_dir)["programs"]}


def window_variables(shards: int, variables: dict) -> dict:
    """The change window's variables: queue demo -> ``shards``, and each of ``variables`` as enqueue_shards_<key>."""
    return {"enqueue_shards_queues": [{"queue": "demo", "shards": shards}],
            **{f"enqueue_shards_{key}": value for key, value in variables.items()}}


def _window_args(state_dir: Path, shards: int, flags: tuple[str, ...], inventory: Path,
                 variables: dict) -> list[str]:
    """ansible-playbook's arguments for the change window, its variables in a file of their own (windows may run at
    once)."""
    handle, name = tempfile.mkstemp(prefix="extra-vars-", suffix=".json", dir=state_dir)
    with os.fdopen(handle, "w", encoding="utf-8") as vars_file:
        json.dump(window_variables(shards, variables), vars_file)
    return ["-i", str(inventory), str(PLAYBOOK), "-e", f"@{name}", *flags]


def set_enqueue_shards(state_dir: Path, shards: int, *flags: str, inventory: Path = TESTBED_INVENTORY,
                       env: dict[str, str] | None = None, **variables) -> subprocess.CompletedProcess:
    """The change-window playbook against the test bed, queue demo -> ``shards`` (``env``: more environment for
    ansible-playbook, which the producer host's modules run with)."""
    return ansible_command("ansible-playbook", *_window_args(state_dir, shards, flags, inventory, variables),
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
    # The playbook's interpreter's ansible-playbook, and this checkout as the collection.
    path = f"{ansible_python().parent}{os.pathsep}{os.environ['PATH']}"
    envvars = {**{key: value for key, value in ansible_env().items() if key.startswith("ANSIBLE_")},
               "PATH": path, "AWA_TESTBED_STATE": str(state_dir)}
    run = {"private_data_dir": str(private), "ident": "job", "playbook": str(PLAYBOOK),
           "inventory": str(TESTBED_INVENTORY), "extravars": window_variables(shards, variables), "envvars": envvars,
           "cmdline": " ".join(flags), "process_isolation": False, "quiet": True, "timeout": 300}
    subprocess.run([str(ansible_python()), "-c", "import json, sys, ansible_runner; ansible_runner.run(**json.load(sys.stdin))"],
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


def start_enqueue_shards(state_dir: Path, shards: int, *flags: str, inventory: Path = TESTBED_INVENTORY,
                         output: Path, **variables) -> subprocess.Popen:
    """``set_enqueue_shards`` started, not waited for: a controller of its own (a new session, so the test can kill
    its whole process group, as a dropped SSH session or a cancelled AWX job does), its output to ``output``."""
    with open(output, "wb") as log:
        return subprocess.Popen(  # pylint: disable=consider-using-with
            [str(ansible_python().parent / "ansible-playbook"),
             *_window_args(state_dir, shards, flags, inventory, variables)],
            env={**ansible_env(), "AWA_TESTBED_STATE": str(state_dir)}, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)


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
