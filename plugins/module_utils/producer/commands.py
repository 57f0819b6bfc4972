# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The commands of the restart contract on a producer host: their words, their programs, their outcome in words.

A command (the restart command, the status command, or systemctl) runs
without a shell, as AnsibleModule.run_command runs it: split like a shell
would split it, each word's ``~`` and ``$VARIABLES`` expanded, its program
looked up on the PATH the module runs with. So a program can be found before
anything is changed - the same lookup, without running it - and a program
that cannot run is said in the operator's words, never as Ansible's bare
"Error executing command.".
"""

from __future__ import annotations

import errno
import os
import pwd
import shlex
import shutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias

SERVICE_PLACEHOLDER = "{service}"
# How much of a failed command's output its message keeps: the last lines, each cut to a length.
FAILURE_LINES, FAILURE_LINE_CHARS = 5, 300
# A shell's exit status for a command it could not run: found but not executable, or not found.
CANNOT_EXECUTE, NOT_FOUND = 126, 127

# run(argv) -> (rc, stdout, stderr): AnsibleModule.run_command, or any function like it. In quotes: evaluated, the
# alias would need Python 3.9, and this runs on producer hosts from 3.8 on.
Runner: TypeAlias = "Callable[[list[str]], tuple[int, str, str]]"


def for_service(command: str, service: str) -> str:
    """A restart or status command for one service: ``{service}`` replaced by the quoted name."""
    return command.replace(SERVICE_PLACEHOLDER, shlex.quote(service))


def argv(command: str) -> list[str]:
    """The command's words, as run_command splits them; ValueError when they cannot be split (an open quote)."""
    words = shlex.split(command)
    if not words:
        raise ValueError("it is empty")
    return words


def expanded(word: str) -> str:
    """A word as run_command passes it to the program: ``~`` and ``$VARIABLES`` expanded."""
    return os.path.expanduser(os.path.expandvars(word))


def locate(program: str, path: str | None = None, user: str | None = None) -> tuple[str | None, str | None]:
    """The program's path as it would run for ``user`` with PATH ``path``; else None and why it would not, in words:
    not found, or not executable. By default the module's PATH (subprocess's: the module's environment) and the user
    it runs as on the host (the connection's, or the one it becomes)."""
    path = os.environ.get("PATH", os.defpath) if path is None else path
    name = expanded(program)
    located = shutil.which(name, path=path)
    if located is not None:
        return located, None
    if user is None:
        try:
            user = pwd.getpwuid(os.geteuid()).pw_name
        except KeyError:
            user = f"uid {os.geteuid()}"
    if os.sep in name:
        return None, (f"{name} does not exist" if not os.path.exists(name)
                      else f"{name} is {'a folder' if os.path.isdir(name) else 'not executable'} for user {user}")
    present = [folder for folder in path.split(os.pathsep) if os.path.isfile(os.path.join(folder or ".", name))]
    if present:
        return None, f"{name} is in {present[0]} but not executable for user {user}"
    return None, f"{name} is not on the PATH of user {user} ({path})"


def run_argv(run: Runner, words: list[str]) -> tuple[int, str, str]:
    """Run ``words`` with ``run``, a program that cannot start answering as a shell would (126 or 127 and why).

    ``run`` must raise OSError when the program cannot start (run_command with
    handle_exceptions=False), instead of failing the whole module with
    "Error executing command.".
    """
    try:
        return run(words)
    except OSError as error:
        status = NOT_FOUND if error.errno == errno.ENOENT else CANNOT_EXECUTE
        return status, "", f"{expanded(words[0])}: {error.strerror or error}"


def outcome_text(rc: int, stdout: str, stderr: str) -> str:
    """A command's outcome for a message: its exit status and the last FAILURE_LINES lines that say something of its
    stderr (else of its stdout), each cut to FAILURE_LINE_CHARS."""
    lines = [line.strip() for line in (stderr if (stderr or "").strip() else stdout or "").splitlines() if line.strip()]
    said = [line if len(line) <= FAILURE_LINE_CHARS else line[:FAILURE_LINE_CHARS] + "..."
            for line in lines[-FAILURE_LINES:]]
    return (f"exit status {rc}" if rc >= 0 else f"killed by signal {-rc}") + (f": {' / '.join(said)}" if said else "")
