"""A restart that cannot run is found before the change, not after it: the change-window playbook on 17 and 18.

The demo's test bed (two Awa applications under supervisord) on each major.
The reach - one check-mode run of awa_producer_services on each producer host
- looks up the programs of the restart and status commands as the restart
will run them and reads every service with the status command; a host that
cannot restart its services as configured stops the window before anything
is changed, in check mode too, naming the host, the services, the command and
what the host said. Each refusal leaves the database and the applications as
they were. A restart that does fail mid-rollout says why: the command's exit
status and its last lines of error output, never Ansible's bare "Error
executing command.".

A service the status command says does not exist (exit 4, as supervisorctl
status answers for a program supervisord does not have) is refused the same
way, while a stopped one (exit 3) is restarted like any whose start is
unknown. A unit systemd does not know is refused the same way; no systemd
runs here, so that is proven on the molecule fleet's systemd hosts
(extensions/molecule/fleet/missing.yml).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from awa_testbed import environment
from awa_testbed.awadb import AwaDatabase
from awa_testbed.binaries import SUPPORTED_MAJORS
from enqueue_shards_support import shard_counts, snapshot
from rollout_support import TWO_HOSTS, demo_bed, failure_message, hosts_inventory, program_pids, set_enqueue_shards
from test_readme_quick_start import README, quick_start

# Seconds a batch waits for its new runtimes: the applications register in about a second here.
RESTART_TIMEOUT = 30


@pytest.fixture(scope="module", params=SUPPORTED_MAJORS, ids=lambda major: f"pg{major}")
def bed(request) -> Iterator[tuple[Path, AwaDatabase]]:
    """The demo's test bed on PostgreSQL ``major`` (a job a second per application, as the testbed fixture)."""
    with demo_bed(request.param) as state:
        yield state


def readme_commands() -> dict[str, str]:
    """The restart and status commands of the README's quick start (its inventory's producer variables)."""
    inventory = yaml.safe_load(quick_start(README.read_text(encoding="utf-8")).files["inventory.yml"])
    producers = inventory["all"]["children"]["awa_producers"]["vars"]
    return {name: producers[f"enqueue_shards_{name}"] for name in ("restart_command", "status_command")}


def path_without(program: str) -> str:
    """This machine's PATH without the folders that hold ``program`` (the test venv has supervisorctl)."""
    return os.pathsep.join(folder for folder in os.environ["PATH"].split(os.pathsep)
                           if not (Path(folder) / program).exists())


def refused(state_dir: Path, db: AwaDatabase, *flags: str, env: dict[str, str] | None = None, **variables) -> str:
    """The change window (demo -> 4) refused at the reach: its message, the database and applications untouched."""
    before, pids = snapshot(db), program_pids(state_dir)
    process = set_enqueue_shards(state_dir, 4, *flags, env=env, **variables)
    assert process.returncode != 0, process.stdout
    message = failure_message(process.stdout)
    failed_task = process.stdout[:process.stdout.rfind("FAILED! => ")].rsplit("TASK [", 1)[-1]
    assert failed_task.startswith("awa.operations.enqueue_shards : Reach | stop unless"), failed_task
    assert (snapshot(db), program_pids(state_dir)) == (before, pids), "nothing was changed or restarted"
    assert shard_counts(db).get("demo", 1) == 1, "the count is not switched"
    assert "Error executing command." not in process.stdout
    return message


def test_the_quick_start_without_supervisorctl_on_the_path_is_refused_in_check_mode_and_for_real(bed):
    state_dir, db = bed
    commands = readme_commands()
    env = {"PATH": path_without("supervisorctl")}

    for flags in (("--check",), ()):
        message = refused(state_dir, db, *flags, env=env, **commands)

        assert message.startswith("localhost cannot restart its producer services as configured, nothing was changed: "
                                  "localhost (awa-app-1, awa-app-2): the restart command supervisorctl restart "
                                  "{service} cannot run here: supervisorctl is not on the PATH of user "), message
        assert f"({env['PATH']}); correct enqueue_shards_restart_command or enqueue_shards_status_command" in message
        for service in ("awa-app-1", "awa-app-2"):
            status = commands["status_command"].replace("{service}", service)
            # sh -c names itself by $0, the service.
            assert (f"localhost/{service}: the status command {status} cannot run here (exit status 127: "
                    f"{service}: 1: supervisorctl: not found); correct enqueue_shards_status_command for this host, or "
                    "install what it runs there") in message
        assert "unreachable" not in message


def test_an_absolute_restart_program_that_does_not_exist_is_named_not_called_unreachable(bed):
    state_dir, db = bed

    message = refused(state_dir, db, restart_command="/opt/awa-nowhere/bin/ctl restart {service}")

    assert message == (
        "localhost cannot restart its producer services as configured, nothing was changed: localhost (awa-app-1, "
        "awa-app-2): the restart command /opt/awa-nowhere/bin/ctl restart {service} cannot run here: "
        "/opt/awa-nowhere/bin/ctl does not exist; correct enqueue_shards_restart_command or "
        "enqueue_shards_status_command for this host, or install the program there (one named without a folder is "
        "looked up on the PATH shown)")


def test_a_status_command_that_exits_127_is_refused_not_taken_for_an_unknown_start(bed):
    state_dir, db = bed
    status = "sh -c 'awa-no-such-status-tool \"$0\"' {service}"

    message = refused(state_dir, db, status_command=status)

    assert message == (
        "localhost cannot restart its producer services as configured, nothing was changed: "
        + " | ".join(f"localhost/{service}: the status command {status.replace('{service}', service)} cannot run "
                     f"here (exit status 127: {service}: 1: awa-no-such-status-tool: not found); correct "
                     "enqueue_shards_status_command for this host, or install what it runs there"
                     for service in ("awa-app-1", "awa-app-2")))


def test_a_status_command_that_prints_something_else_than_its_contract_is_refused(bed):
    state_dir, db = bed

    message = refused(state_dir, db, "--check", status_command="echo RUNNING {service}")

    assert message.startswith(
        "localhost cannot restart its producer services as configured, nothing was changed: localhost/awa-app-1: the "
        "status command echo RUNNING awa-app-1 printed 'RUNNING awa-app-1', not its contract: it must exit 0 and "
        "print START or START PID (the start in unix seconds, then optionally the pid), then optionally a line "
        "HOSTNAME or HOSTNAME PID for each runtime that runs elsewhere (a replica); correct "
        "enqueue_shards_status_command for this host, or install what it runs there | localhost/awa-app-2: "), message


def test_a_service_the_status_command_does_not_know_is_refused_in_check_mode_and_for_real(bed):
    state_dir, db = bed
    status = environment.load_state(state_dir)  # the test bed's status command: python -m awa_testbed.started
    services = ["awa-app-1", "awa-app-3"]  # awa-app-3 is no program of the bed's supervisord

    for flags in (("--check",), ()):
        message = refused(state_dir, db, *flags, services=services)

        assert message.startswith("Invalid input for localhost, nothing was changed: localhost/awa-app-3: the status "
                                  "command "), message
        assert message.endswith(
            f" --state {status['state_dir']} --pid awa-app-3 says there is no such service (exit status 4: awa-app-3: "
            "ERROR (no such process)); correct enqueue_shards_services for this host, or set the service up there"), \
            message
        assert "awa-app-1" not in message.split(": the status command")[0]


def test_a_restart_that_fails_mid_rollout_says_its_exit_status_and_last_lines_of_error_output(bed, tmp_path):
    state_dir, db = bed
    pids = program_pids(state_dir)
    # Five lines of error output, then exit 7; the message keeps the last lines that say something.
    noisy = ("sh -c 'echo starting >&2; echo \"$0: ERROR (spawn error)\" >&2; echo >&2; "
             "echo \"  see the log of $0\" >&2; exit 7' {service}")

    stopped = set_enqueue_shards(state_dir, 4, inventory=hosts_inventory(tmp_path, TWO_HOSTS), batch_size=1,
                                 restart_timeout=RESTART_TIMEOUT, restart_command=noisy)

    assert stopped.returncode != 0
    assert failure_message(stopped.stdout).startswith(
        "Rollout stopped at batch 1 of 2 (producer-a/awa-app-1): producer-a/awa-app-1 did not come back: the restart "
        "failed: exit status 7: starting / awa-app-1: ERROR (spawn error) / see the log of awa-app-1. Health readings: ")
    assert shard_counts(db)["demo"] == 4, "the change itself is committed"
    assert program_pids(state_dir) == pids


def test_a_restart_program_gone_mid_rollout_is_named_not_reported_as_ansibles_bare_error(bed, tmp_path):
    """The restart program restarts the first service, then is gone: the second batch looks it up, finds it gone and
    restarts nothing, in the operator's words."""
    state_dir, db = bed
    ctl = shlex.join(environment.load_state(state_dir)["supervisorctl"])
    program = tmp_path / "restart-once"
    program.write_text(f'#!/bin/sh\nrm -f "$0"\nexec {ctl} restart "$1"\n', encoding="utf-8")
    program.chmod(0o755)
    pids = program_pids(state_dir)
    shards = shard_counts(db).get("demo", 1) + 2

    stopped = set_enqueue_shards(state_dir, shards, inventory=hosts_inventory(tmp_path, TWO_HOSTS), batch_size=1,
                                 restart_timeout=RESTART_TIMEOUT, restart_command=f"{program} {{service}}")

    assert stopped.returncode != 0
    assert failure_message(stopped.stdout).startswith(
        "Rollout stopped at batch 2 of 2 (producer-b/awa-app-2): producer-b/awa-app-2 did not come back: the restart "
        f"failed: the restart command {program} {{service}} cannot run here: {program} does not exist. Health readings: ")
    assert "Error executing command." not in stopped.stdout
    after = program_pids(state_dir)
    assert after["awa-app-1"] != pids["awa-app-1"] and after["awa-app-2"] == pids["awa-app-2"]


def test_a_stopped_service_is_restarted_not_refused(bed):
    """The status command exits 3 for a program supervisord has stopped: the reach lets it be, and the rollout
    starts it with its restart."""
    state_dir, db = bed
    ctl = environment.load_state(state_dir)["supervisorctl"]
    subprocess.run([*ctl, "stop", "awa-app-2"], check=True, capture_output=True)
    pids = program_pids(state_dir)
    assert pids["awa-app-2"] is None
    shards = shard_counts(db).get("demo", 1) + 1

    process = set_enqueue_shards(state_dir, shards, batch_size=1, restart_timeout=RESTART_TIMEOUT)

    assert process.returncode == 0, process.stdout
    [line] = [line for line in process.stdout.splitlines() if "localhost/awa-app-2: restart - " in line]
    # (The role's first window on the bed also writes HOSTNAME into the environment file, a reason of its own.)
    assert ("its start time is unknown (not running, status command exited 3: awa-app-2 is not running (STOPPED))"
            in line), line
    after = program_pids(state_dir)
    assert after["awa-app-2"] is not None and after["awa-app-1"] != pids["awa-app-1"]
    assert shard_counts(db)["demo"] == shards
