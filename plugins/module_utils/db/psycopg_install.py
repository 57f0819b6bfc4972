# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a module says when psycopg cannot be imported: the Python it ran with and the command for that Python.

The modules run where their task runs: with an inventory of producers only,
on the implicit localhost, in the Python that runs ansible-playbook - often a
venv or pipx's venv, which Debian's python3-psycopg cannot reach. So the
message names that Python and the one command that fixes it there.
"""

from __future__ import annotations

import platform
import socket
import sys
from dataclasses import dataclass
from pathlib import PurePosixPath

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


def _distribution_ids(os_release: str) -> tuple[str, ...]:
    try:
        with open(os_release, encoding="utf-8") as release:
            fields = dict(line.rstrip("\n").split("=", 1) for line in release if "=" in line)
    except OSError:
        return ()
    return tuple(" ".join(fields.get(key, "").strip('"') for key in ("ID", "ID_LIKE")).split())


def this_interpreter() -> Interpreter:
    """The Python running this module, on this host."""
    return Interpreter(sys.executable, sys.prefix, sys.base_prefix, _distribution_ids(OS_RELEASE),
                       socket.gethostname(), platform.python_version())
