# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role enqueue_shards: meta/argument_specs.yml, defaults/main.yml and the tasks must agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.awa.operations.plugins.module_utils.connection import connection_argument_spec

ROLE = Path(__file__).resolve().parents[3] / "roles" / "enqueue_shards"
PREFIX = "enqueue_shards_"
# A public variable: the role prefix with no leading underscore (derived and registered variables have them).
PUBLIC_VARIABLE = re.compile(r"(?<![\w.])" + PREFIX + r"[a-z_]+")


def load(relative: str):
    return yaml.safe_load((ROLE / relative).read_text(encoding="utf-8"))


SPECS = load("meta/argument_specs.yml")["argument_specs"]
MAIN = SPECS["main"]["options"]
DEFAULTS = load("defaults/main.yml")


def test_defaults_hold_exactly_the_optional_variables_with_the_documented_values():
    optional = {name: option["default"] for name, option in MAIN.items() if not option.get("required")}
    assert DEFAULTS == optional


def test_required_variables_have_no_default():
    for name, option in MAIN.items():
        if option.get("required"):
            assert "default" not in option and name not in DEFAULTS, name


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
    tags = {tag for task in load("tasks/main.yml") for tag in task.get("tags", [])}
    used = set()
    for path in [*ROLE.glob("tasks/*.yml"), *ROLE.glob("templates/*"), ROLE / "vars" / "main.yml"]:
        used |= set(PUBLIC_VARIABLE.findall(path.read_text(encoding="utf-8")))
    assert sorted(used - tags - set(MAIN)) == []


def test_connection_options_are_the_modules_connection_options():
    documented = MAIN["enqueue_shards_connection"]["options"]
    spec = connection_argument_spec()
    assert {name: option["type"] for name, option in documented.items()} == {
        name: option["type"] for name, option in spec.items()}
    assert documented["login_password"].get("no_log") is True
