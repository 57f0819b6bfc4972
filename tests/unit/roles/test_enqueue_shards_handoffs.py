# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role enqueue_shards: the handoffs table of tasks/main.yml is what the phase files set and read.

A handoff is a registered result (``__enqueue_shards_*``) or a fact
(``_enqueue_shards_*``, set_fact) that one task file sets and another reads,
directly or through a value of vars/main.yml made of it. The table names each
with the files that set it and the files that read it; a new one, or a reader
more or less, fails here until the table says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROLE = Path(__file__).resolve().parents[3] / "roles" / "enqueue_shards"
TASKS = ROLE / "tasks"
# A derived value (one underscore) or a registered result (two) of the role, where a template names it.
NAME = re.compile(r"(?<![\w.])_{1,2}enqueue_shards_\w+")
SET_FACT = ("ansible.builtin.set_fact", "set_fact")
# Every play host's own values, gathered from hostvars once (vars/main.yml's _enqueue_shards_hosts, the filter
# enqueue_shards_play_hosts): a view of them read as _enqueue_shards_hosts.VIEW, and the handoffs each view is made of.
HOSTS_VIEW = re.compile(r"(?<![\w.])_enqueue_shards_hosts\.(\w+)")
HOSTS_VIEWS = {"settings": {"_enqueue_shards_host"}, "probes": {"__enqueue_shards_reach"},
               "reads": {"_enqueue_shards_host", "__enqueue_shards_reach", "__enqueue_shards_services_now"},
               "restarts": {"__enqueue_shards_restart"}, "stopped": set()}
REPORT_FILE = "awa.operations.__role.enqueue_shards_report_file"
# A row of the table: the value and what it is, then the files that set and read it on the next line.
ROW = re.compile(r"^#\s+(_{1,2}enqueue_shards_\w+) - .+\n#\s+set by (.+?); read by (.+)$", re.MULTILINE)


def _tasks(items):
    """Every task of a task list, blocks opened."""
    for item in items or []:
        yield item
        for section in ("block", "rescue", "always"):
            yield from _tasks(item.get(section))


def _strings(value):
    """Every string in a task's values (never its keys: a set_fact or vars key defines, it does not read)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _task_files() -> dict[str, list]:
    """Each task file's tasks, by name: the phases' numbered stems (their order is the flow's), the entry points'."""
    return {path.stem: list(_tasks(yaml.safe_load(path.read_text(encoding="utf-8"))))
            for path in sorted(TASKS.rglob("*.yml"), key=lambda path: path.stem)}


def _set_by(tasks: list) -> set[str]:
    names = {task["register"] for task in tasks if "register" in task}
    for task in tasks:
        for action in SET_FACT:
            names |= set(task.get(action) or {})
        # The record after a batch keeps the window's state it holds (the report writer's facts).
        names |= set((task.get(REPORT_FILE) or {}).get("facts") or {})
    return names


# The window's record, written as the window goes: before the end it reads whatever is there yet (each read
# defaults to none), so only the end (8_record) reads every value it is made of.
RECORD, RECORD_END = "_enqueue_shards_record", "8_record"


def _read_by(tasks: list, derived: dict[str, set[str]], file: str) -> set[str]:
    """The names a file's templates read, a value of vars/main.yml standing for the names it is made of, a view of every
    play host's values for the handoffs it is made of."""
    read = set()
    for task in tasks:
        for text in _strings({key: value for key, value in task.items() if key != "register"}):
            for name in NAME.findall(text):
                read |= {name} | (derived.get(name, set()) if name != RECORD or file == RECORD_END else set())
            for view in HOSTS_VIEW.findall(text):
                read |= HOSTS_VIEWS[view]
    return read


def _derived() -> dict[str, set[str]]:
    """Each value of vars/main.yml with the names it is made of, through the other values too."""
    values = yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))
    made_of = {name: set(NAME.findall(str(text))) for name, text in values.items()}
    changed = True
    while changed:
        changed = False
        for name, parts in made_of.items():
            deeper = set().union(*(made_of.get(part, set()) for part in parts)) - parts
            if deeper:
                parts |= deeper
                changed = True
    return made_of


def handoffs() -> dict[str, tuple[list[str], list[str]]]:
    """Each value a task file sets and another reads: (the files that set it, the files that read it). The first
    file that sets it (in the flow's order) is not counted among its readers."""
    files, derived = _task_files(), _derived()
    setters = {file: _set_by(tasks) for file, tasks in files.items()}
    readers = {file: _read_by(tasks, derived, file) for file, tasks in files.items()}
    found = {}
    for name in sorted(set().union(*setters.values())):
        set_in = [file for file in files if name in setters[file]]
        read_in = [file for file in files if name in readers[file] and file != set_in[0]]
        if read_in:
            found[name] = (set_in, read_in)
    return found


def table() -> dict[str, tuple[list[str], list[str]]]:
    text = (TASKS / "main.yml").read_text(encoding="utf-8")
    return {row[1]: (row[2].split(", "), row[3].split(", ")) for row in ROW.finditer(text)}


def test_the_table_lists_every_handoff_with_the_files_that_set_and_read_it():
    assert table() == handoffs()


def test_a_phase_reads_only_what_an_earlier_phase_or_itself_set():
    # The phases' files are numbered in the flow's order (main.yml imports them so). An entry point sets a value
    # only in the rescue of the block it imports its later phases in: what stopped them, for the record after them.
    for name, (set_in, read_in) in handoffs().items():
        phases = [file for file in set_in if file[0].isdigit()]
        if not phases:
            assert read_in == ["8_record"], (name, set_in, read_in)
            continue
        assert all(reader >= phases[0] for reader in read_in), (name, set_in, read_in)


def _imports(path: str) -> list[str]:
    """The task files an entry point imports, in order, through the entry points it imports (window_start, ...)."""
    found = []
    for task in _tasks(yaml.safe_load((TASKS / path).read_text(encoding="utf-8"))):
        if "ansible.builtin.import_tasks" in task:
            imported = task["ansible.builtin.import_tasks"]
            found += [imported] if imported.startswith("phases/") else _imports(imported)
    return found


def test_the_phases_are_numbered_in_the_order_main_imports_them():
    imported = [path for path in _imports("main.yml") if path != "phases/stop.yml"]
    assert imported == sorted(imported), imported
    phases = sorted(path.relative_to(TASKS).as_posix() for path in (TASKS / "phases").glob("*.yml"))
    assert [path for path in phases if path not in imported] == ["phases/5_pickup_batch.yml", "phases/stop.yml"], phases
