# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role enqueue_shards's inputs, as its meta/argument_specs.yml declares them: the one list of its variables.

The spec is the role's contract (its names, types, defaults and docs); the
input rules read the names and defaults from it, here, rather than typing
them a second time. It is read from the role beside this file in the
collection, once per process, when a rule first asks.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from ansible.module_utils.common.yaml import yaml_load

# plugins/plugin_utils/rollout/ -> the collection -> the role's spec.
SPEC = Path(__file__).resolve().parents[3] / "roles" / "enqueue_shards" / "meta" / "argument_specs.yml"


@functools.lru_cache(maxsize=None)
def options() -> dict[str, dict[str, Any]]:
    """Every variable of the role (the main entry point lists them all) with its declaration."""
    declared: dict[str, dict[str, Any]] = yaml_load(SPEC.read_text(encoding="utf-8"))["argument_specs"]["main"]["options"]
    return declared


def known_variables() -> frozenset[str]:
    """The names of the role's variables."""
    return frozenset(options())


def defaults() -> dict[str, Any]:
    """The variables that have a default, with it (defaults/main.yml holds the same: a unit test says so)."""
    return {name: option["default"] for name, option in options().items() if "default" in option}
