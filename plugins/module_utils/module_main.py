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

Without psycopg, or on a Python older than the database modules' floor, a
module fails before its run, naming the Python it ran with and what to
install for it (``install_command``).
"""

from __future__ import annotations

import math
import platform
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.db.connection import HAS_PSYCOPG
from ansible_collections.awa.operations.plugins.module_utils.db.options import Module, connection_secrets
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    AwaOperationsError, Disconnected, FailedWithState)

# What a module says when psycopg cannot be imported, or its Python is too old: the Python it ran with and the
# command for that Python. The modules run where their task runs: with an inventory of producers only, on the
# implicit localhost, in the Python that runs ansible-playbook - often a venv or pipx's venv, which Debian's
# python3-psycopg cannot reach. So the message names that Python and the one command that fixes it there.
PIP_REQUIREMENT = "'psycopg[binary]'"
# The oldest Python the database modules run on: the newest psycopg (3.3) needs it, and older ones are not tested
# (pip gives Python 3.8 and 3.9 psycopg 3.2).
MINIMUM_PYTHON = (3, 10)
SYSTEM_PREFIX = "/usr"
OS_RELEASE = "/etc/os-release"
# Distribution ids (os-release ID and ID_LIKE) and the package of psycopg 3 there.
DISTRIBUTION_PACKAGES = (
    (("debian", "ubuntu"), "apt install python3-psycopg"),
    (("rhel", "centos", "fedora"), "dnf install python3-psycopg3"),
)
UNKNOWN_DISTRIBUTION = "your distribution's psycopg 3 package (python3-psycopg on Debian and Ubuntu)"


@dataclass(frozen=True)
class Interpreter:
    """The Python a module ran with: its executable, sys.prefix and sys.base_prefix, the host's distribution ids."""

    executable: str
    prefix: str
    base_prefix: str
    distribution_ids: tuple[str, ...] = ()
    host: str = ""
    version: str = ""


def install_command(python: Interpreter) -> str:
    """The command that makes psycopg 3 importable by ``python``.

    pipx keeps an app's venv at <pipx home>/venvs/<app>, and its home is a
    folder named pipx. Any other venv, and a Python built or installed by hand
    (/usr/local, pyenv) rather than the distribution's, installs with pip.
    """
    venv = PurePosixPath(python.prefix) if python.prefix != python.base_prefix else None
    if venv is not None and venv.parent.name == "venvs" and venv.parent.parent.name == "pipx":
        return f"pipx inject {venv.name} {PIP_REQUIREMENT}"
    if venv is not None or python.prefix != SYSTEM_PREFIX:
        return f"{python.executable} -m pip install {PIP_REQUIREMENT}"
    return next((command for ids, command in DISTRIBUTION_PACKAGES if set(ids) & set(python.distribution_ids)),
                UNKNOWN_DISTRIBUTION)


def missing_psycopg_message(python: Interpreter) -> str:
    return (f"psycopg 3 (psycopg >= 3.1) cannot be imported by the Python this module ran with on {python.host}: "
            f"{python.executable}. Install it into that Python: {install_command(python)}. The database steps run "
            "where their task runs: with producers only in the inventory, on localhost in the Python that runs "
            "ansible-playbook; with a separate database host (the inventory group awa_db_controller) they run there "
            "instead, with that host's ansible_python_interpreter. Nothing was read or written.")


def older_python_message(python: Interpreter) -> str | None:
    """Why ``python`` cannot run the database modules, and what to use instead; None when it can."""
    if not python.version or tuple(int(part) for part in python.version.split(".")[:2]) >= MINIMUM_PYTHON:
        return None
    oldest = ".".join(map(str, MINIMUM_PYTHON))
    return (f"The awa.operations database modules need Python {oldest} or newer on the host that runs them; "
            f"{python.host} runs them with {python.executable}, Python {python.version}. Point that host's "
            f"ansible_python_interpreter at a Python {oldest} or newer (RHEL 9: dnf install python3.11; or the Python "
            f"that runs ansible-playbook) and install psycopg into it ({PIP_REQUIREMENT} with its pip). The database "
            "steps run where their task runs: with producers only in the inventory, on localhost; with a host in "
            "awa_db_controller, there. Nothing was read or written.")


def this_interpreter() -> Interpreter:
    """The Python running this module, on this host (its distribution ids from os-release)."""
    try:
        with open(OS_RELEASE, encoding="utf-8") as release:
            fields = dict(line.rstrip("\n").split("=", 1) for line in release if "=" in line)
    except OSError:
        fields = {}
    ids = tuple(" ".join(fields.get(key, "").strip('"') for key in ("ID", "ID_LIKE")).split())
    return Interpreter(sys.executable, sys.prefix, sys.base_prefix, ids, socket.gethostname(), platform.python_version())


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
        module = module_class(argument_spec=_lenient(argument_spec), **kwargs)
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
    refusal = older_python_message(python) or (None if HAS_PSYCOPG else missing_psycopg_message(python))
    if refusal:
        module.fail_json(msg=refusal)
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
