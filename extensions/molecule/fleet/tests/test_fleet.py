"""Molecule verify of the fleet scenario, on the producer hosts over SSH and in the database.

``molecule-pass.json`` (the test bed's state folder) names the pass that just
ran; ``units-<moment>.json`` hold every unit's main PID at earlier moments,
read over SSH by snapshot.yml. Tests of another pass skip.

* check: nothing changed in the database or on a host, nothing restarted;
* raise, lower, recover: the environment file as the role renders it, every
  unit restarted (new main PID) and started with that file, N of N runtimes
  on the new count; after the idempotent run the PIDs are still those of the
  raise; after the lowering the old shards have drained;
* fault: the run stopped at the broken unit's batch and named host and unit;
  earlier batches were restarted, later ones were not;
* recover: the re-run finished the rollout without restarting a unit the
  failed run had already restarted onto the new count.

Every pass: each running unit logged, at start, the values systemd read from
the environment file, and each unit enqueued and worked jobs.
"""

from __future__ import annotations

import json
import re

import pytest
from awa_testbed import queue_facts
from awa_testbed.verify_state import bed_state, molecule_pass, read_json, state_dir

testinfra_hosts = ["awa_producers"]

QUEUE = "demo"
ENV_FILE = "/etc/awa/producer.env"
# The role's default, merged under the scenario's enqueue_shards_environment.
REFRESH_LINE = "AWA_OVERRIDE_REFRESH_MS=1000"
# Seconds of clock difference allowed between a runtime's start and the change's commit.
CLOCK_MARGIN = 5


def superuser_dsn() -> str:
    return bed_state()["superuser_dsn"]


def snapshot(moment: str) -> list[dict]:
    """Every unit at ``moment`` (snapshot.yml): host, service, main PID, in the role's restart order."""
    return read_json(f"units-{moment}.json")


def units_at(moment: str, host) -> dict[str, int]:
    """Main PID of each unit of ``host`` at ``moment``."""
    return {unit["service"]: unit["pid"] for unit in snapshot(moment) if unit["host"] == inventory_name(host)}


def inventory_name(host) -> str:
    return host.backend.get_hostname()


def variables(host) -> dict:
    return host.ansible.get_variables()


def main_pids(host) -> dict[str, int]:
    services = variables(host)["enqueue_shards_services"]
    values = host.check_output("systemctl show --property=MainPID --value" + " %s" * len(services), *services).split()
    return dict(zip(services, map(int, values)))


def started_with(host, service: str, pid: int) -> dict:
    """The environment the process ``pid`` of ``service`` logged when it started (its journal line)."""
    journal = host.check_output("journalctl --unit %s --output cat --no-pager", service)
    found = re.findall(rf"pid={pid} environment (\{{.*\}})$", journal, re.MULTILINE)
    assert found, f"{service}: no journal line of pid {pid}:\n{journal[-2000:]}"
    return json.loads(found[-1])


def change_text(shards: int) -> str:
    # enqueue_shards_environment's AWA_FLEET_CHANGE (group_vars/all.yml).
    return f"{QUEUE} to {shards} shards"


def rollout_batches(output: str) -> dict[tuple[str, str], int]:
    """(host, service) -> its batch (from 0), as the run's restart plan announced it:
    "Restarting 5 producer service(s) in 3 batch(es) of at most 2: [fleet-1/a, fleet-2/b] then [...]"."""
    [plan] = [line for line in output.splitlines() if "producer service(s) in" in line and "Restarting" in line]
    listed = plan[plan.index(": [") + 2:].rstrip('",')
    return {tuple(member.strip().split("/", 1)): index
            for index, batch in enumerate(listed.split(" then "))
            for member in batch.strip("[]").split(",")}


def broken_unit(host) -> tuple[str, str]:
    return variables(host)["fleet_fault_host"], variables(host)["fleet_fault_service"]


def in_pass(*names: str) -> dict:
    if molecule_pass()["pass"] not in names:
        pytest.skip(f"checked after the {' / '.join(names)} pass")
    return molecule_pass()


# ---- after the check-mode run: nothing changed, nothing restarted ----

def test_check_mode_changed_nothing_in_the_database():
    in_pass("check")
    assert queue_facts.query(superuser_dsn(), "SELECT to_regnamespace('awa_operations')")[0][0] is None, \
        "the ledger schema was created"
    assert queue_facts.query(superuser_dsn(), "SELECT count(*) FROM awa.queue_meta WHERE queue = %s",
                             (QUEUE,))[0][0] == 0, "queue_meta was written"


def test_check_mode_changed_and_restarted_nothing_on_the_host(host):
    in_pass("check")
    env_file = host.file(ENV_FILE)
    assert env_file.content_string == "AWA_FLEET_CHANGE=none\n"
    assert (env_file.user, env_file.group, env_file.mode) == ("root", "root", 0o644)
    assert main_pids(host) == units_at("before-raise", host)


# ---- every pass ----

def test_queue_meta_holds_the_pass_count():
    stored = queue_facts.query(superuser_dsn(), "SELECT enqueue_shards FROM awa.queue_meta WHERE queue = %s",
                               (QUEUE,))
    assert (stored[0][0] if stored else 1) == molecule_pass()["shards"]


def test_each_running_unit_logged_the_environment_file_it_started_with(host):
    """The journal line of each unit's current main PID shows the values systemd read from the file."""
    pids = main_pids(host)
    text = host.file(ENV_FILE).content_string
    in_file = {"AWA_FLEET_CHANGE": None, "AWA_OVERRIDE_REFRESH_MS": None}
    for name in in_file:
        match = re.search(rf'^{name}=(?:"(.*)"|(.*))$', text, re.MULTILINE)
        in_file[name] = next((group for group in match.groups() if group is not None), None) if match else None
    not_restarted = set()
    if molecule_pass()["pass"] == "fault":
        not_restarted = {service for service, pid in units_at("before-fault", host).items() if pids[service] == pid}
    for service, pid in pids.items():
        if pid == 0 or service in not_restarted:
            continue
        assert started_with(host, service, pid) == in_file, service


def test_each_unit_enqueues_and_the_fleet_works_the_jobs():
    """Every unit is a real Awa application: its producer enqueues, and the units' runtimes complete jobs.

    Awa hands out jobs in claim batches, so a few runtimes may do all the work for a while: completions are
    counted over the fleet, not per unit.
    """
    # Each unit's --name is "<host name>/<unit>"; its producer adds "-<pid>".
    names = [f"{unit['host']}/{unit['service']}.service" for unit in snapshot("before-raise")]
    enqueued = dict(queue_facts.query(
        superuser_dsn(), "SELECT split_part(producer, '.service-', 1) || '.service', count(*) "
                         "FROM testbed.enqueued GROUP BY 1"))
    assert all(enqueued.get(name, 0) > 0 for name in names), enqueued
    completed = queue_facts.query(superuser_dsn(), "SELECT count(*) FROM testbed.completions WHERE worker = ANY(%s)",
                                  (names,))[0][0]
    assert completed > 0, "the fleet's runtimes completed no job"


# ---- after a real run: raise (and its idempotent re-run), lower, recover ----

def test_environment_file_is_rendered_with_owner_group_and_mode(host):
    shards = in_pass("raise", "lower", "recover")["shards"]
    env_file = host.file(ENV_FILE)
    assert (env_file.user, env_file.group, env_file.mode) == ("root", "awa", 0o640)
    lines = env_file.content_string.splitlines()
    assert lines[0].startswith("# ")
    assert f'AWA_FLEET_CHANGE="{change_text(shards)}"' in lines
    assert REFRESH_LINE in lines


def test_every_unit_runs_with_a_new_main_pid(host):
    rollout = in_pass("raise", "lower", "recover")
    before = units_at({"raise": "before-raise", "lower": "before-lower", "recover": "before-fault"}[rollout["pass"]],
                      host)
    now = main_pids(host)
    for service in now:
        assert host.service(service).is_running, service
        assert host.service(service).is_enabled, service
        assert now[service] not in (0, before[service]), f"{service} was not restarted"


def test_the_idempotent_run_restarted_nothing(host):
    in_pass("raise")
    # Verify runs after molecule's idempotence step: the PIDs must still be those noted after the raise.
    assert main_pids(host) == units_at("after-raise", host)


def test_every_live_runtime_runs_with_the_new_count():
    rollout = in_pass("raise", "lower", "recover")
    change = queue_facts.last_count_change(superuser_dsn(), QUEUE)
    assert change.to_shards == rollout["shards"]
    live = queue_facts.live_runtimes(superuser_dsn())
    units = len(snapshot("before-raise"))
    assert len(live) == units, f"{len(live)} live runtimes for {units} units"
    assert all(runtime.healthy for runtime in live)
    stragglers = [r for r in live if not queue_facts.converged_on(change, r, CLOCK_MARGIN)]
    assert not stragglers, f"not on change #{change.change_id}: {stragglers}"


def test_the_lowering_waited_until_the_retired_shards_drained():
    lowered = in_pass("lower")
    assert lowered["backlog_on_retired_shards"] > 0, "no backlog on shards 2..7 before the lowering: nothing to wait for"
    assert queue_facts.ready_beyond(superuser_dsn(), QUEUE, lowered["shards"]) == 0


# ---- after the run that met the broken unit ----

def test_the_failed_run_named_the_host_and_unit(host):
    in_pass("fault")
    output = (state_dir() / "fault-run.log").read_text(encoding="utf-8")
    stopped = [line for line in output.splitlines() if "Rollout stopped at batch" in line]
    assert stopped, output[-3000:]
    assert any(all(name in line for name in broken_unit(host)) for line in stopped), stopped


def test_batches_span_hosts(host):
    in_pass("fault")
    batches = rollout_batches((state_dir() / "fault-run.log").read_text(encoding="utf-8"))
    hosts_of = {}
    for (name, dummy), index in batches.items():
        hosts_of.setdefault(index, []).append(name)
    assert all(len(set(names)) == len(names) for names in hosts_of.values()), hosts_of
    assert len(batches) == 5 and len(hosts_of) == 3


def test_batches_before_the_broken_unit_were_restarted_and_later_ones_not(host):
    in_pass("fault")
    before, now = units_at("before-fault", host), main_pids(host)
    batches = rollout_batches((state_dir() / "fault-run.log").read_text(encoding="utf-8"))
    failed = batches[broken_unit(host)]
    assert 0 < failed < max(batches.values()), "the fault is meant for a middle batch"
    for service in now:
        batch = batches[(inventory_name(host), service)]
        if batch < failed:
            assert host.service(service).is_running, service
            assert now[service] != before[service], f"{service} (batch {batch + 1}) was not restarted"
        elif batch > failed:
            assert now[service] == before[service], f"{service} (batch {batch + 1}) was restarted"
        elif (inventory_name(host), service) != broken_unit(host):
            # The broken unit's neighbour in its batch was restarted, came back, and is not blamed.
            assert host.service(service).is_running and now[service] != before[service], service
            output = (state_dir() / "fault-run.log").read_text(encoding="utf-8")
            assert f"{inventory_name(host)}/{service} did not come back" not in output


def test_the_broken_unit_is_down(host):
    in_pass("fault")
    broken_host, broken_service = broken_unit(host)
    if inventory_name(host) != broken_host:
        pytest.skip("the broken unit runs on another host")
    assert not host.service(broken_service).is_running


# ---- after the re-run without the fault ----

def test_the_re_run_restarted_only_units_not_yet_on_the_new_count(host):
    """Units restarted by the failed run after the change already run the new count: no second restart."""
    in_pass("recover")
    before, after_fault, now = units_at("before-fault", host), units_at("after-fault", host), main_pids(host)
    for service, pid in after_fault.items():
        if pid not in (0, before[service]):
            assert now[service] == pid, f"{service} was restarted again"
