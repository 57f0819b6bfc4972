"""Every runtime tied to its own service wherever producers run: the change-window playbook on 17 and 18 (issue 56).

One bed a major (awa_testbed.shapes) with a producer host of each shape, in the
order the batches take them (two hosts a batch):

* ``image-1`` and ``image-2``: hosts booted from one image - each its own pid
  namespace, their programs started in the same order, so ``app-a`` has the
  same pid on both. The service manager sets no HOSTNAME: the role's
  environment file does (enqueue_shards_runtime_hostname, the inventory
  host's name), and the programs load it;
* ``containers``: one container per service - each runtime is pid 1 of its
  own pid namespace with a new container id as HOSTNAME at every start; the
  status command prints the pid of the process that runs the container;
  the environment file sets no HOSTNAME there (each keeps its own);
* ``mixed``: a service of two replicas restarted together (``api``), a
  service that only enqueues and caches the count (``web``, no runtime row),
  and one declared to enqueue elsewhere (``billing``: a worker of demo that
  says it enqueues into billing only).

The tests run in order on the bed, each raising the count once more: a raise
and the same run again; a controller killed after the first batch and the
same command again; a hung container that stops the window and its re-run
after the fix; two windows at once on disjoint ``--limit``s. Every service is
tied by pid (no host judged by count), a re-run restarts only what is not
done, and each service restarts once a window.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from awa_testbed import shapes
from awa_testbed.binaries import SUPPORTED_MAJORS
from awa_testbed.waiting import wait_until
from enqueue_shards_support import ledger_rows, shard_counts
from rollout_support import failure_message, set_enqueue_shards, start_enqueue_shards, summary_row

SPEC = {
    "image-1": {"programs": {"app-a": "bare", "app-b": "bare"}, "hostname": None},
    "image-2": {"programs": {"app-a": "bare"}, "hostname": None},
    "containers": {"programs": {"ctr-a": "container", "ctr-b": "container"}, "hostname": None},
    "mixed": {"programs": {"api": {"replicas": 2}, "web": "enqueue_only", "billing": "bare"}, "hostname": None},
}
# What the inventory says of each host beyond what the bed gives it.
HOST_VARIABLES = {
    "containers": {"enqueue_shards_runtime_hostname": ""},
    "mixed": {"enqueue_shards_service_runtimes": {"api": 2, "web": 0},
              "enqueue_shards_service_queues": {"billing": ["billing"]}},
}
CONCERNED = ["image-1/app-a", "image-1/app-b", "image-2/app-a", "containers/ctr-a", "containers/ctr-b", "mixed/api",
             "mixed/web"]
WINDOW_SECONDS = 600


@pytest.fixture(scope="module", params=SUPPORTED_MAJORS, ids=lambda major: f"pg{major}")
def bed(request) -> Iterator[tuple[Path, object]]:
    """The bed on PostgreSQL ``major``, and its database."""
    with shapes.temporary(SPEC, major=request.param) as state_dir:
        from awa_testbed import environment  # pylint: disable=import-outside-toplevel
        yield state_dir, environment.database(environment.load_state(state_dir))


def inventory(state_dir: Path, folder: Path) -> Path:
    """The bed's inventory with HOST_VARIABLES, and a restart command on each host that logs ``host/program`` to
    ``folder``/restarted once it restarted it."""
    path = shapes.write_inventory(state_dir, folder / "inventory.yml")
    written = json.loads(path.read_text(encoding="utf-8"))
    log = shlex.quote(str(folder / "restarted"))
    for name, variables in written["all"]["children"]["awa_producers"]["hosts"].items():
        ctl = variables["enqueue_shards_restart_command"].removesuffix(" {service}")
        variables.update(HOST_VARIABLES.get(name, {}),
                         enqueue_shards_restart_command=f"sh -c '{ctl} \"$0\" && echo {name}/\"$0\" >> {log}' {{service}}")
    path.write_text(json.dumps(written, indent=2), encoding="utf-8")
    return path


def restarted(folder: Path) -> list[str]:
    log = folder / "restarted"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def pids(state_dir: Path) -> dict[str, int | None]:
    """Each program's process, as this machine sees it (a restart changes it)."""
    return {f"{host.name}/{program}": host.machine_pid(program)
            for host in shapes.load(state_dir).values() for program in host.programs}


def window(state_dir: Path, folder: Path, shards: int, *flags: str) -> subprocess.CompletedProcess:
    return set_enqueue_shards(state_dir, shards, *flags, inventory=inventory(state_dir, folder), batch_size=2,
                              restart_timeout=60, converge_timeout=120)


def assert_tied_by_pid(output: str) -> None:
    """No host judged by count: every runtime of the window tied to its service by what its processes report."""
    assert "How the runtimes were counted" not in output and "judged by count" not in output, output
    assert "do not show HOSTNAME" not in output, "every program loads its environment file"


def test_a_raise_restarts_every_concerned_service_once_and_the_same_run_again_restarts_nothing(bed, tmp_path):
    state_dir, db = bed
    hosts = shapes.load(state_dir)
    # Hosts booted from one image: the same program has the same pid on both.
    assert hosts["image-1"].pid("app-a") == hosts["image-2"].pid("app-a")
    before = pids(state_dir)
    shards = shard_counts(db).get("demo", 1) + 1

    raised = window(state_dir, tmp_path, shards)

    assert raised.returncode == 0, raised.stdout
    # The role's first window on the bed writes its environment files (HOSTNAME): billing restarts for that alone.
    assert ("mixed/billing: untouched - it enqueues only into billing, which this change does not concern "
            "(enqueue_shards_service_queues); restarted all the same: its environment file changed") in raised.stdout
    assert sorted(restarted(tmp_path)) == sorted(CONCERNED + ["mixed/billing"])
    after = pids(state_dir)
    assert {name for name in before if after[name] != before[name]} == {*CONCERNED, "mixed/billing"}
    # Until the role has written HOSTNAME into the environment files, the runtimes of hosts booted from one image
    # report no host name and the same pids (those of the containers' processes too): the plan judges them by count.
    # Once restarted, every one reports its host or container, and the window ends tied by pid.
    assert "How the runtimes were counted: runtimes matched to services by pid, except on " in raised.stdout
    assert ("inventory: 7 of 7 runtimes of the producer services live on the count; runtimes matched to services by "
            "pid (and host name where the runtime reports one); judged by when they started") in raised.stdout
    assert ("mixed/billing: untouched - it enqueues only into billing, which this change does not concern "
            "(enqueue_shards_service_queues)") in raised.stdout
    assert "judged by when they started, as they only enqueue: mixed/web" in raised.stdout
    # 2 + 1 + 2 + 2 runtimes (billing's left out, web has none); every container's runtime reports pid 1.
    assert "inventory: 7 of 7 runtimes of the producer services live on the count" in raised.stdout
    assert {pid for dummy, pid in hosts["containers"].runtime_identities("ctr-a")} == {1}
    assert summary_row(raised.stdout)[5] == "yes / yes"

    again = window(state_dir, tmp_path, shards)

    assert again.returncode == 0, again.stdout
    assert "No producer service to restart." in again.stdout
    assert_tied_by_pid(again.stdout)
    assert pids(state_dir) == after and len(restarted(tmp_path)) == len(CONCERNED) + 1


def test_a_controller_killed_after_the_first_batch_is_finished_by_the_same_command_each_service_once(bed, tmp_path):
    state_dir, db = bed
    shards = shard_counts(db).get("demo", 1) + 1
    recorded = len(ledger_rows(db))
    first_batch = ["image-1/app-a", "image-1/app-b", "image-2/app-a"]

    started = start_enqueue_shards(state_dir, shards, inventory=inventory(state_dir, tmp_path), batch_size=2,
                                   restart_timeout=60, output=tmp_path / "killed.out")
    wait_until(lambda: sorted(restarted(tmp_path)) == first_batch, WINDOW_SECONDS, "the first batch's restarts",
               interval=0.05)
    os.killpg(started.pid, signal.SIGKILL)
    started.wait(timeout=30)
    assert sorted(restarted(tmp_path)) == first_batch, "the second batch never began"

    again = window(state_dir, tmp_path, shards)

    assert again.returncode == 0, again.stdout
    assert len(ledger_rows(db)) == recorded + 1, "the count is not switched again"
    for name in first_batch:
        assert f"{name}: left alone - its runtime" in again.stdout, again.stdout
    assert sorted(restarted(tmp_path)) == sorted(CONCERNED), "each service restarted once in all"
    assert_tied_by_pid(again.stdout)


def test_a_hung_container_stops_the_window_and_its_re_run_restarts_only_what_is_not_done(bed, tmp_path):
    state_dir, db = bed
    hosts = shapes.load(state_dir)
    hosts["containers"].set_fault("ctr-b", "hang")
    shards = shard_counts(db).get("demo", 1) + 1

    stopped = window(state_dir, tmp_path, shards)

    assert stopped.returncode != 0
    message = failure_message(stopped.stdout)
    assert message.startswith("Rollout stopped at batch 2 of 2 (containers/ctr-a, containers/ctr-b, mixed/api, "
                              "mixed/web): containers/ctr-b did not come back: it runs (pid "), message
    assert "converged" not in stopped.stdout.split("Rollout stopped at batch", 1)[1].split(". ", 1)[0]
    assert "So far restarted: " in message and "not done: containers/ctr-b" in message

    hosts["containers"].set_fault("ctr-b", "none")
    again = window(state_dir, tmp_path, shards)

    assert again.returncode == 0, again.stdout
    for name in ("image-1/app-a", "image-1/app-b", "image-2/app-a", "containers/ctr-a", "mixed/api", "mixed/web"):
        assert f"{name}: left alone - " in again.stdout, (name, again.stdout)
    assert "containers/ctr-b: restart - it runs (pid " in again.stdout
    assert restarted(tmp_path).count("containers/ctr-b") == 2 and len(restarted(tmp_path)) == len(CONCERNED) + 1
    assert_tied_by_pid(again.stdout)


def test_two_windows_at_once_on_disjoint_limits_each_restart_their_own_and_never_wait_on_the_other(bed, tmp_path):
    state_dir, db = bed
    shards = shard_counts(db).get("demo", 1) + 1
    recorded = len(ledger_rows(db))
    limits = {"image-1,image-2": CONCERNED[:3], "containers,mixed": CONCERNED[3:]}
    path = inventory(state_dir, tmp_path)

    windows = {limit: start_enqueue_shards(state_dir, shards, "--limit", limit, inventory=path, batch_size=2,
                                           restart_timeout=60, output=tmp_path / f"{limit}.out")
               for limit in limits}
    codes = {limit: process.wait(timeout=WINDOW_SECONDS) for limit, process in windows.items()}
    outputs = {limit: (tmp_path / f"{limit}.out").read_text(encoding="utf-8") for limit in limits}

    assert list(codes.values()) == [0, 0], outputs
    assert shard_counts(db)["demo"] == shards and len(ledger_rows(db)) == recorded + 1
    assert sorted(restarted(tmp_path)) == sorted(CONCERNED)
    for limit, output in outputs.items():
        assert_tied_by_pid(output)
        done = len([name for name in limits[limit] if name != "mixed/web"]) + ("mixed/api" in limits[limit])
        # The other window's runtimes are outside this one, as many as run at this one's summary.
        assert re.search(rf"inventory: {done} of {done}(, \d+ outside)? runtimes", output), output
