# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every module that connects to the database is in the action group awa, its docs say so, and no other is.

module_defaults for group/awa.operations.awa reach a module only when
meta/runtime.yml lists it; the action_group attribute tells users it does. The
integration target proves the defaults reach both database modules at run time.
The role's internal read (plugins/modules/__role/, listed by its FQCN
``awa.operations.__role.enqueue_shards_rollout_info``: runtime.yml takes a
short name only without dots) is in it too, so the role's module_defaults
reach it; the role's functional tests run it so. A module
without the connection options (awa_producer_services, which runs on the
producer hosts) stays out: the group's connection defaults would be options it
refuses.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from ansible_collections.awa.operations.plugins.doc_fragments.attributes import ModuleDocFragment as AttributesDoc

COLLECTION = Path(__file__).resolve().parents[4]


def module_names() -> list[str]:
    """Every module, as meta/runtime.yml names it: ``name``, or ``awa.operations.__role.name`` for the role's own."""
    modules = COLLECTION / "plugins" / "modules"
    names = [".".join(path.relative_to(modules).with_suffix("").parts) for path in modules.rglob("*.py")
             if path.stem != "__init__"]
    return sorted(name if "." not in name else f"awa.operations.{name}" for name in names)


def database_modules() -> list[str]:
    """The modules that take the connection options."""
    return [name for name in module_names()
            if "awa.operations.connection" in module_documentation(name)["extends_documentation_fragment"]]


def module_documentation(name: str) -> dict:
    module = importlib.import_module(f"ansible_collections.awa.operations.plugins.modules.{name.split('.', 2)[-1]}")
    return yaml.safe_load(module.DOCUMENTATION)


def test_every_database_module_is_in_the_action_group_and_no_other():
    runtime = yaml.safe_load((COLLECTION / "meta" / "runtime.yml").read_text(encoding="utf-8"))
    assert sorted(runtime["action_groups"]["awa"]) == database_modules() == [
        "awa.operations.__role.enqueue_shards_rollout_info", "awa_enqueue_shards", "awa_enqueue_shards_info"]


def test_the_fragment_names_the_action_group():
    attributes = yaml.safe_load(AttributesDoc.ACTION_GROUP)["attributes"]
    assert attributes["action_group"] == {
        "description": "Use C(group/awa.operations.awa) in C(module_defaults) to set defaults for this module.",
        "support": "full",
        "membership": ["awa.operations.awa"],
    }


def test_every_module_documents_its_action_group_membership():
    for name in module_names():
        assert ("awa.operations.attributes.action_group" in module_documentation(name)["extends_documentation_fragment"]
                ) == (name in database_modules()), name
