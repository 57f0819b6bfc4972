# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the rollout may go on: the hosts at the start, each batch, and the inventory at the end."""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.health_gates import evaluate
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.match import match
from ansible_collections.awa.operations.plugins.module_utils.producer.services import operate
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.services import host_state
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.verdicts import (
    batch_verdict,
    inventory_verdict,
    reachability,
)
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import (
    runtime,
    settings,
    systemd_host,
    systemd_result,
    unit,
)

T = 1764520000.0
BACKOUT = "To back out (the previous counts, the same options): ansible-playbook ..."
QUIET = {"crossed": [], "text": "deadlocks 0; failed jobs 0; retried jobs 0", "readings": {}}


def restarted(host: str, *services: str, failed: dict | None = None, unreachable: str | None = None) -> dict:
    """What one host's restarts did (rollout.batch.restart_outcomes)."""
    return {"restarted": [f"{host}/{service}" for service in services], "unreachable": [host] if unreachable else [],
            "failed": {f"{host}/{service}": message for service, message in (failed or {}).items()}}


def outcomes(*hosts: dict) -> dict:
    """What the batch's restarts did, host by host."""
    return {key: [value for host in hosts for value in host[key]] for key in ("restarted", "unreachable")} | {
        "failed": {name: message for host in hosts for name, message in host["failed"].items()}}


def verdict(batch, done, states, read, gates=None, later=None, **overrides) -> dict:
    """The verdict on the first of two batches (or of ``batch`` then ``later``) of the rollout after it."""
    rollout = {"batches": [batch, *(later or [[]])], "hosts": states, "pid_hosts": [], "gone": [],
               "max_fail_percentage": 0, "backout": BACKOUT, **overrides}
    return batch_verdict(rollout, 0, outcomes(*done), read, gates or QUIET)


def waited(*runtimes: dict, expected: int) -> dict:
    """A wait: restarted result in which every runtime given is new."""
    return {"runtimes": list(runtimes), "new_runtimes": list(runtimes), "expected_new_runtimes": expected}


def test_a_batch_whose_services_came_back_passes_with_its_health_readings():
    states = [systemd_host("app1", {"a": unit("a", started=T, pid=11)}), systemd_host("app2", {"a": unit("a", started=T, pid=12)})]
    result = verdict([["app1", "a"], ["app2", "a"]], [restarted("app1", "a"), restarted("app2", "a")], states,
                     waited(runtime(11, T + 1), runtime(12, T + 1), expected=2))
    assert result == {"ok": True, "message": "Batch 1 of 2 is back: 2 of 2 restarted runtimes live and healthy; "
                                             "deadlocks 0; failed jobs 0; retried jobs 0."}


def test_a_unit_that_hangs_before_its_runtime_registers_is_named_by_its_pid_and_the_backout_printed():
    states = [systemd_host("app1", {"a": unit("a", started=T, pid=11), "b": unit("b", started=T, pid=12)})]
    result = verdict([["app1", "a"], ["app1", "b"]], [restarted("app1", "a", "b")], states,
                     waited(runtime(11, T + 1), expected=2), pid_hosts=["app1"])
    assert not result["ok"]
    message = result["message"]
    assert message.startswith("Rollout stopped at batch 1 of 2 (app1/a, app1/b): app1/b did not come back: it runs "
                              "(pid 12) but no live Awa runtime has its pid - it hangs before its runtime registers, "
                              "or it is in a restart loop; 1 of 2 restarted runtimes are live and healthy")
    assert "app1/a did not" not in message
    assert message.endswith(BACKOUT)


def test_a_failed_restart_and_a_crash_loop_are_named():
    states = [systemd_host("app1", {"a": unit("a", state="activating", sub="auto-restart", pid=0)}),
              systemd_host("app2", {"b": unit("b", state="failed", sub="failed", result="exit-code", pid=0)})]
    result = verdict([["app1", "a"], ["app2", "b"]],
                     [restarted("app1", "a"), restarted("app2", failed={"b": "Job for b.service failed"})],
                     states, waited(expected=1))
    assert "app1/a did not come back: it is failed (activating/auto-restart) after its restart" in result["message"]
    assert "app2/b did not come back: the restart failed: Job for b.service failed" in result["message"]
    assert "No later batch was restarted" in result["message"]


def test_a_health_gate_over_its_limit_stops_the_rollout_naming_gate_reading_and_limit():
    gates = evaluate({"deadlocks": 9, "stats_reset": None, "queues": {}}, baseline={"deadlocks": 4, "stats_reset": None},
                     queues=[], limits={"deadlocks": 2})
    states = [systemd_host("app1", {"a": unit("a", started=T, pid=11)})]
    result = verdict([["app1", "a"]], [restarted("app1", "a")], states, waited(runtime(11, T + 1), expected=1), gates)
    assert not result["ok"]
    assert ("health gate deadlocks: 5 deadlocks on the database since the change, over the limit of 2 "
            "(enqueue_shards_max_deadlocks)") in result["message"]
    assert "then back out, or once it is understood run the playbook again" in result["message"]
    assert result["message"].endswith(BACKOUT)


def test_a_host_that_vanishes_stops_the_rollout_naming_what_was_not_checked_or_restarted():
    outcomes = [restarted("app1", "a"), restarted("app2", unreachable="Connection refused")]
    states = [systemd_host("app1", {"a": unit("a", started=T, pid=11)}),
              systemd_host("app2", {"b": unit("b")}, reachable=False)]
    batch, later = [["app1", "a"], ["app2", "b"]], [[["app2", "c"], ["app1", "d"]]]
    stopped = verdict(batch, outcomes, states, waited(runtime(11, T + 1), expected=1), later=later, gone=["app2"])
    assert not stopped["ok"]
    assert ("1 of 2 producer host(s) unreachable (app2): app2/b, app2/c not checked or restarted, over "
            "enqueue_shards_max_fail_percentage 0") in stopped["message"]
    allowed = verdict(batch, outcomes, states, waited(runtime(11, T + 1), expected=1), later=later, gone=["app2"],
                      max_fail_percentage=50)
    assert allowed["ok"] and "going on without them (1 of 2 producer host(s) unreachable (app2)" in allowed["message"]


def test_the_first_contact_stops_before_any_change_unless_allowed():
    hosts = [settings("app1", ["a"]), settings("app2", ["b", "c"])]
    probes = [systemd_result({"a": unit("a")}), {"unreachable": True, "msg": "Failed to connect to the host via ssh"}]
    stopped = reachability(hosts, probes, {"max_fail_percentage": 0, "pickup": "restart"})
    assert not stopped["ok"]
    assert stopped["message"].startswith("Nothing was changed: 1 of 2 producer host(s) unreachable (50%, over "
                                         "enqueue_shards_max_fail_percentage 0): app2 (Failed to connect to the host "
                                         "via ssh): b, c not checked or restarted.")
    allowed = reachability(hosts, probes, {"max_fail_percentage": 50, "pickup": "restart"})
    assert allowed["ok"] and allowed["message"].startswith("Going on without 1 of 2 producer host(s)")
    assert reachability(hosts[:1], probes[:1], {"max_fail_percentage": "lots", "pickup": "restart"})["message"].startswith(
        "Invalid input, nothing was changed: enqueue_shards_max_fail_percentage must be a percentage")


def test_a_host_that_cannot_restart_its_services_as_configured_stops_before_any_change():
    without_systemd = dict(systemd_result({"a": unit("a")}), service_manager="sysvinit")
    missing = systemd_result({"a": unit("a"), "b": unit("b", state="inactive", sub="dead", load_state="not-found")})
    found = reachability([settings("app1", ["a"]), settings("app2", ["a", "b"])], [without_systemd, missing], {"max_fail_percentage": 0, "pickup": "restart"})
    assert found == {"ok": False, "message": (
        "Invalid input for app1, nothing was changed: this host does not run systemd (service manager: sysvinit) and "
        "enqueue_shards_restart_command is empty: give the command that restarts one service, e.g. \"supervisorctl "
        "restart {service}\" || Invalid input for app2, nothing was changed: app2/b: systemd does not know this unit "
        "(LoadState=not-found); correct enqueue_shards_services for this host, or install the unit there")}
    refresh = reachability([settings("app1", ["a"])], [without_systemd], {"max_fail_percentage": 0, "pickup": "refresh"})
    assert refresh["ok"], "pickup refresh restarts nothing, so a host needs no way to restart"


def test_an_environment_file_the_host_could_not_take_stops_before_any_change():
    error = "/etc/awa/producer.env was not written: there is no group awa on this host for the file"
    # The reach checks the file in check mode; the module fails before it reads the services.
    probe = {"failed": True, "msg": f"The environment file {error}. Nothing was restarted.",
             "env_file": {"path": "/etc/awa/producer.env", "changed": False, "error": error}}
    found = reachability([settings("app1", ["a"])], [probe], {"max_fail_percentage": 100, "pickup": "restart"})
    assert found == {"ok": False, "message": (
        f"Invalid input for app1, nothing was changed: its environment file {error}; correct enqueue_shards_env_file, "
        "enqueue_shards_env_file_owner or enqueue_shards_env_file_group for this host, or prepare the host")}


def test_the_inventory_is_done_only_when_every_service_has_its_runtime_on_the_count():
    hosts = [systemd_host("app1", {"a": unit("a", started=T, pid=11), "b": unit("b", started=T, pid=12)})]
    done = inventory_verdict(match(hosts, [runtime(11, T + 1), runtime(12, T + 1)]), BACKOUT)
    assert done["ok"] and done["message"].startswith("Every service of the inventory is done: 2 of 2")
    hung = inventory_verdict(match(hosts, [runtime(11, T + 1)]), BACKOUT)
    assert not hung["ok"]
    assert hung["message"].startswith("The change window is not done for the inventory: 1 of 2 inventory runtimes "
                                      "live on the count; not done: app1/b (it runs (pid 12) but no live Awa runtime "
                                      "has its pid)")
    gone = inventory_verdict(match(hosts + [systemd_host("app2", {"c": unit("c")}, reachable=False)],
                                   [runtime(11, T + 1), runtime(12, T + 1)]), BACKOUT)
    assert not gone["ok"] and "app2/c (its host is unreachable)" in gone["message"]


def test_a_service_whose_state_cannot_be_read_after_a_restart_that_did_not_come_back_is_named():
    def status_fails(command: object) -> tuple[int, str, str]:
        return 1, "", "p2 is not running"

    read = operate(status_fails, ["p2"], [], method="command", manager="supervisord", status_command="status {service}")
    states = [host_state(settings("localhost", ["p2"]), read.result())]
    result = verdict([["localhost", "p2"]], [restarted("localhost", "p2")], states, waited(expected=1))
    said = ("localhost/p2 did not come back: it cannot be told to run after its restart (status command exited 1: "
            "p2 is not running)")
    assert said in result["message"]
    # Where the host's runtimes are told apart by pid, the batch's wait had no pid to wait for: named all the same.
    told_apart = verdict([["localhost", "p2"]], [restarted("localhost", "p2")], states, waited(expected=0),
                         pid_hosts=["localhost"])
    assert said in told_apart["message"]


# A status command whose program (sh) is found; what it prints is the test's.
STATUS = "sh started.sh {service}"


def reach_of(printed: dict[str, tuple[int, str, str]], restart_command: str, path: str = "/usr/bin:/bin") -> dict:
    """The reach's check-mode run on a host without systemd, asked to restart every service: each status command
    answers as ``printed`` says."""
    def run(argv: list[str]) -> tuple[int, str, str]:
        return printed[argv[-1]]

    return operate(run, list(printed), list(printed), method="auto", manager="supervisord", check_mode=True,
                   restart_command=restart_command, status_command=STATUS, path=path,
                   user="awa").result()


def test_a_host_whose_restart_or_status_command_cannot_run_is_refused_naming_host_service_command_and_its_words():
    contract = dict(restart_command="supervisorctl restart {service}", status_command=STATUS)
    hosts = [settings("app1", ["a", "b"], **contract)]
    probe = reach_of({"a": (127, "", "sh: 1: supervisorctl: not found\n"), "b": (0, "RUNNING", "")},
                     "supervisorctl restart {service}")
    found = reachability(hosts, [probe], {"max_fail_percentage": 100, "pickup": "restart"})
    assert found == {"ok": False, "message": (
        "app1 cannot restart its producer services as configured, nothing was changed: app1 (a, b): the restart "
        "command supervisorctl restart {service} cannot run here: supervisorctl is not on the PATH of user awa "
        "(/usr/bin:/bin); correct enqueue_shards_restart_command or enqueue_shards_status_command for this host, or "
        "install the program there (one named without a folder is looked up on the PATH shown) | app1/a: the status "
        "command sh started.sh a cannot run here (exit status 127: sh: 1: supervisorctl: not found); correct "
        "enqueue_shards_status_command for this host, or install what it runs there | app1/b: the status command "
        "sh started.sh b printed 'RUNNING', not its contract: it must exit 0 and print START or START PID (the start in unix "
        "seconds, then optionally the pid), then optionally a line HOSTNAME or HOSTNAME PID for each runtime that runs "
        "elsewhere (a replica); correct enqueue_shards_status_command for this host, or install what it runs there")}
    refresh = reachability(hosts, [probe], {"max_fail_percentage": 0, "pickup": "refresh"})
    assert refresh == {"ok": True, "message": "All 1 producer host(s) answered."}, "pickup refresh restarts nothing"


def test_a_host_that_answered_is_never_called_unreachable():
    no_python = {"failed": True, "msg": "/usr/bin/python3: not found", "rc": 127}
    found = reachability([settings("app1", ["a"])], [no_python], {"max_fail_percentage": 100, "pickup": "restart"})
    assert found == {"ok": False, "message": (
        "app1 answered, but awa.operations.awa_producer_services failed there before it read its services, nothing "
        "was changed: /usr/bin/python3: not found. Make the module run there (the message says what is missing), then "
        "run the playbook again")}


def test_the_reach_says_what_it_proved_on_each_host():
    command = settings("app2", ["c"], restart_command="true {service}", status_command=STATUS)
    probes = [systemd_result({"a": unit("a"), "b": unit("b")}, restart=("a", "b")),
              reach_of({"c": (0, "1764520916 42", "")}, "true {service}")]
    found = reachability([settings("app1", ["a", "b"]), command], probes, {"max_fail_percentage": 0, "pickup": "restart"})
    assert found == {"ok": True, "message": (
        "All 2 producer host(s) answered and can restart their services: systemd knows every unit on app1; the "
        "restart command's program is found and the status command reads every service on app2.")}
    idle = reachability([settings("app3", [])], [systemd_result({})], {"max_fail_percentage": 0, "pickup": "restart"})
    assert idle == {"ok": True, "message": "All 1 producer host(s) answered."}, "nothing to restart, nothing proved"
