# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the role learns a host's producer services from awa_producer_services, and hosts it cannot reach."""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.services import host_state
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import settings, systemd_result, unit


def test_a_hosts_state_carries_each_service_what_its_processes_report_its_runtimes_and_the_host_s_clock():
    host = settings("app1.example.com", ["a", "b"], {"b": 0})
    result = dict(systemd_result({"a": unit("a", started=1764520916, pid=7, hostname="app1.example.com"),
                                  "b": unit("b", state="failed", sub="failed")}, clock=1764520999),
                  env_file={"path": "/etc/awa/producer.env", "changed": True})
    state = host_state(host, result)
    assert state["reachable"] and state["environment_changed"] and state["clock"] == 1764520999
    assert [(s["host"], s["service"], s["state"], s["runtimes"], s["reports_as"]) for s in state["services"]] == [
        ("app1.example.com", "a", "running", 1, [{"pid": 7, "hostname": "app1.example.com"}]),
        ("app1.example.com", "b", "failed", 0, [])]


def test_a_host_the_module_could_not_reach_or_read_reports_every_service_unreachable():
    host = settings("app1", ["a", "b"])
    state = host_state(host, {"unreachable": True, "msg": "Failed to connect to the host via ssh: Connection refused"})
    assert not state["reachable"] and not state["answered"]
    assert [(s["state"], s["detail"]) for s in state["services"]] == [
        ("unreachable", "Failed to connect to the host via ssh: Connection refused")] * 2
    no_python = host_state(host, {"failed": True, "msg": "/usr/bin/python3: not found"})
    assert not no_python["reachable"] and no_python["services"][0]["detail"] == "/usr/bin/python3: not found"
    assert no_python["answered"], "a host whose run failed answered: it is not called unreachable"


def test_a_host_whose_read_after_the_change_was_skipped_says_which_task_to_run():
    state = host_state(settings("app1", ["a"]), {})
    assert not state["reachable"]
    assert "tag enqueue_shards_producer_config, was skipped" in state["services"][0]["detail"]
