# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role enqueue_shards: meta/argument_specs.yml, defaults/main.yml and the tasks must agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.awa.operations.plugins.module_utils.db.options import connection_argument_spec
from ansible_collections.awa.operations.plugins.modules import awa_enqueue_shards
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.input_rules import (
    CHOICES,
    HOST_SETTINGS,
    KEYS,
    input_problems,
)

ROLE = Path(__file__).resolve().parents[3] / "roles" / "enqueue_shards"
PREFIX = "enqueue_shards_"
# A public variable: the role prefix with no leading underscore (derived and registered variables have them).
PUBLIC_VARIABLE = re.compile(r"(?<![\w.])" + PREFIX + r"[a-z_]+")


def load(relative: str):
    return yaml.safe_load((ROLE / relative).read_text(encoding="utf-8"))


SPECS = load("meta/argument_specs.yml")["argument_specs"]
MAIN = SPECS["main"]["options"]
DEFAULTS = load("defaults/main.yml")


def test_defaults_hold_exactly_the_variables_with_a_default_with_the_documented_values():
    documented = {name: option["default"] for name, option in MAIN.items() if "default" in option}
    assert DEFAULTS == documented


def test_the_variables_without_a_default_are_required_by_the_validate_phase_not_by_ansibles_check():
    """Ansible's check of the spec would stop a run that lacks a required variable first, printing the whole spec,
    before the validate phase could name a misspelt one (enqueue_shards_queue): so none is `required` there, the
    validate phase refuses a run without one, and its description says it is required."""
    needed = sorted(name for name, option in MAIN.items() if "default" not in option)
    assert needed == ["enqueue_shards_connection", "enqueue_shards_queues"]
    problems = input_problems({}, ["queues"])
    for name in needed:
        assert not MAIN[name].get("required"), name
        assert any(line.startswith("Required") for line in MAIN[name]["description"]), name
        assert any(problem.startswith(name) for problem in problems), (name, problems)


@pytest.mark.parametrize("entry_point", sorted(SPECS))
def test_every_entry_point_documents_a_subset_of_main_identically(entry_point):
    options = SPECS[entry_point]["options"]
    assert options, entry_point
    for name, option in options.items():
        assert name.startswith(PREFIX), name
        assert option == MAIN[name], name
        assert option.get("type"), f"{name} has no type"
        assert option.get("description"), f"{name} has no description"


@pytest.mark.parametrize("entry_point", [name for name in SPECS if name != "main"])
def test_every_entry_point_has_its_task_file(entry_point):
    assert (ROLE / "tasks" / f"{entry_point}.yml").is_file()


def test_every_public_variable_the_role_uses_is_documented():
    tags = {tag for path in ROLE.glob("tasks/**/*.yml") for task in _tasks(load(path.relative_to(ROLE).as_posix()))
            for tag in task.get("tags", [])}
    used = set()
    for path in [*ROLE.glob("tasks/**/*.yml"), *ROLE.glob("templates/*"), ROLE / "vars" / "main.yml"]:
        used |= set(PUBLIC_VARIABLE.findall(path.read_text(encoding="utf-8")))
    assert sorted(used - tags - set(MAIN)) == []


def test_no_variable_declares_what_ansibles_check_would_refuse_by_printing_the_whole_spec():
    """A key of a mapping (suboptions), a choice, a dict element or a required variable, misspelt or missing, fails
    Ansible's check of the spec, whose result prints the whole spec on one line (18 KB): the validate phase holds
    them instead (input_rules.KEYS, CHOICES), naming the one meant."""
    for name, option in MAIN.items():
        assert not {"options", "choices", "required"} & option.keys(), name
        assert option.get("elements") in (None, "str"), name


@pytest.mark.parametrize("variable, values", [*KEYS.items(), *CHOICES.items()])
def test_the_description_names_every_key_and_choice_the_validate_phase_holds(variable, values):
    """ansible-doc -t role documents them in the variable's description."""
    text = " ".join(MAIN[PREFIX + variable]["description"])
    markup = "C" if variable in KEYS else "V"
    assert [value for value in values if f"{markup}({value})" not in text] == []


def test_the_keys_the_validate_phase_holds_are_the_modules():
    assert KEYS["connection"] == tuple(connection_argument_spec())
    assert KEYS["queues"] == tuple(awa_enqueue_shards.argument_spec()["queues"]["options"])


# A derived variable of the role (one leading underscore), as vars/main.yml defines them.
DERIVED_VARIABLE = re.compile(r"(?<![\w.])_" + PREFIX + r"[a-z_]+")
INCLUDES = ("ansible.builtin.import_tasks", "import_tasks", "ansible.builtin.include_tasks", "include_tasks")


def _tasks(items):
    """Every task of a task list, blocks opened."""
    for item in items or []:
        yield item
        for section in ("block", "rescue", "always"):
            yield from _tasks(item.get(section))


def _included(task: dict) -> list[str]:
    """The task files a task imports or includes."""
    for action in INCLUDES:
        if action in task:
            target = task[action]
            return [target if isinstance(target, str) else target["file"]]
    return []


def _used_files(entry_point: str) -> list[Path]:
    """The task files an entry point runs (following includes) and the templates they render."""
    seen, pending = [], [f"{entry_point}.yml"]
    while pending:
        name = pending.pop()
        path = ROLE / "tasks" / name
        if path in seen:
            continue
        seen.append(path)
        for task in _tasks(load(f"tasks/{name}")):
            pending += _included(task)
            template = (task.get("ansible.builtin.template") or {}).get("src")
            if template:
                seen.append(ROLE / "templates" / template)
    return seen


# A read of the settings validate.yml sets on each host (rollout.input_rules.host_settings), or of a batch member's.
HOST_SETTING_READ = re.compile(r"(?:_" + PREFIX + r"host|\bitem)\.(\w+)")
SETTINGS_READERS = re.compile(r"awa\.operations\.__role\.enqueue_shards_(rollout_plan|reachability)\(")

# A template rendered by a lookup (the environment file's text, vars/main.yml).
TEMPLATE_LOOKUP = re.compile(r"lookup\('ansible\.builtin\.template', '([^']+)'\)")

# Tags name the phases like variables (enqueue_shards_pickup): they are not variables.
TAG_LINES = re.compile(r"^\s*tags:.*$", re.MULTILINE)


def _used_variables(entry_point: str) -> set[str]:
    derived = load("vars/main.yml")
    text = "\n".join(TAG_LINES.sub("", path.read_text(encoding="utf-8")) for path in _used_files(entry_point))
    names = set(DERIVED_VARIABLE.findall(text))
    # The settings validate.yml carries for every host, read as _enqueue_shards_host.NAME (or by a batch's item), or
    # all of them by the filters that plan from every host's settings.
    text += "\n" + "\n".join(PREFIX + name for name in HOST_SETTING_READ.findall(text) if name in HOST_SETTINGS)
    if SETTINGS_READERS.search(text):
        text += "\n" + "\n".join(PREFIX + name for name in HOST_SETTINGS)
    pending = list(names)
    while pending:  # derived variables mention public (and other derived) ones
        definition = str(derived.get(pending.pop(), ""))
        for name in set(DERIVED_VARIABLE.findall(definition)) - names:
            names.add(name)
            pending.append(name)
        text += "\n" + definition
    for template in set(TEMPLATE_LOOKUP.findall(text)):
        text += "\n" + (ROLE / "templates" / template).read_text(encoding="utf-8")
    used = set(PUBLIC_VARIABLE.findall(text))
    pending = list(used)
    while pending:  # a default may name another public variable (enqueue_shards_db_host: enqueue_shards_db_group)
        for name in set(PUBLIC_VARIABLE.findall(str(DEFAULTS.get(pending.pop(), "")))) - used:
            used.add(name)
            pending.append(name)
    return used


@pytest.mark.parametrize("entry_point", sorted(SPECS))
def test_every_entry_point_lists_exactly_the_variables_its_tasks_use(entry_point):
    used = _used_variables(entry_point)
    documented = set(SPECS[entry_point]["options"])
    assert sorted(used - documented) == [], "used by the tasks but not in the spec"
    assert sorted(documented - used) == [], "in the spec but used by no task of the entry point"


def test_the_spec_header_names_task_files_that_exist():
    header = (ROLE / "meta" / "argument_specs.yml").read_text(encoding="utf-8").split("argument_specs:")[0]
    named = re.findall(r"tasks/([\w./]+\.yml)", header)
    assert named and all((ROLE / "tasks" / name).is_file() for name in named), named
