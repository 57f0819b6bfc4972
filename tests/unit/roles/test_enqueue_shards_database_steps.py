# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role enqueue_shards: every step on the database is opened the same way.

Each phase opens its database steps with the same few keys (tasks/main.yml's
header): delegated to enqueue_shards_db_host, once, without become, with the
connection as the module defaults of the awa group. They are written out in
each phase, where a reader looks for them (an include to share them would
cost a task per phase and hide the keys from --list-tasks); this test keeps
the copies from drifting apart.
"""

from __future__ import annotations

from pathlib import Path

import yaml

TASKS = Path(__file__).resolve().parents[3] / "roles" / "enqueue_shards" / "tasks"
DATABASE_HOST = "{{ enqueue_shards_db_host }}"
CONNECTION = {"group/awa.operations.awa": "{{ _enqueue_shards_database }}"}
# The modules of the awa action group (meta/runtime.yml): they take the connection from the module defaults.
AWA_GROUP = ("awa.operations.awa_enqueue_shards", "awa.operations.awa_enqueue_shards_info",
             "awa.operations.__role.enqueue_shards_rollout_info")


def _with_children(task: dict) -> list[dict]:
    return [task] + [child for section in ("block", "rescue", "always") for item in task.get(section) or []
                     for child in _with_children(item)]


def _database_steps() -> list[tuple[str, dict]]:
    """Each task or block delegated to the database host, with the stem of its file."""
    steps = []
    for path in sorted(TASKS.rglob("*.yml")):
        for item in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            steps += [(path.stem, task) for task in _with_children(item) if task.get("delegate_to") == DATABASE_HOST]
    return steps


def test_every_phase_that_reads_or_writes_the_database_has_a_step_on_it():
    assert sorted({stem for stem, dummy in _database_steps()}) == [
        "3_preflight", "4_change", "5_pickup", "5_pickup_batch", "6_wait", "7_summary", "8_record"]


def test_every_database_step_runs_once_without_become():
    for stem, step in _database_steps():
        assert step.get("become") is False, (stem, step["name"])
        assert step.get("run_once") is True, (stem, step["name"])


def test_every_database_step_that_calls_the_awa_modules_connects_through_the_same_module_defaults():
    for stem, step in _database_steps():
        calls = {key for task in _with_children(step) for key in task if key in AWA_GROUP}
        if calls:
            assert step.get("module_defaults") == CONNECTION, (stem, step["name"], sorted(calls))
        else:
            assert "module_defaults" not in step, f"{stem}: {step['name']} sets a connection it does not use"


def test_the_module_defaults_ask_every_read_and_the_change_for_their_detail():
    """The role's filters read every runtime (the restart plan, the batches' verdicts, the summary's N of M), each
    queue's lanes (preflight's unreadable lanes) and shards (the summary's ready jobs per shard), which the modules
    return only with detail: every call takes it from these module defaults (the test above)."""
    defaults = (TASKS.parent / "vars" / "main.yml").read_text(encoding="utf-8")
    assert "'detail': true" in defaults.split("_enqueue_shards_database:", 1)[1].split("\n\n", 1)[0]
