# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every filter of the role is registered, documented, and documented with the arguments it takes."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml

from ansible_collections.awa.operations.plugins.filter.enqueue_shards import FilterModule

FILTERS = FilterModule().filters()
DOCS = Path(__file__).resolve().parents[4] / "plugins" / "filter"


def test_every_documented_filter_is_registered_and_every_registered_one_documented():
    assert sorted(FILTERS) == sorted(path.stem for path in DOCS.glob("*.yml"))


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_the_docs_name_the_functions_arguments_in_order(name):
    """Positional arguments are ``positional`` (the input first); keyword-only ones follow them in ``options``."""
    documentation = yaml.safe_load((DOCS / f"{name}.yml").read_text(encoding="utf-8"))["DOCUMENTATION"]
    assert documentation["name"] == name
    parameters = inspect.signature(FILTERS[name]).parameters.values()
    by_position = [parameter.name for parameter in parameters if parameter.kind is parameter.POSITIONAL_OR_KEYWORD]
    by_keyword = [parameter.name for parameter in parameters if parameter.kind is parameter.KEYWORD_ONLY]
    positional = [argument.strip() for argument in documentation["positional"].split(",")]
    assert positional == ["_input"] + by_position[1:]
    assert list(documentation["options"]) == positional + by_keyword
    required = [option for option, spec in documentation["options"].items() if spec.get("required")]
    without_default = [parameter.name for parameter in parameters if parameter.default is inspect.Parameter.empty]
    assert required == ["_input"] + without_default[1:]
