"""awa_enqueue_shards through Ansible itself: ansible-playbook and ad hoc ``ansible -m``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from enqueue_shards_support import (
    ansible_adhoc,
    ansible_command,
    change,
    complete_lanes,
    lanes_below,
    shard_counts,
    snapshot,
)

# The change window on the floor core too (conftest.py, --floor-python).
pytestmark = pytest.mark.floor

STEP_PLAYBOOK = Path(__file__).with_name("playbooks") / "enqueue_shards_step.yml"


def playbook_step(tmp_path: Path, variables: dict, *flags: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run the one-task playbook with ``variables``; returns the process and the registered result."""
    result_file = tmp_path / "result.json"
    result_file.unlink(missing_ok=True)
    vars_file = tmp_path / "vars.json"
    vars_file.write_text(json.dumps({**variables, "result_file": str(result_file)}), encoding="utf-8")
    process = ansible_command("ansible-playbook", str(STEP_PLAYBOOK), "-e", f"@{vars_file}", "--diff", *flags)
    assert process.returncode == 0, f"{process.stdout}\n{process.stderr}"
    return process, json.loads(result_file.read_text(encoding="utf-8"))


def test_playbook_check_then_apply_then_rerun(awa_db, tmp_path):
    # detail: the statements, compared below.
    variables = {**awa_db.login_args(), "queue": "played", "shards": 4, "stripes": 2, "new_queue": True, "detail": True}
    before = snapshot(awa_db)

    check_run, checked = playbook_step(tmp_path, variables, "--check")
    assert snapshot(awa_db) == before, "the --check run wrote"
    applied_run, applied = playbook_step(tmp_path, variables)
    dummy, again = playbook_step(tmp_path, variables)

    assert (checked["changed"], checked["check_mode"], applied["changed"], applied["check_mode"]) == (
        True, True, True, False)
    assert checked["diff"] == applied["diff"] == {
        "before": dict.fromkeys(["played#0", "played#1"], {
            "enqueue_shards": 1, "lanes": 0, "lanes_missing": 4, "missing_grants": 0}),
        "after": dict.fromkeys(["played#0", "played#1"], {
            "enqueue_shards": 4, "lanes": 16, "lanes_missing": 0, "missing_grants": 0})}
    assert checked["queries"] == applied["queries"] and applied["queries"]
    assert '+        "enqueue_shards": 4,' in check_run.stdout, "--diff shows the change"
    assert "[WARNING]: Running Awa 0.6 runtimes keep enqueue_shards=1" in applied_run.stderr
    assert shard_counts(awa_db) == {"played#0": 4, "played#1": 4}
    assert complete_lanes(awa_db, "played#1") == lanes_below(4)
    assert (again["changed"], again["queries"], again["diff"]["before"]) == (False, [], again["diff"]["after"])


@pytest.mark.parametrize("module_args, message", [
    ({"queue": "orders", "shards": 65}, "shards must be between 1 and 64, got 65"),
    ({"queue": "orders", "shards": 4, "runtime_roles": ["awa_runtime_typo"]},
     "runtime_roles do not exist in database"),
], ids=["shards-65", "unknown-runtime-role"])
def test_ad_hoc_refusal_fails_with_the_reason_and_writes_nothing(awa_db, module_args, message):
    before = snapshot(awa_db)

    process, result = ansible_adhoc({**awa_db.login_args(), **module_args})

    assert process.returncode != 0 and "localhost | FAILED!" in process.stdout
    assert message in result["msg"]
    assert snapshot(awa_db) == before


def test_ad_hoc_lowering_shows_the_diff_and_warns_about_draining(awa_db):
    change(awa_db, "lowered", 8)

    process, result = ansible_adhoc({**awa_db.login_args(), "queue": "lowered", "shards": 2}, "--diff")

    assert process.returncode == 0 and "localhost | CHANGED" in process.stdout
    assert (result["previous_shards"], result["lanes_created"]) == ({"lowered": 8}, 0)
    assert '-        "enqueue_shards": 8,' in process.stdout and '+        "enqueue_shards": 2,' in process.stdout
    # Lines joined: ansible-core before 2.19 wraps a warning at the terminal's width (79 columns without one).
    assert "[WARNING]: Lowering 'lowered' from 8 to 2: jobs already on shards >= 2 keep draining" in \
        " ".join(process.stderr.split())
    assert shard_counts(awa_db) == {"lowered": 2}
