# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The back-out: the same playbook and options, with the previous counts."""

from __future__ import annotations

import copy
import json
import shlex

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.backout import (
    backout_command,
    inline_secrets,
    previous_counts,
)
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.recorded import load

UNCONVERGED = load("info-unconverged")  # after change #2: demo 4 -> 6
CLI = {"args": ("awa.operations.set_enqueue_shards",), "inventory": ("inventory/hosts.yml",),
       "extra_vars": ("@/srv/change.yml", "enqueue_shards_reason=CHG-1"), "become": True, "subset": "awa_*",
       "vault_password_files": ("~/.vault",), "check": True, "diff": True, "tags": ("enqueue_shards_change",),
       "become_user": None}


def test_the_previous_count_is_the_one_the_last_recorded_change_switched_from():
    entries, problems = previous_counts([{"queue": "demo", "shards": 6, "stripes": None}], UNCONVERGED)
    assert (entries, problems) == ([{"queue": "demo", "shards": 4}], [])


def test_the_command_repeats_the_run_s_options_and_sets_the_previous_counts_last():
    text = backout_command([{"queue": "demo", "shards": 6}], UNCONVERGED, CLI)
    prefix = "To back out (the previous counts, the same options): "
    assert text.startswith(prefix)
    words = shlex.split(text[len(prefix):])
    assert words[:13] == ["ansible-playbook", "-i", "inventory/hosts.yml", "-e", "@/srv/change.yml",
                          "-e", "enqueue_shards_reason=CHG-1", "--vault-password-file", "~/.vault",
                          "--limit", "awa_*", "--become", "awa.operations.set_enqueue_shards"]
    assert words[13] == "-e" and json.loads(words[14]) == {"enqueue_shards_queues": [{"queue": "demo", "shards": 4}]}
    assert len(words) == 15  # no --check, --diff or --tags: a back-out runs the whole window for real


def test_without_a_recorded_change_there_is_nothing_to_back_out():
    never = copy.deepcopy(UNCONVERGED)
    never["queues"]["demo"]["last_change"] = {}
    assert backout_command([{"queue": "demo", "shards": 6}], never, CLI) == (
        "Nothing to back out: demo: no change of its count is recorded, so there is nothing to back out.")


def test_outside_ansible_playbook_it_says_what_to_set():
    assert backout_command([{"queue": "demo", "shards": 6}], UNCONVERGED, {}) == (
        'To back out, run your change-window playbook again with enqueue_shards_queues: [{"queue": "demo", "shards": 4}].')


def test_a_secret_the_run_was_given_inline_is_masked_and_said_to_be_given_again():
    connection = '{"enqueue_shards_connection": {"login_user": "awa", "login_password": "pw-s3cret"}}'
    environment = ('{"enqueue_shards_environment": {"AWA_API_TOKEN": "tok-s3cret", "AWA_REGION": "eu-1"}, '
                   '"enqueue_shards_env_file_show": ["AWA_REGION"]}')
    inline = {**CLI, "extra_vars": ("@/srv/change.yml", connection, "enqueue_shards_reason=CHG-1 s3cret", environment)}
    text = backout_command([{"queue": "demo", "shards": 6}], UNCONVERGED, inline)
    assert "pw-s3cret" not in text and "tok-s3cret" not in text
    words = shlex.split(text.split(": ", 1)[1].split(" (")[0])
    assert words[4:11] == [
        "@/srv/change.yml", "-e", '{"enqueue_shards_connection": {"login_user": "awa", "login_password": "********"}}',
        # A key=value extra variable is a string, never the role's connection or environment: repeated as it is.
        "-e", "enqueue_shards_reason=CHG-1 s3cret",
        "-e", '{"enqueue_shards_environment": {"AWA_API_TOKEN": "********", "AWA_REGION": "eu-1"}, '
              '"enqueue_shards_env_file_show": ["AWA_REGION"]}']
    assert text.endswith("(******** is a secret this run was given in an extra variable: give it again)")
    assert "give it again" not in backout_command([{"queue": "demo", "shards": 6}], UNCONVERGED, CLI)


def test_inline_extra_variables_are_read_as_ansible_playbook_reads_them():
    assert inline_secrets("{enqueue_shards_connection: {login_password: pw-s3cret}}") == ["pw-s3cret"]
    assert inline_secrets('{"enqueue_shards_environment": {"AWA_OVERRIDE_REFRESH_MS": 500, "T": "tok"}}') == ["tok"]
    assert inline_secrets("{enqueue_shards_connection: ") == [] and inline_secrets("@/srv/secrets.yml") == []


def test_the_command_runs_as_printed_from_any_directory_with_one_extra_variable_of_counts(tmp_path, monkeypatch):
    (tmp_path / "inventory.yml").write_text("all: {}\n", encoding="utf-8")
    (tmp_path / "change_window.yml").write_text("[]\n", encoding="utf-8")
    (tmp_path / "vars.yml").write_text("{}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    earlier_backout = '{"enqueue_shards_queues": [{"queue": "demo", "shards": 6}]}'
    cli = {"args": ("change_window.yml",), "inventory": ("inventory.yml", "inventory.yml"),
           "extra_vars": ("@vars.yml", earlier_backout, '{"enqueue_shards_reason": "CHG-2", "enqueue_shards_queues": []}',
                          "@vars.yml")}
    text = backout_command([{"queue": "demo", "shards": 6}], UNCONVERGED, cli)
    words = shlex.split(text.split(": ", 1)[1])
    assert words == ["ansible-playbook", "-i", str(tmp_path / "inventory.yml"), "-e", f"@{tmp_path / 'vars.yml'}",
                     "-e", '{"enqueue_shards_reason": "CHG-2"}', str(tmp_path / "change_window.yml"),
                     "-e", '{"enqueue_shards_queues": [{"queue": "demo", "shards": 4}]}']


def test_a_run_that_does_not_change_the_count_prints_no_command_to_back_it_out():
    assert backout_command([{"queue": "demo", "shards": 6}], UNCONVERGED, CLI, changes=False) == (
        'To back out, run your change-window playbook again with enqueue_shards_queues: [{"queue": "demo", "shards": 4}].')
