# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""awa_producer_services as Ansible runs it, with the restart contract's real commands (no systemd runs here:
the fleet scenario runs it over SSH on systemd hosts)."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.awa.operations.plugins.modules import awa_producer_services


def run(capsys, **arguments) -> dict:
    with patch_module_args(arguments), pytest.raises(SystemExit):
        awa_producer_services.main()
    return json.loads(capsys.readouterr().out)


def test_restarts_each_service_then_reports_its_state_and_the_clock(capsys, tmp_path):
    log = tmp_path / "restarts"
    for name, started in (("a", "1764520916 4242"), ("b", "1764520917")):
        (tmp_path / name).write_text(started, encoding="utf-8")
    result = run(capsys, services=["a", "b"], restart=["a"], method="command",
                 restart_command=f"sh -c 'echo \"$0\" >> {log}' {{service}}", status_command=f"cat {tmp_path}/{{service}}")
    assert not result.get("failed") and result["changed"]
    assert log.read_text(encoding="utf-8") == "a\n"
    assert result["restarted"] == ["a"] and result["restart_failures"] == []
    assert [(s["service"], s["state"], s["started_at"], s["main_pid"], s["restarted"]) for s in result["services"]] == [
        ("a", "running", 1764520916, 4242, True), ("b", "running", 1764520917, None, False)]
    assert result["method"] == "command" and result["clock"] > 1764520917


def test_a_failed_restart_fails_the_task_with_every_services_outcome(capsys):
    result = run(capsys, services=["a", "b"], restart=["a", "b"], method="command",
                 restart_command="sh -c '[ \"$0\" = a ] || { echo \"$0: no such program\" >&2; exit 4; }' {service}")
    assert result["failed"]
    assert result["msg"] == "The restart of 1 of 2 service(s) failed: b: b: no such program"
    assert result["restarted"] == ["a"]


def test_check_mode_restarts_nothing_and_says_what_it_would(capsys, tmp_path):
    marker = tmp_path / "restarted"
    result = run(capsys, services=["a"], restart=["a"], method="command", restart_command=f"touch {marker}",
                 _ansible_check_mode=True)
    assert result["changed"] and result["restarted"] == ["a"] and not marker.exists()


def test_read_only_it_changes_nothing_and_a_restart_needs_a_way_to_restart(capsys):
    read = run(capsys, services=["a"], method="command")
    assert not read["changed"] and read["services"][0]["state"] == "unknown"
    refused = run(capsys, services=["a"], restart=["a"], method="command")
    assert refused["failed"] and refused["msg"].startswith("Nothing was restarted: this host does not run systemd")


def test_a_service_to_restart_must_be_one_it_reports_on(capsys):
    result = run(capsys, services=["a"], restart=["b"], method="command", restart_command="true {service}")
    assert result["failed"] and "restart names b, which services does not list" in result["msg"]
