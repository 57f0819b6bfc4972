"""The fleet benchmark's own accounting (benchmarks/fleet_timing.py, benchmarks/callback_plugins/bench_timer.py),
and what it counts of the role: a batch runs on its own hosts only.

The accounting needs no database and no hosts: a real ansible-playbook run
on localhost with the callback enabled, shaped like the role (tagged phases,
batches as a looped include with a restart and a wait per batch), and the
arithmetic on its record. No timing is asserted: only that every second
lands in one phase, that batches and their restarts are told apart, and
what runs where. The role's own count runs the change-window playbook on the
test bed with two inventory hosts (both this machine, one service each).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from awa_testbed import environment
from benchmarks import fleet_timing
from benchmarks.fleet import CALLBACKS, interleaved_batches, terminal_rows
from rollout_support import producer_inventory, set_enqueue_shards

PLAYBOOK = """
- name: Shaped like the role
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
    - name: Pickup
      ansible.builtin.include_tasks: {file: pickup.yml, apply: {tags: [enqueue_shards_pickup]}}
      tags: [enqueue_shards_pickup]
"""
PICKUP = """
- name: Plan the batches
  ansible.builtin.set_fact: {planned: true}
- name: Restart in batches
  ansible.builtin.include_tasks: batch.yml
  loop: "{{ batches }}"
  loop_control: {loop_var: batch, index_var: batch_index}
"""
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


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timer_env(timings: Path) -> dict[str, str]:
    """The environment that has ansible-playbook write the callback's record to ``timings``."""
    return {"ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS), "ANSIBLE_CALLBACKS_ENABLED": "bench_timer",
            "AWA_BENCH_TIMINGS": str(timings)}


def run_shaped_playbook(tmp_path: Path, batches: list) -> tuple[dict, float, float, float]:
    for name, text in (("play.yml", PLAYBOOK), ("pickup.yml", PICKUP), ("batch.yml", BATCH)):
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


def test_every_second_of_a_run_lands_in_one_phase_and_batches_are_told_apart(tmp_path):
    batches = interleaved_batches(["one", "two"], 2, ("awa-producer@1", "awa-producer@2"))
    assert batches == [[["one", "awa-producer@1"], ["two", "awa-producer@1"]],
                       [["one", "awa-producer@2"], ["two", "awa-producer@2"]]]
    record, started, ended, cpu = run_shaped_playbook(tmp_path, batches)

    measured = fleet_timing.breakdown(record, started, ended, controller="nobody", process_cpu=cpu)

    phases = measured["phases"]
    assert abs(sum(phases.values()) - measured["total_s"]) < 0.01
    assert phases["change"] >= 0.3 and phases["batch waits"] >= 0.4
    assert all(phases[name] > 0 for name in ("start-up", "validate", "restart plan", "restarts"))
    assert measured["batches"] == 2
    assert abs(sum(measured["phase_cpu"].values()) - cpu) < 0.01
    assert all(seconds >= 0 for seconds in measured["phase_cpu"].values())
    # Each task hands every host to a worker, skipped or not; run_once tasks only the first.
    assert measured["phase_dispatches"]["restarts"] == 4 and measured["phase_dispatches"]["batch waits"] == 2
    tasks = measured["tasks"]
    assert tasks["Wait for the batch"]["phase"] == "batch waits" and tasks["Wait for the batch"]["runs"] == 2
    assert tasks["Restart this host's units of the batch"]["host_runs"] == 4
    assert fleet_timing.restarted_batches(record, controller="nobody") == batches


def test_the_fit_over_hosts_is_the_fixed_cost_and_the_cost_of_one_more_host():
    assert fleet_timing.line_fit([(3, 40.0), (6, 49.0), (12, 67.0)]) == (31.0, 3.0)
    assert fleet_timing.line_fit([(3, 40.0), (3, 41.0)]) is None


def test_a_batch_runs_only_on_the_hosts_of_its_services_one_run_per_task(testbed, tmp_path, monkeypatch):
    # Two producer hosts (both this machine: the test bed's programs), one service each, one service a batch.
    first, second = environment.load_state(testbed)["programs"]
    inventory = producer_inventory(tmp_path, {"producer-a": {"enqueue_shards_services": [first]},
                                              "producer-b": {"enqueue_shards_services": [second]}})
    timings = tmp_path / "timings.json"
    for name, value in timer_env(timings).items():
        monkeypatch.setenv(name, value)

    # The batches are what is counted: the final wait and the summary are left out (they cost a minute under load).
    process = set_enqueue_shards(testbed, 3, "--skip-tags", "enqueue_shards_wait,enqueue_shards_summary",
                                 inventory=inventory, batch_size=1)

    assert process.returncode == 0, process.stdout + process.stderr
    record = json.loads(timings.read_text(encoding="utf-8"))
    measured = fleet_timing.breakdown(record, record["started"], record["ended"], controller="localhost")
    assert fleet_timing.restarted_batches(record, controller="localhost") == [[["producer-a", first]],
                                                                              [["producer-b", second]]]
    # Each batch runs on its own host (one run: the restart that reports how its service runs) and on the
    # database controller, never on the other producer host.
    first_batch, second_batch = measured["batch_task_host_runs"]
    assert first_batch["hosts"].keys() == {"producer-a", "localhost"}
    assert second_batch["hosts"].keys() == {"producer-b", "localhost"}
    assert first_batch["hosts"]["producer-a"] == second_batch["hosts"]["producer-b"] == 1
    assert first_batch["hosts"]["localhost"] == second_batch["hosts"]["localhost"]
    # A batch's cost does not grow with the fleet: each of its tasks ran on one host, whatever the play's hosts.
    batch_tasks = [task for task in fleet_timing.task_spans(record) if task["phase"] in fleet_timing.BATCH_PHASES]
    assert batch_tasks and all(len(fleet_timing.runs_of(task, "localhost")) == 1 for task in batch_tasks), [
        (task["name"], fleet_timing.runs_of(task, "localhost")) for task in batch_tasks]


def test_the_rows_counted_are_those_an_80_column_terminal_fills():
    # An empty line still takes a row; a line of 161 characters takes three.
    assert terminal_rows("TASK [x] ***\n" + "b" * 161 + "\n\nok: [h]\n", 80) == 1 + 3 + 1 + 1
