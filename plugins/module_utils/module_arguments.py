# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Building a module object that turns every bad option value into a clear failure.

ansible-core's int check (up to 2.21) raises ``OverflowError`` on an infinite
float (YAML ``.inf``) instead of reporting a type error, which would end the
module with a traceback. ``build_module`` catches that case and fails with a
message naming the option. From 2.22 the check reports the type error itself. The module class is passed in, so this file needs no Ansible import.
"""

from __future__ import annotations

import math


def _entries(value: object) -> list[dict]:
    """The dicts a sub-option value holds (a dict, or a list of them)."""
    values = value if isinstance(value, list) else [value]
    return [entry for entry in values if isinstance(entry, dict)]


def _infinite_int_options(spec: dict, params: dict, prefix: str = "") -> list[str]:
    names = []
    for name, option in spec.items():
        value = params.get(name)
        if option.get("type") == "int" and isinstance(value, float) and math.isinf(value):
            names.append(prefix + name)
        for index, entry in enumerate(_entries(value) if "options" in option else []):
            names += _infinite_int_options(option["options"], entry, f"{prefix}{name}[{index}].")
    return names


def _lenient(spec: dict) -> dict:
    """``spec`` with every integer option, sub-options included, left raw."""
    return {name: dict(option, **({"type": "raw"} if option.get("type") == "int" else {}),
                       **({"options": _lenient(option["options"])} if "options" in option else {}))
            for name, option in spec.items()}


def build_module(module_class, argument_spec: dict, **kwargs):
    """``module_class(argument_spec=..., **kwargs)``, failing cleanly on infinite integers."""
    try:
        return module_class(argument_spec=argument_spec, **kwargs)
    except OverflowError:
        # Re-read the options with integers left raw, to name the offending ones.
        lenient = _lenient(argument_spec)
        module = module_class(argument_spec=lenient, **kwargs)
        names = _infinite_int_options(argument_spec, module.params) or ["an integer option"]
        module.fail_json(msg=f"{', '.join(names)} must be a finite integer, got an infinite value")
        raise  # fail_json exits; this line is never reached
