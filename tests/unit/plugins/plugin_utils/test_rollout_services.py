# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the role reads its producer services: systemd, the status command, and hosts it cannot reach."""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.plugin_utils.rollout_services import host_services, parse_systemctl_show
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import unit


def test_systemctl_show_of_several_units_is_read_per_unit():
    output = unit("a", started=1764520916) + "\n" + unit("b", state="failed", sub="failed", result="exit-code", pid=0)
    assert [properties["Id"] for properties in parse_systemctl_show(output)] == ["a.service", "b.service"]
    report = host_services(["a", "b", "c"], "app1.example.com", "systemd", {"stdout": output}, clock="1764520999",
                           names=["10.0.0.5", None])
    states = {service["service"]: service for service in report["services"]}
    assert (states["a"]["state"], states["a"]["started_at"], states["a"]["main_pid"]) == ("running", 1764520916, 100)
    assert (states["b"]["state"], states["b"]["detail"]) == ("failed", "failed/failed, result exit-code")
    assert states["c"]["state"] == "unknown"
    assert report["clock"] == 1764520999.0 and report["reachable"]
    assert report["names"] == ["10.0.0.5", "app1", "app1.example.com"]


def test_the_status_command_prints_the_start_and_optionally_the_runtime_pid():
    results = {"results": [{"item": "a", "rc": 0, "stdout": "1764520916.25 4242\n"},
                           {"item": "b", "rc": 0, "stdout": "1764520916"},
                           {"item": "c", "rc": 0, "stdout": "1764520916 pid"},
                           {"item": "d", "rc": 0, "stdout": "1 2 3"}]}
    states = {s["service"]: s for s in host_services(["a", "b", "c", "d"], "h", "command", status_results=results)["services"]}
    assert (states["a"]["state"], states["a"]["started_at"], states["a"]["main_pid"]) == ("running", 1764520916.25, 4242)
    assert (states["b"]["state"], states["b"]["main_pid"]) == ("running", None)
    assert states["c"]["state"] == states["d"]["state"] == "unknown"


def test_a_read_that_could_not_reach_its_host_reports_every_service_unreachable():
    error = {"unreachable": True, "msg": "Failed to connect to the host via ssh: Connection refused"}
    report = host_services(["a", "b"], "app1", "systemd", error)
    assert not report["reachable"]
    assert [(s["state"], s["detail"]) for s in report["services"]] == [
        ("unreachable", "Failed to connect to the host via ssh: Connection refused")] * 2
    looped = {"results": [{"item": "a", "unreachable": True, "msg": "gone"}]}
    assert not host_services(["a"], "app1", "command", status_results=looped)["reachable"]
    left_out = host_services(["a"], "app1", "systemd", None, reachable=False)
    assert left_out["services"][0]["detail"] == "unreachable earlier in this run"
