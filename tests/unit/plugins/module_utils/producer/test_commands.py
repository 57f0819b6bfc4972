# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The restart contract's commands on a host: their programs found as run_command runs them, their outcome in words.
Real programs and real folders: a program is looked up the way subprocess would run it."""

from __future__ import annotations

import subprocess

import pytest

from ansible_collections.awa.operations.plugins.module_utils.producer.commands import (
    argv,
    locate,
    outcome_text,
    run_argv,
)


def run(words: list[str]) -> tuple[int, str, str]:
    """AnsibleModule.run_command with handle_exceptions=False: a program that cannot start raises OSError."""
    process = subprocess.run(words, capture_output=True, text=True, check=False)
    return process.returncode, process.stdout, process.stderr


def program(folder, name: str, mode: int = 0o755):
    path = folder / name
    path.write_text("#!/bin/sh\necho ran \"$@\"\n", encoding="utf-8")
    path.chmod(mode)
    return path


def test_a_program_is_found_on_the_path_or_by_its_path_as_it_would_run(tmp_path, monkeypatch):
    ctl = program(tmp_path, "ctl")
    assert locate("ctl", f"/nonexistent:{tmp_path}", "awa") == (str(ctl), None)
    assert locate(str(ctl), "/nonexistent", "awa") == (str(ctl), None)
    # run_command expands ~ and $VARIABLES in every word, the program's too.
    monkeypatch.setenv("AWA_CTL_HOME", str(tmp_path))
    assert locate("$AWA_CTL_HOME/ctl", "", "awa") == (str(ctl), None)
    assert locate("ctl", str(tmp_path), "root") == (str(ctl), None)


@pytest.mark.parametrize("name, path, expected", [
    ("ctl", "/nonexistent:/also-not", "ctl is not on the PATH of user awa (/nonexistent:/also-not)"),
    ("{folder}/missing", "", "{folder}/missing does not exist"),
    ("{folder}/plain", "", "{folder}/plain is not executable for user awa"),
    ("{folder}", "", "{folder} is a folder for user awa"),
    ("plain", "/nonexistent:{folder}", "plain is in {folder} but not executable for user awa"),
])
def test_a_program_that_cannot_run_is_said_in_words(tmp_path, name, path, expected):
    program(tmp_path, "plain", mode=0o644)
    fill = {"folder": str(tmp_path)}
    assert locate(name.format(**fill), path.format(**fill), "awa") == (None, expected.format(**fill))


def test_a_program_that_cannot_start_answers_as_a_shell_would(tmp_path):
    assert run_argv(run, [str(tmp_path / "gone"), "restart", "a"]) == (
        127, "", f"{tmp_path / 'gone'}: No such file or directory")
    # No execute bit at all: not even root may run it.
    not_executable = program(tmp_path, "plain", mode=0o644)
    assert run_argv(run, [str(not_executable)]) == (126, "", f"{not_executable}: Permission denied")
    assert run_argv(run, [str(program(tmp_path, "ctl")), "x"]) == (0, "ran x\n", "")


def test_a_commands_outcome_is_its_exit_status_and_last_lines_that_say_something():
    stderr = "one\n\ntwo\nthree\n   \nfour\nfive\nsix\n" + "x" * 400 + "\n"
    assert outcome_text(3, "", stderr) == ("exit status 3: three / four / five / six / " + "x" * 300 + "...")
    assert outcome_text(1, "printed on stdout\n", "") == "exit status 1: printed on stdout"
    assert outcome_text(2, "", "") == "exit status 2"
    assert outcome_text(-9, "", "") == "killed by signal 9"


def test_a_command_is_split_as_run_command_splits_it():
    assert argv("sh -c 'echo \"$0\"' 'web one'") == ["sh", "-c", 'echo "$0"', "web one"]
    with pytest.raises(ValueError, match="No closing quotation"):
        argv("sh -c 'echo")
    with pytest.raises(ValueError, match="it is empty"):
        argv("  ")
