# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Building a module object that turns every bad option value into a clear failure.

ansible-core's int check raises ``OverflowError`` on an infinite float (YAML
``.inf``) instead of reporting a type error, which would end the module with a
traceback. ``build_module`` catches that case and fails with a message naming
the option. The module class is passed in, so this file needs no Ansible import.
"""

from __future__ import annotations

import math


def _infinite_int_options(spec: dict, params: dict) -> list[str]:
    return [name for name, option in spec.items()
            if option.get("type") == "int" and isinstance(params.get(name), float) and math.isinf(params[name])]


def build_module(module_class, argument_spec: dict, **kwargs):
    """``module_class(argument_spec=..., **kwargs)``, failing cleanly on infinite integers."""
    try:
        return module_class(argument_spec=argument_spec, **kwargs)
    except OverflowError:
        # Re-read the options with integers left raw, to name the offending ones.
        lenient = {name: dict(option, type="raw") if option.get("type") == "int" else option
                   for name, option in argument_spec.items()}
        module = module_class(argument_spec=lenient, **kwargs)
        names = _infinite_int_options(argument_spec, module.params) or ["an integer option"]
        module.fail_json(msg=f"{', '.join(names)} must be a finite integer, got an infinite value")
        raise  # fail_json exits; this line is never reached
