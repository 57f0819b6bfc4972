# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every module is in the action group awa, and its docs say so.

module_defaults for group/awa.operations.awa reach a module only when
meta/runtime.yml lists it; the action_group attribute tells users it does. The
integration target proves the defaults reach both modules at run time.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from ansible_collections.awa.operations.plugins.doc_fragments.attributes import ModuleDocFragment as AttributesDoc

COLLECTION = Path(__file__).resolve().parents[4]


def module_names() -> list[str]:
    return sorted(path.stem for path in (COLLECTION / "plugins" / "modules").glob("*.py") if path.stem != "__init__")


def module_documentation(name: str) -> dict:
    module = importlib.import_module(f"ansible_collections.awa.operations.plugins.modules.{name}")
    return yaml.safe_load(module.DOCUMENTATION)


def test_every_module_is_in_the_action_group():
    runtime = yaml.safe_load((COLLECTION / "meta" / "runtime.yml").read_text(encoding="utf-8"))
    assert sorted(runtime["action_groups"]["awa"]) == module_names()


def test_the_fragment_names_the_action_group():
    attributes = yaml.safe_load(AttributesDoc.ACTION_GROUP)["attributes"]
    assert attributes["action_group"] == {
        "description": "Use C(group/awa.operations.awa) in C(module_defaults) to set defaults for this module.",
        "support": "full",
        "membership": ["awa.operations.awa"],
    }


def test_every_module_documents_its_action_group():
    for name in module_names():
        assert "awa.operations.attributes.action_group" in module_documentation(name)["extends_documentation_fragment"], name
