# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One batch of the rolling restart: whom it restarts, what its restarts reported, and the state it leaves."""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.batch import (
    batch_services,
    expectations,
    pause_seconds,
    restart_outcomes,
)
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.state import after_batch
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import (
    runtime,
    systemd_host,
    systemd_result,
    unit,
)

T = 1764520000.0
NO_GATES = {"baseline": None, "queues": ["demo"], "limits": {}}


def rollout(**overrides) -> dict:
    """Three hosts, two batches: [app1/a, app2/a] then [app1/b, app3/a]; runtimes told apart by pid on each."""
    hosts = [systemd_host("app1", {"a": unit("a", pid=1), "b": unit("b", pid=2)}, T),
             systemd_host("app2", {"a": unit("a", pid=3)}, T), systemd_host("app3", {"a": unit("a", pid=4)}, T)]
    state = {"batches": [[["app1", "a"], ["app2", "a"]], [["app1", "b"], ["app3", "a"]]], "hosts": hosts,
             "gone": [], "known_runtimes": ["old-1"], "pid_hosts": ["app1", "app2", "app3"], "restarted": [], "read": "",
             "max_fail_percentage": 0, "verdicts": [], "backout": "To back out: ...",
             "canary_pause": None, "batch_pause": 0, "gates": NO_GATES}
    return {**state, **overrides}


def restarted(services: dict[str, str], **failing) -> dict:
    """A host's restart: awa_producer_services restarted ``services`` there (its registered result)."""
    return systemd_result(services, T + 5, restart=tuple(services), failing=failing)


def test_each_host_of_a_batch_restarts_only_its_own_services_of_it():
    assert batch_services(rollout(), 1) == {"app1": ["b"], "app3": ["a"]}
    assert batch_services(rollout(gone=["app3"]), 1) == {"app1": ["b"]}


def test_restart_outcomes_name_what_restarted_failed_or_could_not_be_reached():
    state = rollout(batches=[[["app1", "a"], ["app2", "a"], ["app3", "a"], ["app4", "a"], ["app4", "b"]]])
    restarts = {
        "app1": restarted({"a": unit("a", pid=11)}),
        "app2": restarted({"a": unit("a", pid=12)}, a="Job for a.service failed."),
        "app3": {"unreachable": True, "msg": "ssh: connect to host app3 port 22"},
        "app4": {"failed": True, "msg": "/usr/bin/python3: not found"}}
    assert restart_outcomes(state, 0, restarts) == {
        "restarted": ["app1/a"], "unreachable": ["app3"],
        "failed": {"app2/a": "exit status 1: Job for a.service failed.", "app4/a": "/usr/bin/python3: not found",
                   "app4/b": "/usr/bin/python3: not found"}}


def test_a_batch_waits_for_the_new_pid_of_each_service_it_restarted_and_counts_only_where_pids_cannot_tell():
    restarts = {"app1": restarted({"a": unit("a", pid=11, started=T + 4)}),
                "app2": restarted({"a": unit("a", pid=12, started=T + 4)})}
    assert expectations(rollout(), restarts) == {
        "restarted_services": [{"reports_as": [{"pid": 11, "hostname": None}], "started_at": T + 4, "runtimes": 1},
                               {"reports_as": [{"pid": 12, "hostname": None}], "started_at": T + 4, "runtimes": 1}],
        "expected_new_runtimes": 0}
    # Each service waits for as many runtimes as it runs (enqueue_shards_service_runtimes); one that only enqueues,
    # for none.
    replicas = rollout()
    replicas["hosts"][0]["services"][0]["runtimes"], replicas["hosts"][1]["services"][0]["runtimes"] = 2, 0
    assert expectations(replicas, restarts) == {
        "restarted_services": [{"reports_as": [{"pid": 11, "hostname": None}], "started_at": T + 4, "runtimes": 2}],
        "expected_new_runtimes": 0}
    # app2's runtimes cannot be told apart by pid: counted.
    assert expectations(rollout(pid_hosts=["app1"]), restarts) == {
        "restarted_services": [{"reports_as": [{"pid": 11, "hostname": None}], "started_at": T + 4, "runtimes": 1}],
        "expected_new_runtimes": 1}
    # A service that failed after its restart has no pid: nothing is waited for in its name, the verdict says why.
    failed = {"app1": restarted({"a": unit("a", state="failed", sub="failed", pid=0, started=T + 4)})}
    assert expectations(rollout(), failed) == {"restarted_services": [], "expected_new_runtimes": 0}


def test_after_a_batch_its_hosts_report_their_new_processes_and_a_vanished_host_is_gone():
    restarts = {"app1": restarted({"a": unit("a", pid=11, started=T + 4)}),
                "app2": {"unreachable": True, "msg": "no route"}}
    read = {"runtimes": [runtime(11, T + 4.5)], "new_runtimes": [runtime(11, T + 4.5)], "expected_new_runtimes": 1}
    state = after_batch({"rollout": rollout(max_fail_percentage=50), "stop": None}, restarts, [read])["rollout"]
    app1 = {service["service"]: service for service in state["hosts"][0]["services"]}
    assert (app1["a"]["main_pid"], app1["a"]["started_at"], app1["b"]["main_pid"]) == (11, T + 4, 2)
    assert not state["hosts"][1]["reachable"] and state["gone"] == ["app2"]
    assert state["known_runtimes"] == ["old-1", runtime(11, T + 4.5)["instance_id"]]
    assert state["restarted"] == ["app1/a"], "what the window's record says was restarted"
    assert state["verdicts"][-1]["ok"], state["verdicts"][-1]["message"]
    assert "going on without them (1 of 3 producer host(s) unreachable (app2)" in state["verdicts"][-1]["message"]
    assert batch_services(state, 1) == {"app1": ["b"], "app3": ["a"]}


def watched(canary_pause: float | None, batch_pause: float, gates: dict | None = None) -> dict:
    """The rollout, with its pauses and gates (none crossed by default)."""
    return rollout(canary_pause=canary_pause, batch_pause=batch_pause, gates=gates or NO_GATES)


def test_a_batch_is_watched_only_when_it_came_back_within_its_gates_and_another_follows():
    back = {"new_runtimes": [runtime(11, T)], "expected_new_runtimes": 1, "health": {"deadlocks": 3}}
    assert pause_seconds(watched(2.5, 60), 0, back) == 3, "the canary's own pause, rounded up"
    assert pause_seconds(watched(None, 60), 0, back) == 60
    assert pause_seconds(watched(None, 60), 1, back) == 0, "no watch after the last batch"
    assert pause_seconds(watched(5, 5), 0, dict(back, new_runtimes=[])) == 0
    crossed = {"baseline": {"deadlocks": 0, "stats_reset": None}, "queues": ["demo"], "limits": {"deadlocks": 0}}
    assert pause_seconds(watched(5, 5, crossed), 0, dict(back, health={"deadlocks": 3, "stats_reset": None})) == 0
