"""Molecule verify of the fleet scenarios, on the producer hosts over SSH and in the database.

``molecule-pass.json`` (the test bed's state folder) names the pass that just
ran; ``units-<moment>.json`` hold every unit's main PID at earlier moments,
read over SSH by snapshot.yml; ``run-<name>.json`` the JSON output of a run
started in the background (the role's restart plan and verdicts). A test
marked ``passes(NAME, ...)`` runs after those passes only: conftest.py
deselects the others, so each verify runs just its pass's tests.

* check: nothing changed in the database or on a host, nothing restarted;
  its output (ANSIBLE_LOG_PATH) and its report name the secrets the
  environment file's diff would rotate, and show neither their old values
  nor their new ones;
* raise, return, recover, lower: the environment file as the role renders
  it, every unit runs a runtime on the new count (its journal shows the
  runtime started in its current process); after the idempotent run the PIDs
  are still those of the raise; the raise's batches followed serial [1, "50%"]
  with the canary's pause; after the return and the lowering (fleet_pg17's)
  the old shards have drained;
* vanish: the host that lost its power mid-rollout was named with its units
  not checked or restarted; the canary was restarted, later batches not;
* return: only the units still on the old count were restarted;
* fault: the run stopped at the broken units' batch and named both (the hung
  unit by its pid, the one in a restart loop); earlier batches were
  restarted, later ones were not;
* recover: the re-run restarted the hung unit (it started after the change,
  but no runtime of it was live) and left alone the units the failed run had
  brought onto the new count;
* missing: a unit name systemd does not know stopped the window at the reach,
  naming each host and the unit; the count and every unit are as they were.

A Debian 11 host (fleet-1, fleet_host_release): after the raise, it is
Debian 11 with systemd 247 and Python 3.9 as /usr/bin/python3 (the
interpreter the role's module ran with there), and its units run the
producer from the Debian 12 root directory.

Every pass: the server runs the scenario's PostgreSQL major (AWA_FLEET_MAJOR,
its molecule.yml: 18 for fleet, 17 for fleet_pg17), each running unit logged,
at start, the values systemd read from the environment file, and each unit
enqueued and worked jobs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from awa_testbed import queue_facts
from awa_testbed.verify_state import bed_state, molecule_pass, read_json, state_dir
from awa_testbed.waiting import wait_until

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
    """The environment the process ``pid`` of ``service`` logged when it started (its journal line).

    A process logs it as it starts, so one that started a moment ago may not have yet (longer under load), and
    in a restart loop the unit's main PID moves on meanwhile: wait for the line of the main PID as it is then.
    """
    seen = {"pid": pid, "journal": ""}

    def logged() -> str | None:
        seen["journal"] = host.check_output("journalctl --unit %s --output cat --no-pager", service)
        found = re.findall(rf"pid={logged_pid(host, service, seen['pid'])} environment (\{{.*\}})$", seen["journal"],
                           re.MULTILINE)
        if not found:
            seen["pid"] = main_pids(host)[service] or seen["pid"]
        return found[-1] if found else None

    return json.loads(wait_until(logged, 60, lambda: f"{service}: a journal line of pid {seen['pid']}:\n"
                                                     f"{seen['journal'][-2000:]}", interval=1))


def change_text(shards: int) -> str:
    # enqueue_shards_environment's AWA_FLEET_CHANGE (group_vars/all.yml).
    return f"{QUEUE} to {shards} shards"


def run_output(name: str) -> dict:
    """The JSON output (callback_plugins/fleet_json.py) of a run started in the background (tasks/start_window.yml)."""
    return read_json(f"run-{name}.json")


def run_results(name: str) -> list[tuple[str, dict]]:
    """(task name, host result) of every task of a run, in order."""
    return [(task["task"]["name"], result) for play in run_output(name)["plays"] for task in play["tasks"]
            for result in task["hosts"].values()]


def restart_plan(name: str) -> dict:
    """The role's restart plan of a run (the rollout's state its plan task set, in the window's state)."""
    [plan] = [result["ansible_facts"]["_enqueue_shards_window_state"]["rollout"] for task, result in run_results(name)
              if task.endswith("Pickup | plan the restarts over every host") and "ansible_facts" in result]
    return plan


def stop_message(name: str) -> str:
    """The message the window stopped with: its record fails the run with the batch's verdict (said once), what is
    done and left, the report and the back-out."""
    failed = [(task, result.get("msg")) for task, result in run_results(name) if result.get("failed")]
    assert len(failed) == 1, failed
    [(dummy, record)] = failed
    assert record.startswith("Rollout stopped at batch") and "The window's report: " in record, record
    return record


def logged_pid(host, service: str, pid: int) -> int:
    """The pid the unit's worker logs: its main pid, or 1 for the container unit (pid 1 of its namespace)."""
    unit = variables(host)["fleet_container_unit"]
    return 1 if (inventory_name(host), service) == (unit["host"], unit["service"]) else pid


def newest_report() -> dict:
    """The JSON report of the last window run (enqueue_shards_report_dir is the test bed's state folder)."""
    return json.loads(max(state_dir().glob("enqueue_shards-*.json")).read_text(encoding="utf-8"))


def batch_of(name: str) -> dict[tuple[str, str], int]:
    """(host, service) -> its batch (from 0) in the run's restart plan."""
    return {tuple(member): index for index, batch in enumerate(restart_plan(name)["batches"]) for member in batch}


def broken_units(host) -> dict[tuple[str, str], str]:
    """(host, service) -> fault of the units fault.yml breaks."""
    return {(fault["host"], fault["service"]): fault["fault"] for fault in variables(host)["fleet_faults"]}


def runs_a_runtime(host, service: str, pid: int) -> bool:
    """Whether the unit's process ``pid`` started its Awa runtime (the worker logs it once the runtime runs)."""
    journal = host.check_output("journalctl --unit %s --output cat --no-pager", service)
    return re.search(rf"^worker \S+ pid={logged_pid(host, service, pid)} started queues", journal, re.MULTILINE) \
        is not None


# ---- after the check-mode run: nothing changed, nothing restarted ----

@pytest.mark.passes("check")
def test_check_mode_changed_nothing_in_the_database():
    assert queue_facts.query(superuser_dsn(), "SELECT to_regnamespace('awa_operations')")[0][0] is None, \
        "the ledger schema was created"
    assert queue_facts.query(superuser_dsn(), "SELECT count(*) FROM awa.queue_meta WHERE queue = %s",
                             (QUEUE,))[0][0] == 0, "queue_meta was written"


@pytest.mark.passes("check")
def test_check_mode_changed_and_restarted_nothing_on_the_host(host):
    env_file = host.file(ENV_FILE)
    assert env_file.content_string.startswith("AWA_FLEET_CHANGE=none\n")
    assert f"AWA_RESULTS_TOKEN={variables(host)['fleet_secrets_before']['token']}\n" in env_file.content_string
    assert (env_file.user, env_file.group, env_file.mode) == ("root", "root", 0o644)
    assert main_pids(host) == units_at("before-raise", host)


def check_pass_output() -> str:
    """What the check pass printed: its run in the log (ANSIBLE_LOG_PATH), from its first play to its recap."""
    log = Path(os.environ["ANSIBLE_LOG_PATH"]).read_text(encoding="utf-8")
    start = log.rindex("PLAY [Mark the raise pass for verify]")
    return log[start:log.index("PLAY RECAP", start)]


@pytest.mark.passes("check")
def test_the_check_pass_names_the_rotated_secrets_and_shows_no_value_of_them(host):
    output = check_pass_output()
    # Each host's diff, over SSH: the secrets named and masked, the value enqueue_shards_env_file_show lists shown.
    for line in ("~AWA_RESULTS_URL=******** (changed)", "~AWA_RESULTS_TOKEN=******** (changed)",
                 f'~AWA_FLEET_CHANGE="{change_text(8)}" (changed from none)', "+AWA_OVERRIDE_REFRESH_MS=1000 (added)",
                 # The role's four header lines in, the comment with the old password out.
                 "~4 comment lines added, 1 removed (not shown: a comment may hold a secret)"):
        assert output.count(f"\n{line}\n") == len(variables(host)["groups"]["awa_producers"]), line
    reports = "".join(path.read_text(encoding="utf-8") for path in state_dir().glob("enqueue_shards-*.json"))
    secrets = [value for name in ("fleet_secrets_before", "fleet_secrets") for value in variables(host)[name].values()]
    assert [secret for secret in secrets if secret in output + reports] == []


# ---- every pass ----

def test_the_server_runs_the_scenario_s_postgresql_major():
    """The server itself runs the major the scenario names (not just the test bed's state.json says so)."""
    version = queue_facts.query(superuser_dsn(), "SELECT current_setting('server_version_num')::int")[0][0]
    assert version // 10000 == int(os.environ["AWA_FLEET_MAJOR"]), f"server_version_num {version}"


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
    if molecule_pass()["pass"] in ("fault", "vanish"):
        before = units_at(f"before-{molecule_pass()['pass']}", host)
        not_restarted = {service for service, pid in before.items() if pids[service] == pid}
    if molecule_pass()["pass"] == "vanish" and inventory_name(host) == molecule_pass()["vanished"]:
        pytest.skip("the vanished host's units started at its boot, with the file the run had rendered before")
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


# ---- after a finished run: raise (and its idempotent re-run), return, recover, lower ----

@pytest.mark.passes("raise", "return", "recover", "lower")
def test_environment_file_is_rendered_with_owner_group_and_mode(host):
    shards = molecule_pass()["shards"]
    env_file = host.file(ENV_FILE)
    assert (env_file.user, env_file.group, env_file.mode) == ("root", "awa", 0o640)
    lines = env_file.content_string.splitlines()
    assert lines[0].startswith("# ")
    assert f'AWA_FLEET_CHANGE="{change_text(shards)}"' in lines
    assert REFRESH_LINE in lines
    assert f"AWA_RESULTS_TOKEN={variables(host)['fleet_secrets']['token']}" in lines


@pytest.mark.passes("raise", "return", "recover", "lower")
def test_every_unit_runs_its_runtime_in_its_current_process(host):
    """Done means each unit's runtime is live: its current process (systemd's main PID) started it."""
    for service, pid in main_pids(host).items():
        assert host.service(service).is_running, service
        assert host.service(service).is_enabled, service
        assert runs_a_runtime(host, service, pid), f"{service} (pid {pid}) runs no Awa runtime"


@pytest.mark.passes("raise")
def test_the_raise_restarted_every_unit_in_serial_batches_with_the_canary_watched(host):
    before, now = units_at("before-raise", host), main_pids(host)
    assert all(now[service] not in (0, before[service]) for service in now), (before, now)
    # Serial [1, "50%"] over the hosts: [fleet-1 (@1, @2)], [fleet-2 (@3)], [fleet-3 (@4, @5)]; on fleet_pg17's
    # two hosts [fleet-1], [fleet-2].
    batch = {"fleet-1": 0, "fleet-2": 1, "fleet-3": 2}
    starts = {index: [unit["started"] for unit in snapshot("after-raise") if batch[unit["host"]] == index]
              for index in range(3)}
    # The second batch started once the canary was back and watched for its pause; the third after the second.
    assert min(starts[1]) >= max(starts[0]) + variables(host)["enqueue_shards_canary_pause"], starts
    assert not starts[2] or min(starts[2]) >= max(starts[1]), starts


@pytest.mark.passes("raise")
def test_the_idempotent_run_restarted_nothing(host):
    # Verify runs after molecule's idempotence step: the PIDs must still be those noted after the raise.
    assert main_pids(host) == units_at("after-raise", host)


@pytest.mark.passes("raise", "return", "recover", "lower")
def test_every_live_runtime_runs_with_the_new_count():
    rollout = molecule_pass()
    change = queue_facts.last_count_change(superuser_dsn(), QUEUE)
    assert change.to_shards == rollout["shards"]
    live = queue_facts.live_runtimes(superuser_dsn())
    units = len(snapshot("before-raise"))
    assert len(live) == units, f"{len(live)} live runtimes for {units} units"
    assert all(runtime.healthy for runtime in live)
    stragglers = [r for r in live if not queue_facts.converged_on(change, r, CLOCK_MARGIN)]
    assert not stragglers, f"not on change #{change.change_id}: {stragglers}"


@pytest.mark.passes("return", "lower")
def test_the_lowering_waited_until_the_retired_shards_drained():
    lowered = molecule_pass()
    assert lowered["backlog_on_retired_shards"] > 0, "no backlog on shards 2..7 before the lowering: nothing to wait for"
    assert queue_facts.ready_beyond(superuser_dsn(), QUEUE, lowered["shards"]) == 0


@pytest.mark.passes("raise")
def test_a_debian_11_host_runs_the_role_s_module_on_python_3_9_and_its_units_from_a_debian_12_root(host):
    if variables(host)["fleet_host_release"] != "bullseye":
        pytest.skip("a Debian 12 host")
    assert host.file("/etc/debian_version").content_string.startswith("11.")
    assert host.check_output("systemctl --version").startswith("systemd 247 ")
    assert variables(host)["ansible_python_interpreter"] == "/usr/bin/python3"
    assert host.check_output("/usr/bin/python3 -c 'import platform; print(platform.python_version())'").startswith("3.9.")
    for service, pid in main_pids(host).items():
        # The process's root directory, seen through /proc, is a Debian 12 tree.
        assert host.check_output("sudo cat /proc/%s/root/etc/debian_version", str(pid)).startswith("12."), service
        assert runs_a_runtime(host, service, pid), service


# ---- after the run during which a host vanished ----

@pytest.mark.passes("vanish")
def test_the_stopped_run_named_the_vanished_host_and_its_units_not_checked_or_restarted(host):
    vanished = molecule_pass()["vanished"]
    message = stop_message("vanish")
    assert f"producer host(s) unreachable ({vanished})" in message, message
    left_out = [f"{vanished}/{service}" for service in ("awa-producer@4", "awa-producer@5")]
    assert all(name in message for name in left_out), message
    assert "not checked or restarted, over enqueue_shards_max_fail_percentage 0" in message
    assert "To back out (the previous counts, the same options): ansible-playbook" in message
    assert '"enqueue_shards_queues": [{"queue": "demo", "shards": 8}]' in message


@pytest.mark.passes("vanish")
def test_the_canary_was_restarted_and_the_batches_after_the_host_vanished_were_not(host):
    vanished = molecule_pass()["vanished"]
    if inventory_name(host) == vanished:
        pytest.skip("the vanished host's units started again at its boot")
    before, now = units_at("before-vanish", host), main_pids(host)
    batches = batch_of("vanish")
    for service in now:
        batch = batches[(inventory_name(host), service)]
        if batch <= 1:  # the canary, and the batch the host vanished in (its reachable unit was restarted)
            assert now[service] != before[service], f"{service} (batch {batch + 1}) was not restarted"
        else:
            assert now[service] == before[service], f"{service} (batch {batch + 1}) was restarted"


# ---- after the same window once the host was back ----

@pytest.mark.passes("return")
def test_the_return_restarted_only_the_units_still_on_the_old_count(host):
    vanished = molecule_pass()["vanished"]
    after_vanish, now = units_at("after-vanish", host), main_pids(host)
    batches = batch_of("vanish")
    restarted_by_the_role = newest_report()["outcome"]["services"]["restarted"]
    for service, pid in now.items():
        name = f"{inventory_name(host)}/{service}"
        stale = inventory_name(host) != vanished and batches[(inventory_name(host), service)] > 1
        if stale:
            assert name in restarted_by_the_role, f"{service} still ran the old count and was not restarted"
            assert pid != after_vanish[service], f"{service} still ran the old count and was not restarted"
            continue
        assert name not in restarted_by_the_role, f"{service} already ran the new count and was restarted again"
        if pid != after_vanish[service]:
            # Not the role: systemd started the unit again on its own (Restart=on-failure counts it in NRestarts,
            # which the role's restart had set back to 0). Its journal says why.
            restarts = int(host.check_output("systemctl show --property=NRestarts --value %s", service))
            journal = host.check_output("journalctl --unit %s --output cat --no-pager --lines 20", service)
            assert restarts > 0, f"{service} already ran the new count and was restarted again:\n{journal}"


# ---- after the run that met the broken units ----

@pytest.mark.passes("fault")
def test_the_failed_run_named_both_broken_units(host):
    message = stop_message("fault")
    for (name, service), fault in broken_units(host).items():
        assert f"{name}/{service} did not come back" in message, (fault, message)
    hung = [f"{name}/{service}" for (name, service), fault in broken_units(host).items() if fault == "hang"]
    assert all(f"{unit} did not come back: it runs (pid " in message for unit in hung), message
    assert "no live Awa runtime has its pid" in message


@pytest.mark.passes("fault")
def test_the_plan_s_batches_are_batches_of_hosts_each_with_all_its_units(host):
    plan = restart_plan("fault")
    # fleet_fault_batch_size [1, 2]: the canary host, then the other two.
    assert plan["batch_hosts"] == [["fleet-1"], ["fleet-2", "fleet-3"]], plan["batch_hosts"]
    assert [sorted(service for dummy, service in batch) for batch in plan["batches"]] == [
        ["awa-producer@1", "awa-producer@2"], ["awa-producer@3", "awa-producer@4", "awa-producer@5"]]


@pytest.mark.passes("fault")
def test_every_unit_was_tied_to_its_runtime_by_pid_the_container_s_too_though_the_hosts_share_pids(host):
    plan = restart_plan("fault")
    # The hosts booted alike (tests/awa_testbed/hosts.py: the same pids on each): the runtimes report their host name
    # (the environment file's HOSTNAME), the container unit's runtime its container's; no host was judged by count.
    assert plan["pid_hosts"] == ["fleet-1", "fleet-2", "fleet-3"], plan["pid_hosts"]
    assert not [line for line in plan["shown"]["detail"] if "judged by count" in line or "were counted" in line]
    unit = variables(host)["fleet_container_unit"]
    if inventory_name(host) == unit["host"]:
        [state] = [service for state in plan["hosts"] if state["host"] == unit["host"]
                   for service in state["services"] if service["service"] == unit["service"]]
        assert any(reported["pid"] == 1 and str(reported["hostname"]).startswith("ctr-")
                   for reported in state["reports_as"]), state


@pytest.mark.passes("fault")
def test_batches_before_the_broken_units_were_restarted_and_later_ones_not(host):
    before, now = units_at("before-fault", host), main_pids(host)
    batches = batch_of("fault")
    failed = {batches[unit] for unit in broken_units(host)}
    assert failed == {1}, "the faults are meant for the second batch"
    for service in now:
        batch = batches[(inventory_name(host), service)]
        if batch < 1:
            assert host.service(service).is_running, service
            assert now[service] != before[service], f"{service} (batch {batch + 1}) was not restarted"
        elif batch > 1:
            assert now[service] == before[service], f"{service} (batch {batch + 1}) was restarted"


@pytest.mark.passes("fault")
def test_the_hung_unit_runs_but_no_runtime(host):
    for (name, service), fault in broken_units(host).items():
        if name == inventory_name(host) and fault == "hang":
            pid = main_pids(host)[service]
            assert host.service(service).is_running and not runs_a_runtime(host, service, pid), service


# ---- after the re-run without the faults ----

@pytest.mark.passes("recover")
def test_the_re_run_restarted_the_hung_unit_and_left_alone_what_the_failed_run_finished(host):
    """The hung unit started after the change, yet no runtime of it was live: it is restarted (once it was not,
    and the run said converged). Units the failed run restarted onto the new count are not restarted again."""
    before, after_fault, now = units_at("before-fault", host), units_at("after-fault", host), main_pids(host)
    broken = broken_units(host)
    for service, pid in after_fault.items():
        fault = broken.get((inventory_name(host), service))
        if fault == "hang":
            assert now[service] != pid, f"{service} still runs the hung process {pid}"
        elif fault is None and pid not in (0, before[service]):
            assert now[service] == pid, f"{service} was restarted again"


# ---- after the run with a unit name systemd does not know ----

@pytest.mark.passes("missing")
def test_a_unit_systemd_does_not_know_stopped_the_window_at_the_reach_naming_host_and_unit(host):
    name, unit = inventory_name(host), molecule_pass()["missing_unit"]
    [message] = [result["msg"] for task, result in run_results("missing") if result.get("failed")]
    assert (f"Invalid input for {name}, nothing was changed: {name}/{unit}: systemd does not know this unit "
            "(LoadState=not-found); correct enqueue_shards_services for this host, or install the unit there"
            ) in message, message
    assert not [task for task, dummy in run_results("missing") if "Preflight |" in task], "stopped before preflight"


@pytest.mark.passes("missing")
def test_the_refused_window_changed_and_restarted_nothing(host):
    assert queue_facts.last_count_change(superuser_dsn(), QUEUE).to_shards == molecule_pass()["shards"]
    assert main_pids(host) == units_at("before-missing", host)
