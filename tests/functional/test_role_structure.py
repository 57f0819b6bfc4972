"""The change-window playbook's tasks, as ansible-playbook lists them before it runs anything (no database).

Every phase is imported, so ``--list-tasks`` shows every task an operator can
``--start-at-task`` or tag; the playbook includes nothing at run time (a play
per batch of hosts runs the batch's tasks), and the role's main entry point
includes only its batch loop.
"""

from __future__ import annotations

import yaml

from enqueue_shards_support import ansible_command
from rollout_support import PLAYBOOK, REPO, TESTBED_INVENTORY

TASKS = REPO / "roles" / "enqueue_shards" / "tasks"
IMPORT = "ansible.builtin.import_tasks"
INCLUDE = "ansible.builtin.include_tasks"


def _task_names(file_name: str) -> tuple[list[str], list[str]]:
    """The names of the tasks of a task file and of the files it imports (blocks opened), and the files it
    includes at run time."""
    names, included = [], []
    pending = list(yaml.safe_load((TASKS / file_name).read_text(encoding="utf-8")))
    while pending:
        task = pending.pop(0)
        if IMPORT in task:
            imported, deeper = _task_names(task[IMPORT])
            names += imported
            included += deeper
            continue
        names.append(task["name"])
        if INCLUDE in task:
            included.append(task[INCLUDE])
        # A block's rescue runs only on a failure, and --list-tasks does not list it.
        pending[:0] = task.get("block", [])
    return names, included


def _all_tasks(tasks: list) -> list:
    """The tasks of a task list, those of its blocks too."""
    return [found for task in tasks for found in [task, *_all_tasks(task.get("block", []))]]


def test_every_phase_task_is_listed_before_the_run():
    listed = ansible_command("ansible-playbook", "-i", str(TESTBED_INVENTORY), str(PLAYBOOK), "--list-tasks")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    names, included = [], []
    for entry_point in ("window_start.yml", "window_batch.yml", "window_end.yml"):
        found = _task_names(entry_point)
        names, included = names + found[0], included + found[1]
    assert included == [], "the playbook's plays include nothing at run time"
    assert _task_names("main.yml")[1] == ["phases/5_pickup_batch.yml"], "main includes only its batches"
    # Block names are not tasks: ansible-playbook lists the tasks inside them.
    blocks = {task["name"] for file in TASKS.rglob("*.yml") for task in _all_tasks(yaml.safe_load(file.read_text("utf-8")))
              if "block" in task}
    missing = [name for name in names if name not in blocks and f"enqueue_shards : {name}" not in listed.stdout]
    assert missing == [], listed.stdout
    assert len([name for name in names if name not in blocks]) >= 15
