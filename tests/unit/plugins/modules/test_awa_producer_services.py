# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""awa_producer_services as Ansible runs it, with the restart contract's real commands (no systemd runs here:
the fleet scenario runs it over SSH on systemd hosts)."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible_collections.awa.operations.tests.unit.plugins.module_args import patch_module_args

from ansible_collections.awa.operations.plugins.module_utils.producer.services import METHODS
from ansible_collections.awa.operations.plugins.modules import awa_producer_services


def run(module_result, **arguments) -> dict:
    with patch_module_args(arguments), pytest.raises(SystemExit):
        awa_producer_services.main()
    return module_result()


def test_restarts_each_service_then_reports_its_state_and_the_clock(module_result, tmp_path):
    log = tmp_path / "restarts"
    for name, started in (("a", "1764520916 4242"), ("b", "1764520917")):
        (tmp_path / name).write_text(started, encoding="utf-8")
    result = run(module_result, services=["a", "b"], restart=["a"], method="command",
                 restart_command=f"sh -c 'echo \"$0\" >> {log}' {{service}}", status_command=f"cat {tmp_path}/{{service}}")
    assert not result.get("failed") and result["changed"]
    assert log.read_text(encoding="utf-8") == "a\n"
    assert result["restarted"] == ["a"] and result["restart_failures"] == []
    assert [(s["service"], s["state"], s["started_at"], s["main_pid"], s["restarted"]) for s in result["services"]] == [
        ("a", "running", 1764520916, 4242, True), ("b", "running", 1764520917, None, False)]
    assert result["method"] == "command" and result["clock"] > 1764520917


def test_a_failed_restart_fails_the_task_with_every_services_outcome(module_result):
    result = run(module_result, services=["a", "b"], restart=["a", "b"], method="command",
                 restart_command="sh -c '[ \"$0\" = a ] || { echo \"$0: no such program\" >&2; exit 4; }' {service}")
    assert result["failed"]
    assert result["msg"] == "The restart of 1 of 2 service(s) failed: b: exit status 4: b: no such program"
    assert result["restarted"] == ["a"]


def test_check_mode_restarts_nothing_and_says_what_it_would(module_result, tmp_path):
    marker = tmp_path / "restarted"
    result = run(module_result, services=["a"], restart=["a"], method="command", restart_command=f"touch {marker}",
                 _ansible_check_mode=True)
    assert result["changed"] and result["restarted"] == ["a"] and not marker.exists()


def test_read_only_it_changes_nothing_and_a_restart_needs_a_way_to_restart(module_result):
    read = run(module_result, services=["a"], method="command")
    assert not read["changed"] and read["services"][0]["state"] == "unknown"
    refused = run(module_result, services=["a"], restart=["a"], method="command")
    assert refused["failed"] and refused["msg"].startswith("Nothing was restarted: this host does not run systemd")


def test_a_service_to_restart_must_be_one_it_reports_on(module_result):
    result = run(module_result, services=["a"], restart=["b"], method="command", restart_command="true {service}")
    assert result["failed"] and "restart names b, which services does not list" in result["msg"]


def test_it_writes_the_environment_file_before_the_read_and_a_second_run_changes_nothing(module_result, tmp_path):
    env_file = tmp_path / "producer.env"
    wanted = {"path": str(env_file), "content": "AWA_OVERRIDE_REFRESH_MS=1000\n", "mode": "0640"}
    first = run(module_result, services=["a"], method="command", env_file=wanted, _ansible_diff=True)
    assert first["changed"] and first["env_file"] == {"path": str(env_file), "changed": True}
    assert env_file.read_text(encoding="utf-8") == "AWA_OVERRIDE_REFRESH_MS=1000\n"
    assert oct(env_file.stat().st_mode & 0o777) == "0o640"
    assert first["diff"]["prepared"].splitlines()[:2] == ["--- (absent)", f"+++ {env_file}"]
    assert "AWA_OVERRIDE_REFRESH_MS=1000" not in json.dumps(first.get("invocation", {})), "content is no_log"
    again = run(module_result, services=["a"], method="command", env_file=wanted, _ansible_diff=True)
    assert not again["changed"] and again["env_file"]["changed"] is False and "diff" not in again
    env_file.chmod(0o644)
    mode_only = run(module_result, services=["a"], method="command", env_file=wanted)
    assert mode_only["changed"] and oct(env_file.stat().st_mode & 0o777) == "0o640"


def test_check_mode_writes_no_environment_file_and_its_diff_names_each_change_masking_the_values(module_result, tmp_path):
    env_file = tmp_path / "producer.env"
    before = "AWA_DATABASE_URL=postgres://app:pw-s3cret-1@db/awa\nAWA_OVERRIDE_REFRESH_MS=1000\n"
    env_file.write_text(before, encoding="utf-8")
    after = "AWA_DATABASE_URL=postgres://app:pw-s3cret-1@db/awa\nAWA_OVERRIDE_REFRESH_MS=500\nB_TOKEN=s3cret-2\n"
    result = run(module_result, services=["a"], method="command", _ansible_check_mode=True, _ansible_diff=True,
                 env_file={"path": str(env_file), "content": after, "show": ["AWA_OVERRIDE_REFRESH_MS"]})
    assert result["changed"] and result["env_file"]["changed"]
    assert result["diff"]["prepared"].splitlines() == [
        f"--- {env_file}", f"+++ {env_file}", "~AWA_OVERRIDE_REFRESH_MS=500 (changed from 1000)",
        "+B_TOKEN=******** (added)", " unchanged: AWA_DATABASE_URL"]
    assert "s3cret" not in json.dumps(result)
    assert env_file.read_text(encoding="utf-8") == before


def test_the_module_on_its_own_shows_no_value_but_those_it_is_told_are_safe(module_result, tmp_path):
    env_file = tmp_path / "producer.env"
    env_file.write_text("AWA_API_TOKEN=s3cret-1\n# was s3cret-0\n", encoding="utf-8")
    result = run(module_result, services=[], method="command", _ansible_diff=True,
                 env_file={"path": str(env_file), "content": "AWA_API_TOKEN=s3cret-2\nAWA_OVERRIDE_REFRESH_MS=1000\n"})
    assert result["diff"]["prepared"].splitlines()[2:] == [
        "~AWA_API_TOKEN=******** (changed)", "+AWA_OVERRIDE_REFRESH_MS=******** (added)",
        "-1 comment line (not shown: a comment may hold a secret)"]
    assert "s3cret" not in json.dumps(result) and env_file.read_text(encoding="utf-8").startswith("AWA_API_TOKEN=s3cret-2")


def test_a_file_it_cannot_read_fails_the_run_with_the_reason_never_the_text(module_result, tmp_path):
    not_text = tmp_path / "producer.env"
    not_text.write_bytes(b"AWA_API_TOKEN=s3cret-\xff\n")
    result = run(module_result, services=[], method="command", env_file={"path": str(not_text), "content": "A=1\n"})
    assert result["failed"] and result["msg"] == (f"The environment file {not_text} was not written: it could not be "
                                                  "read (it is not UTF-8 text). Nothing was restarted.")
    folder = run(module_result, services=[], method="command", env_file={"path": str(tmp_path), "content": "A=1\n"})
    assert folder["failed"] and folder["env_file"]["error"] == (f"{tmp_path} was not written: it could not be read "
                                                                "(Is a directory)")
    assert "s3cret" not in json.dumps(result)


def test_an_environment_file_it_cannot_write_fails_the_run_and_restarts_nothing(module_result, tmp_path):
    marker = tmp_path / "restarted"
    missing = tmp_path / "no-such-folder" / "producer.env"
    result = run(module_result, services=["a"], restart=["a"], method="command", restart_command=f"touch {marker}",
                 env_file={"path": str(missing), "content": "A=1\n"})
    assert result["failed"] and not marker.exists()
    assert result["msg"] == (f"The environment file {missing} was not written: its folder {missing.parent} does not "
                             "exist: create it, or choose a path in an existing folder. Nothing was restarted.")
    assert result["env_file"]["error"].startswith(f"{missing} was not written")
    relative = run(module_result, services=["a"], method="command", env_file={"path": "producer.env", "content": "A=1\n"})
    assert relative["failed"] and "its path must be absolute" in relative["msg"]
    unknown_group = run(module_result, services=["a"], method="command",
                        env_file={"path": str(tmp_path / "producer.env"), "content": "A=1\n",
                                  "group": "no-such-group-awa"})
    assert unknown_group["failed"] and "there is no group no-such-group-awa on this host" in unknown_group["msg"]
    assert not (tmp_path / "producer.env").exists()


def test_a_program_that_cannot_run_is_said_in_words_and_the_services_are_still_read(module_result, tmp_path):
    missing = tmp_path / "no-such-ctl"
    refused = run(module_result, services=["a"], restart=["a"], method="command", restart_command=f"{missing} restart {{service}}")
    assert refused["failed"] and refused["msg"] == (f"Nothing was restarted: the restart command {missing} restart "
                                                    f"{{service}} cannot run here: {missing} does not exist")
    assert refused["services"][0]["service"] == "a", "the host answered: its services are read"
    # A status command whose program is gone: run_command raises, the module answers as a shell would.
    read = run(module_result, services=["a"], method="command", status_command=f"{missing} {{service}}")
    assert not read.get("failed") and "Error executing command." not in json.dumps(read)
    assert read["services"][0]["problem"] == (f"the status command {missing} a cannot run here (exit status 127: "
                                              f"{missing}: No such file or directory)")


def test_check_mode_fails_where_the_restart_could_not_be_followed(module_result, tmp_path):
    marker = tmp_path / "restarted"
    result = run(module_result, services=["a"], restart=["a"], method="command", restart_command=f"touch {marker}",
                 status_command="sh -c 'awa-no-such-tool' {service}", _ansible_check_mode=True)
    assert result["failed"] and not marker.exists()
    assert result["msg"] == ("How 1 of 1 service(s) run cannot be read (in check mode, nothing was restarted): a: the "
                             "status command sh -c 'awa-no-such-tool' a cannot run here (exit status 127: a: 1: "
                             "awa-no-such-tool: not found)")
    assert result["programs"][0]["command"] == "restart" and result["programs"][0]["path"].endswith("/touch")


def test_the_result_is_the_one_return_documents(module_result, tmp_path):
    documented = yaml.safe_load(awa_producer_services.RETURN)
    result = run(module_result, services=["a"], restart=["a"], method="command", restart_command="true {service}",
                 env_file={"path": str(tmp_path / "producer.env"), "content": "A=1\n"}, _ansible_check_mode=True,
                 _ansible_diff=True)
    assert set(result) - {"changed", "invocation"} == set(documented)
    assert set(result["services"][0]) == set(documented["services"]["contains"])
    assert set(result["programs"][0]) == set(documented["programs"]["contains"])


def test_its_methods_are_the_ones_the_role_checks():
    # The module file spells its choices out (it parses on Python 2.7, before producer/ may be imported).
    assert awa_producer_services.argument_spec()["method"]["choices"] == list(METHODS)
