"""The fleet benchmark's own accounting (benchmarks/fleet_timing.py, benchmarks/callback_plugins/bench_timer.py),
its model (benchmarks/fleet_model.py), and what it counts of the role: a batch's restarts run on its own hosts
alone, a producer host costs the role the task x host runs it costs the floor plus its checks, and a window's
output grows by a few lines a host and a batch, not with its queues.

The accounting and the model need no database and no hosts: a real
ansible-playbook run on localhost with the callback enabled, shaped like the
change-window playbook (tagged phases, a play per batch of hosts with
serial, a restart and a wait per batch) or like the role's main entry point
(the batches as a looped include), the arithmetic on its record, and the
model on numbers written here. No timing is asserted: only that every
second lands in one phase, that batches and their restarts are told apart,
and what runs where. The role's own counts run the change-window playbook,
and the benchmark's floor (benchmarks/playbooks/fleet_floor.yml), on the test
bed with two and with three inventory hosts (all this machine, one test bed
program each), in two batches of hosts each as the fleet benchmark restarts
them; its lines, windows on two and three hosts in one to three batches.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from awa_testbed import environment
from benchmarks import fleet_model, fleet_timing
from benchmarks.fleet import CALLBACKS, PLAYBOOKS, floor_sql, floor_vars, host_batches, printed_lines, terminal_rows
from benchmarks.fleet_report import QUEUE_LINES_LIMIT
from enqueue_shards_support import ansible_command
from rollout_support import PLAYBOOK as CHANGE_WINDOW, TESTBED_INVENTORY, producer_inventory, set_enqueue_shards

# The window's start, shaped like the role's: a check on every host, the change once, the restart plan.
START_PLAY = """
- name: Shaped like the role - the window's start
  hosts: all
  gather_facts: false
  tasks:
    - name: Validate
      ansible.builtin.assert: {that: true, quiet: true}
      tags: [always]
    - name: Change
      ansible.builtin.command: sleep 0.3
      changed_when: true
      run_once: true
      tags: [enqueue_shards_change]
    - name: Plan the batches
      ansible.builtin.set_fact: {planned: true}
      tags: [enqueue_shards_pickup]
"""
# A batch's restart and its wait, once on the database controller (here: the first host of the batch).
BATCH = """
- name: Restart this host's units of the batch
  ansible.builtin.service: {name: "{{ item }}", state: restarted}
  loop: "{{ batch | selectattr('0', 'equalto', inventory_hostname) | map(attribute='1') | list }}"
  check_mode: true
  failed_when: false
- name: Wait for the batch
  ansible.builtin.command: sleep 0.2
  changed_when: false
  run_once: true
  tags: [bench_wait]
"""
# The batches as the change-window playbook and the floor run them: a play per batch of hosts (serial), the batch's
# tasks imported with the pickup's tag.
SERIAL_BATCHES = """
- name: Shaped like the role - a batch of hosts
  hosts: all
  gather_facts: false
  serial: 1
  vars:
    batch: "{{ batches | flatten(1) | selectattr('0', 'in', ansible_play_batch) | list }}"
  tasks:
    - name: The batch
      ansible.builtin.import_tasks: batch.yml
      tags: [enqueue_shards_pickup]
"""
# The batches as the role's main entry point runs them (and both playbooks did before the play per batch): in one
# play, each batch included once on every host, whose hosts outside it skip its restart.
INCLUDED_BATCHES = """
- name: Shaped like the role - the batches in one play
  hosts: all
  gather_facts: false
  tasks:
    - name: Restart in batches
      ansible.builtin.include_tasks: {file: batch.yml, apply: {tags: [enqueue_shards_pickup]}}
      loop: "{{ batches }}"
      loop_control: {loop_var: batch, index_var: batch_index}
      tags: [enqueue_shards_pickup]
"""
SHAPES = {"a play per batch": SERIAL_BATCHES, "a looped include": INCLUDED_BATCHES}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timer_env(timings: Path) -> dict[str, str]:
    """The environment that has ansible-playbook write the callback's record to ``timings``."""
    return {"ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS), "ANSIBLE_CALLBACKS_ENABLED": "bench_timer",
            "AWA_BENCH_TIMINGS": str(timings)}


def run_shaped_playbook(tmp_path: Path, batches_play: str, batches: list) -> tuple[dict, float, float, float]:
    """The shaped playbook (START_PLAY, then ``batches_play``) on hosts one and two restarting ``batches``: the
    callback's record, when it started and ended, and the CPU it used."""
    for name, text in (("play.yml", START_PLAY + batches_play), ("batch.yml", BATCH)):
        (tmp_path / name).write_text(text, encoding="utf-8")
    timings = tmp_path / "timings.json"
    env = {**os.environ, **timer_env(timings)}
    started, cpu_before = time.time(), children_cpu()
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "one,two,", "-c", "local", "play.yml",
         "-e", json.dumps({"batches": batches, "ansible_python_interpreter": sys.executable})],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    ended = time.time()
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(timings.read_text(encoding="utf-8")), started, ended, children_cpu() - cpu_before


@pytest.mark.parametrize("shape", SHAPES)
def test_every_second_of_a_run_lands_in_one_phase_and_batches_are_told_apart(tmp_path, shape):
    # Batches of one host, each host with all of its units, as the role cuts them.
    batches = host_batches({host: ["awa-producer@1", "awa-producer@2"] for host in ("one", "two")}, 1)
    assert batches == [[["one", "awa-producer@1"], ["one", "awa-producer@2"]],
                       [["two", "awa-producer@1"], ["two", "awa-producer@2"]]]
    record, started, ended, cpu = run_shaped_playbook(tmp_path, SHAPES[shape], batches)

    measured = fleet_timing.breakdown(record, started, ended, controller="nobody", process_cpu=cpu)

    phases = measured["phases"]
    assert abs(sum(phases.values()) - measured["total_s"]) < 0.01
    assert phases["change"] >= 0.3 and phases["batch waits"] >= 0.4
    assert all(phases[name] > 0 for name in ("start-up", "validate", "restart plan", "restarts"))
    assert measured["batches"] == 2
    assert abs(sum(measured["phase_cpu"].values()) - cpu) < 0.01
    assert all(seconds >= 0 for seconds in measured["phase_cpu"].values())
    # A batch's restart is handed to its own host (a play per batch), or to every host, skipped outside the batch
    # (a looped include); the wait, run once, to one host a batch.
    every_host = shape == "a looped include"
    assert measured["phase_dispatches"]["restarts"] == (4 if every_host else 2)
    assert measured["phase_dispatches"]["batch waits"] == 2
    tasks = measured["tasks"]
    assert tasks["Wait for the batch"]["phase"] == "batch waits" and tasks["Wait for the batch"]["runs"] == 2
    assert tasks["Restart this host's units of the batch"]["host_runs"] == 4
    assert fleet_timing.restarted_batches(record, controller="nobody") == batches
    costs = fleet_model.run_costs({"timings": record, "wall_s": ended - started, "controller_cpu_s": cpu}, measured,
                                  hosts=2, controller="nobody", forks=5)
    assert (costs.dispatches, costs.every_host) == ((4, True) if every_host else (2, False))


def test_the_fit_over_hosts_is_the_fixed_cost_and_the_cost_of_one_more_host():
    assert fleet_timing.line_fit([(3, 40.0), (6, 49.0), (12, 67.0)]) == (31.0, 3.0)
    assert fleet_timing.line_fit([(3, 40.0), (3, 41.0)]) is None


# Producer hosts of the counted runs, each one test bed program: the role and the floor on the first two, then on
# all three. The final wait and the summary run once whatever the hosts, and are left out (a minute under load).
PRODUCERS = ("producer-a", "producer-b", "producer-c")
HOST_COUNTS = (2, 3)
RUN_ONCE_PHASES = "enqueue_shards_wait,enqueue_shards_summary"
# The floor changes a new queue of its own each run, as the benchmark's does.
FLOOR_SHARDS = 4
# The runs the role adds on each producer host beyond the floor's there (the environment file, which the role writes
# in its services' read, and the restart): its 2 checks - the validation (the types of the argument spec with it)
# and the reach. The plays per batch of hosts add none.
ROLE_CHECKS_PER_HOST = 2
# The role's defaults for the environment file, said to the floor as the benchmark's inventory says them.
ENV_FILE_MODE = {"enqueue_shards_environment": {}, "enqueue_shards_env_file_owner": "root",
                 "enqueue_shards_env_file_group": "root", "enqueue_shards_env_file_mode": "0640"}
# The windows whose lines are counted, as (producer hosts, enqueue_shards_batch_size): 2 and 3 hosts in 1 to 3
# batches, the bed's three programs on either (on two hosts the second runs two), so that the services - and the
# lines each gets - stay the same; each window changes a new queue, as the fleet benchmark does.
LINES_WINDOWS = ((2, 2), (2, 1), (3, 3), (3, 1))
# What a window prints (issue 57): at most a fixed part plus so many lines a host and so many a batch - the role's,
# measured (5 and 11 over 128 fixed, docs/performance.md section 6), with room for a poll's line or two more.
LINES_PER_HOST, LINES_PER_BATCH = 7, 13


@pytest.fixture(scope="module")
def testbed() -> Iterator[Path]:
    """This module's test bed: the conftest's, with three programs, so that three producer hosts have one each."""
    with environment.temporary(major=18, apps=3, queue="demo", produce_rate=1.0) as state_dir:
        yield state_dir


def run_floor(state_dir: Path, inventory: Path, folder: Path, batches: list) -> dict:
    """The benchmark's floor on the test bed's hosts, restarting ``batches``; the callback's record."""
    state = environment.load_state(state_dir)
    sql_file, vars_file, timings = folder / "floor.sql", folder / "floor-vars.json", folder / "floor-timings.json"
    sql_file.write_text(floor_sql(state["superuser_dsn"], [f"floor_{len(batches)}b_{folder.name}"], FLOOR_SHARDS,
                                  state["runtime_roles"]), encoding="utf-8")
    psql = Path(state["server"]["bin_dir"]) / "psql"
    vars_file.write_text(json.dumps({**floor_vars(psql, state["login"], sql_file, batches, time.time(), 1.0),
                                     **ENV_FILE_MODE}), encoding="utf-8")
    process = ansible_command("ansible-playbook", "-i", str(inventory), str(PLAYBOOKS / "fleet_floor.yml"),
                              "-e", f"@{vars_file}",
                              env_extra={"AWA_TESTBED_STATE": str(state_dir), **timer_env(timings)})
    assert process.returncode == 0, process.stdout + process.stderr
    return json.loads(timings.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def counted_runs(testbed, tmp_path_factory) -> dict[tuple[str, int], dict]:
    """(run, hosts) -> the callback's record: the role, then the floor restarting the role's batches, on 2 and on 3
    producer hosts; two batches of hosts each, as the fleet benchmark restarts them (half the hosts at once, rounded
    up). One run each, shared by the tests that count them."""
    programs = environment.load_state(testbed)["programs"]
    records = {}
    with pytest.MonkeyPatch.context() as patch:
        for hosts in HOST_COUNTS:
            folder = tmp_path_factory.mktemp(f"hosts-{hosts}")
            inventory = producer_inventory(folder, {name: {"enqueue_shards_services": [program]}
                                                    for name, program in zip(PRODUCERS[:hosts], programs)})
            timings = folder / "role-timings.json"
            for name, value in timer_env(timings).items():
                patch.setenv(name, value)
            # Each run raises queue demo once more: 1 -> 2 on two hosts, 2 -> 3 on three.
            process = set_enqueue_shards(testbed, hosts, "--skip-tags", RUN_ONCE_PHASES, inventory=inventory,
                                         batch_size=math.ceil(hosts / 2))
            assert process.returncode == 0, process.stdout + process.stderr
            records["role", hosts] = json.loads(timings.read_text(encoding="utf-8"))
            batches = fleet_timing.restarted_batches(records["role", hosts], controller="localhost")
            records["floor", hosts] = run_floor(testbed, inventory, folder, batches)
    return records


def breakdown_of(record: dict) -> dict:
    return fleet_timing.breakdown(record, record["started"], record["ended"], controller="localhost")


def runs_per_added_host(counted_runs: dict, kind: str) -> dict[str, int]:
    """The tasks of ``kind``'s runs with more task x host runs on 3 hosts than on 2: how many more."""
    fewer, more = (breakdown_of(counted_runs[kind, hosts])["tasks"] for hosts in HOST_COUNTS)
    return {name: entry["task_host_runs"] - fewer.get(name, {}).get("task_host_runs", 0)
            for name, entry in more.items() if entry["task_host_runs"] > fewer.get(name, {}).get("task_host_runs", 0)}


def test_a_producer_host_costs_the_role_at_most_the_floor_s_task_x_host_runs_and_its_checks(testbed, counted_runs):
    # The floor restarts what the role restarted, batch by batch: the same work on the same hosts.
    for hosts in HOST_COUNTS:
        batches = fleet_timing.restarted_batches(counted_runs["role", hosts], controller="localhost")
        assert len(batches) == 2
        assert fleet_timing.restarted_batches(counted_runs["floor", hosts], controller="localhost") == batches
    runs = {key: breakdown_of(record)["task_host_runs"] for key, record in counted_runs.items()}

    per_host = {kind: fleet_model.runs_over_hosts([(hosts, runs[kind, hosts]) for hosts in HOST_COUNTS])
                for kind in ("role", "floor")}

    # One more producer host costs the floor its environment file and its restart, and the role those (the file in
    # its services' read) and its checks of the host. A batch's
    # checks are fixed runs (database steps, verdicts), not runs on every host.
    added = {kind: runs_per_added_host(counted_runs, kind) for kind in ("role", "floor")}
    assert per_host["role"]["per_host"] <= per_host["floor"]["per_host"] + ROLE_CHECKS_PER_HOST, (runs, added)
    assert per_host["floor"]["per_host"] > 0
    assert per_host["role"]["fixed"] > per_host["floor"]["fixed"], runs
    # The model (benchmarks/fleet_model.py) splits those runs into host tasks, each once on every host, and the
    # batches, each dispatched to its own hosts alone, which restart in one wave a batch (forks 5).
    record, hosts = counted_runs["role", HOST_COUNTS[-1]], HOST_COUNTS[-1]
    costs = fleet_model.run_costs({"timings": record, "wall_s": record["ended"] - record["started"],
                                   "controller_cpu_s": record["cpu_ended"] - record["cpu_started"]},
                                  breakdown_of(record), hosts, controller="localhost", forks=5)
    assert costs.restarted_hosts == costs.dispatches == hosts and costs.batches == 2 and not costs.every_host
    assert costs.host_runs == costs.host_tasks * hosts, costs
    assert costs.restart_wave_s == costs.restarts_s / costs.batches


def test_a_batch_s_restarts_run_on_its_own_hosts_alone_and_its_database_steps_once(testbed, counted_runs):
    # Three producer hosts (all this machine: the test bed's programs), one service each, in two batches of hosts.
    first, second, third = environment.load_state(testbed)["programs"][:3]
    record = counted_runs["role", 3]

    measured = breakdown_of(record)

    assert fleet_timing.restarted_batches(record, controller="localhost") == [
        [["producer-a", first], ["producer-b", second]], [["producer-c", third]]]
    # Each batch's restart runs on its hosts at once - one task, a run on each - and on no other host: no run of a
    # batch is skipped on a host outside it.
    spans = fleet_timing.task_spans(record)
    restarts = [task for task in spans if task["phase"] == "restarts"]
    assert [sorted((host, outcome) for host, outcome, dummy, dummy_seconds in fleet_timing.runs_of(task, "localhost"))
            for task in restarts] == [[("producer-a", "changed"), ("producer-b", "changed")],
                                      [("producer-c", "changed")]]
    assert [sorted(batch["hosts"]) for batch in measured["batch_task_host_runs"]] == [
        ["localhost", "producer-a", "producer-b"], ["localhost", "producer-c"]]
    # Its database steps (the wait, the watch, the verdict), the same in each batch, run once, on the database
    # controller.
    steps = {batch: [task for task in spans if task["batch"] == batch
                     and any(host == "localhost" for host, *dummy in fleet_timing.runs_of(task, "localhost"))]
             for batch in dict.fromkeys(task["batch"] for task in restarts)}
    names = [[task["name"] for task in tasks] for tasks in steps.values()]
    assert names[0] and all(tasks == names[0] for tasks in names), names
    assert all([host for host, *dummy in fleet_timing.runs_of(task, "localhost")] == ["localhost"]
               for tasks in steps.values() for task in tasks), steps


def test_the_rows_counted_are_those_an_80_column_terminal_fills():
    # An empty line still takes a row; a line of 161 characters takes three.
    assert terminal_rows("TASK [x] ***\n" + "b" * 161 + "\n\nok: [h]\n", 80) == 1 + 3 + 1 + 1


def window_lines(state_dir: Path, folder: Path, queues: int) -> tuple[int, str]:
    """The change window in check mode on the test bed for ``queues`` new queues: the lines it printed (counted as
    the benchmark counts them), and its output."""
    vars_file = folder / f"queues-{queues}.json"
    vars_file.write_text(json.dumps({"enqueue_shards_queues": [{"queue": f"lines_{index:03d}", "shards": 4,
                                                                "new_queue": True} for index in range(queues)]}),
                         encoding="utf-8")
    process = ansible_command("ansible-playbook", "-i", str(TESTBED_INVENTORY), str(CHANGE_WINDOW),
                              "-e", f"@{vars_file}", "--check", env_extra={"AWA_TESTBED_STATE": str(state_dir)})
    assert process.returncode == 0, process.stdout + process.stderr
    return printed_lines(process.stdout, process.stderr), process.stdout + process.stderr


def test_a_window_of_100_queues_prints_about_as_many_lines_as_a_window_of_one(testbed, tmp_path):
    # Check mode prints the preflight, the change, the plan and the summary of every queue, and restarts nothing.
    one, dummy = window_lines(testbed, tmp_path, 1)

    hundred, output = window_lines(testbed, tmp_path, 100)

    # Past 3 queues each line that would name a queue names them as a range (docs/runbook.md, "What the output
    # means"), so the output does not grow with the queues.
    assert "lines_000..lines_099" in output
    assert hundred <= one + QUEUE_LINES_LIMIT, output


@pytest.fixture(scope="module")
def lines_fit(testbed, tmp_path_factory) -> dict:
    """The change window's lines on LINES_WINDOWS, each window's (hosts, batches, lines), and the plane through them:
    lines = fixed + per host x hosts + per batch x batches."""
    programs = environment.load_state(testbed)["programs"]
    windows = []
    for hosts, batch_size in LINES_WINDOWS:
        folder = tmp_path_factory.mktemp(f"lines-{hosts}h-{batch_size}")
        services = {name: [program] for name, program in zip(PRODUCERS, programs)} if hosts == 3 else \
            {PRODUCERS[0]: programs[:1], PRODUCERS[1]: programs[1:]}
        inventory = producer_inventory(folder, {name: {"enqueue_shards_services": units}
                                                for name, units in services.items()})
        queue = {"queue": f"lines_{hosts}h_{batch_size}", "shards": 4, "new_queue": True}
        process = set_enqueue_shards(testbed, 4, inventory=inventory, batch_size=batch_size, queues=[queue])
        assert process.returncode == 0, process.stdout + process.stderr
        windows.append((hosts, math.ceil(hosts / batch_size), printed_lines(process.stdout, process.stderr)))
    fixed, per_host, per_batch = fleet_timing.plane_fit(windows)
    return {"windows": windows, "fixed": fixed, "per_host": per_host, "per_batch": per_batch}


def test_a_window_prints_a_fixed_part_and_a_few_lines_a_host_and_a_batch(lines_fit):
    # The fit through windows on 2 and 3 hosts in 1 to 3 batches, printed as the benchmark counts them (standard
    # output and the warnings): lines a host for each task on every host and in its batch, lines a batch for each
    # batch's play and its tasks on the database controller - no line for a host outside a batch.
    fit = {name: round(lines_fit[name], 1) for name in ("fixed", "per_host", "per_batch")}

    assert 0 < fit["per_host"] <= LINES_PER_HOST and 0 < fit["per_batch"] <= LINES_PER_BATCH, (fit, lines_fit)
    assert fit["fixed"] > 0, (fit, lines_fit)


# A role's run on 3 hosts, in the parts of the model (benchmarks/fleet_model.py): 12 runs of 4 host tasks, 3 hosts
# restarted in 2 batches of one wave each, each batch dispatched to its own hosts (3 dispatches in all).
COSTS = fleet_model.RunCosts(hosts=3, wall_s=12.0, task_host_runs=40, controller_cpu_s=9.0, host_tasks=4,
                             host_runs=12, host_task_s=2.0, cpu_per_host_run=0.1, main_cpu_per_host_run=0.02,
                             host_run_s=0.4, restarted_hosts=3, restarts_s=1.0, restart_wave_s=0.5, dispatches=3,
                             restart_cpu_per_dispatch=0.05, restart_main_cpu_per_dispatch=0.01, batches=2,
                             batch_s=1.5, db_cpu_per_batch=None)
# The same run had each batch reached every producer host (one play including each batch on every host).
EVERY_HOST_COSTS = dataclasses.replace(COSTS, dispatches=6)


def test_the_model_takes_the_fixed_part_as_what_hosts_and_batches_leave_of_the_measured_run():
    assert COSTS.fixed_s == 12.0 - 2.0 - 1.0 - 2 * 1.5
    assert fleet_model.runs_over_hosts([(3, 40), (12, 85)]) == {"fixed": 25.0, "per_host": 5.0}
    assert fleet_model.runs_over_hosts([(3, 40)]) is None
    # Each added host adds its host tasks' CPU and its dispatch in its own batch: 12 / 3 x 0.1 + 3 / 3 x 0.05 a
    # host; reached by every batch, a dispatch in each: 12 / 3 x 0.1 + 6 / 3 x 0.05.
    assert not COSTS.every_host and EVERY_HOST_COSTS.every_host
    assert abs(fleet_model.projected_cpu(COSTS, 6) - (9.0 + 3 * 0.45)) < 1e-9
    assert abs(fleet_model.projected_cpu(EVERY_HOST_COSTS, 6) - (9.0 + 3 * 0.5)) < 1e-9


def test_the_cpu_per_host_is_refitted_over_host_counts_as_the_slope_of_each_part_s_cpu():
    # Each host task costs 1 s whatever the hosts plus 0.1 s a host; the batches' dispatches 0.5 s plus 0.05 s a
    # dispatch (one a host: each batch reaches its own hosts): measured on 3 hosts alone, the per-task second is read
    # as a cost per host.
    def measured(hosts: int) -> fleet_model.RunCosts:
        return dataclasses.replace(COSTS, hosts=hosts, host_runs=4 * hosts, cpu_per_host_run=(1 + 0.1 * hosts) / hosts,
                                   dispatches=hosts, restart_cpu_per_dispatch=(0.5 + 0.05 * hosts) / hosts)

    refitted = fleet_model.fitted(measured(3), [measured(6), measured(3), measured(12)])

    assert abs(measured(3).cpu_per_host_run - 0.433) < 1e-3
    assert abs(refitted.cpu_per_host_run - 0.1) < 1e-9 and abs(refitted.restart_cpu_per_dispatch - 0.05) < 1e-9
    # The rest is the fewest hosts' run; one host count is that run as measured.
    assert refitted.hosts == 3 and refitted.wall_s == COSTS.wall_s
    assert fleet_model.fitted(measured(3), [measured(3)]) == measured(3)


def test_a_task_takes_its_waves_its_cpu_over_the_cores_or_its_main_process_cpu_whichever_is_longest():
    # 1,000 hosts, 10 batches of 100: a host task with forks 5 is 200 waves of 0.4 s; forks 50 on 4 cores 100 s of
    # CPU over 4; on 16 cores the main process's 20 s, which one core runs whatever the forks. A batch's restart is
    # its 100 hosts in waves of 0.5 s (20 with forks 5: 10 s), or its 100 dispatches: 5 s of CPU over 4 cores, or
    # 1 s in the main process (2 waves with forks 50: 1 s).
    expected = {(5, 4): (80.0, "forks", 10.0), (50, 4): (25.0, "cores", 1.25), (50, 16): (20.0, "main process", 1.0)}
    for (forks, cores), (seconds, bound, restart) in expected.items():
        controller = fleet_model.Controller(cores=cores, forks=forks)

        window = fleet_model.projected(COSTS, 1000, controller, batches=10)

        assert abs(window["host tasks"] - 4 * seconds) < 1e-9 and fleet_model.bound_of(COSTS, 1000, controller) == bound
        assert abs(window["restarts"] - 10 * restart) < 1e-9 and window["batches"] == 10 * 1.5
        assert abs(window["total"] - (COSTS.fixed_s + 4 * seconds + 10 * restart + 15)) < 1e-9


def test_a_batch_dispatched_to_every_host_takes_its_dispatches_to_all_of_them_not_its_waves():
    controller = fleet_model.Controller(cores=16, forks=50)

    own = fleet_model.projected(COSTS, 1000, controller, batches=10)
    every = fleet_model.projected(COSTS, 1000, controller, batches=10, every_host=True)

    # A batch of 100 hosts: 2 waves of 0.5 s, and 100 dispatches of 0.01 s in the main process - 1 s; dispatched to
    # all 1,000 hosts (one play including each batch on every host), their 10 s. Nothing else changes.
    assert abs(own["restarts"] - 10 * 1.0) < 1e-9 and abs(every["restarts"] - 10 * 10.0) < 1e-9
    assert (own["host tasks"], own["batches"], own["fixed"]) == (every["host tasks"], every["batches"], every["fixed"])


def test_the_database_cpu_of_a_batch_is_what_the_server_used_over_the_batches_beyond_its_idle_rate():
    breakdown = {"batches": 2, "phase_db_cpu": {"restarts": 0.5, "batch waits": 1.0, "batch checks": 0.5},
                 "phases": {"restarts": 2.0, "batch waits": 4.0, "batch checks": 2.0}}

    # 2.0 s of CPU over 8 s of batches, 0.1 s a second of it idle: 1.2 s, 0.6 s a batch.
    assert abs(fleet_model.db_cpu_per_batch(breakdown, idle_cpu_per_s=0.1) - 0.6) < 1e-9
    assert fleet_model.db_cpu_per_batch(breakdown, idle_cpu_per_s=None) is None
