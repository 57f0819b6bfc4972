# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one ``main`` of the modules: options in, the run, its result or its failure out.

Both modules' ``main()`` call ``run_module`` with their argument spec and a
``run`` that takes the module object and returns the result and its
warnings. Every failure of awa.operations (errors.py) becomes ``fail_json``
here: one that saw the state (``FailedWithState``) with that state and its
warnings, the others with their details. A bad option value is a clear
failure too: ansible-core's int check (2.18 to 2.21) raises ``OverflowError``
on an infinite float (YAML ``.inf``) instead of reporting a type error, which
would end the module with a traceback, so ``build_module`` fails with a
message naming the option (2.16, 2.17 and from 2.22 the check reports a type error itself). The module class is passed in, so this file needs no Ansible import.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.db.connection import HAS_PSYCOPG
from ansible_collections.awa.operations.plugins.module_utils.db.options import Module, connection_secrets
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    AwaOperationsError,
    Disconnected,
    FailedWithState,
)
from ansible_collections.awa.operations.plugins.module_utils.db.psycopg_install import (
    missing_psycopg_message,
    older_python_message,
    this_interpreter,
)


def _infinite_int_options(spec: dict[str, Any], params: dict[str, Any], prefix: str = "") -> list[str]:
    """The integer options, sub-options included (each entry of a dict or list of dicts), holding an infinite float."""
    names = []
    for name, option in spec.items():
        value = params.get(name)
        if option.get("type") == "int" and isinstance(value, float) and math.isinf(value):
            names.append(prefix + name)
        entries = [entry for entry in (value if isinstance(value, list) else [value]) if isinstance(entry, dict)]
        for index, entry in enumerate(entries if "options" in option else []):
            names += _infinite_int_options(option["options"], entry, f"{prefix}{name}[{index}].")
    return names


def _lenient(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with every integer option, sub-options included, left raw."""
    return {name: dict(option, **({"type": "raw"} if option.get("type") == "int" else {}),
                       **({"options": _lenient(option["options"])} if "options" in option else {}))
            for name, option in spec.items()}


def build_module(module_class: Callable[..., Module], argument_spec: dict[str, Any], **kwargs: Any) -> Module:
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


def run_module(module_class: Callable[..., Module], argument_spec: dict[str, Any], rules: Mapping[str, list[Any]],
               run: Callable[[Module], tuple[Mapping[str, object], list[str]]],
               *, mark_disconnected: bool = False) -> None:
    """Build the module (check mode supported), ``run`` it, and exit with its result or fail with its error.

    On a Python older than the database modules' floor, or without psycopg, it fails with the Python it ran with and
    what to install for it.
    ``mark_disconnected`` adds ``disconnected: true`` to the failure of an
    error that is a lost or unreachable server (the info module's action
    plugin retries those).
    """
    module = build_module(module_class, argument_spec, supports_check_mode=True, **rules)
    # Ansible masks login_password, but not a password in connect_params or written into login_db or login_host:
    # masked like it in the whole result (the invocation ansible-core 2.19 prints at -vvv, messages, warnings).
    module.no_log_values.update(connection_secrets(module.params))
    python = this_interpreter()
    too_old = older_python_message(python)
    if too_old:
        module.fail_json(msg=too_old)
    if not HAS_PSYCOPG:
        module.fail_json(msg=missing_psycopg_message(python))
    try:
        result, warnings = run(module)
    except FailedWithState as exc:
        warned = exc.result.pop("warnings", [])
        for warning in warned if isinstance(warned, list) else []:
            module.warn(warning)
        module.fail_json(msg=exc.message, **exc.result)
    except AwaOperationsError as exc:
        disconnected = {"disconnected": True} if mark_disconnected and isinstance(exc, Disconnected) else {}
        module.fail_json(msg=exc.message, **exc.details, **disconnected)
    for warning in warnings:
        module.warn(warning)
    # Handed to Ansible just above, which returns them as the result's ``warnings`` (the info module's result
    # carries its own too).
    module.exit_json(**{key: value for key, value in result.items() if key != "warnings"})
