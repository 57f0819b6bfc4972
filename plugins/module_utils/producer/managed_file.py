# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One file made to hold given text, with its owner, group and mode, as ansible.builtin.copy would.

awa_producer_services writes the producers' environment file with it in the
same run that reads the services, so the rollout needs no template task (and
its two module runs) on every host. The text is written through a temporary
file in the same folder and moved into place (no reader ever sees half a
file); owner, group and mode are set with AnsibleModule's own helpers, which
honour check mode. Nothing is written when the text and attributes already
match: the result's ``changed`` is honest. What the diff shows of the text is
the caller's to say (``show_change``): a file may hold secrets.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import sys
import tempfile
from collections.abc import Callable
from typing import Any


OCTAL_MODE = re.compile(r"^0?[0-7]{3,4}$")


def _reason(exc: OSError | UnicodeError) -> str:
    """The reason without the bytes or the text it may quote."""
    return "it is not UTF-8 text" if isinstance(exc, UnicodeError) else exc.strerror or type(exc).__name__


def _raise_instead(msg: str = "", **kwargs: Any) -> None:
    """In place of fail_json during the move: an exception with its message, caused by the one being handled (the
    move's OSError), as ansible-core 2.19 on raises it."""
    raise RuntimeError(msg) from sys.exc_info()[1]


def _write(module: Any, path: str, text: str) -> str | None:
    """Write ``text`` to ``path`` through a temporary file in its folder, moved into place: why it could not be
    written (never the text), else None."""
    # ansible-core before 2.19 ends the module with fail_json when the move fails (2.19 on raise an Exception): it
    # raises instead, so the run fails with the file's own message, as on every core.
    fail_json, module.fail_json = module.fail_json, _raise_instead
    temporary = ""
    try:
        handle, temporary = tempfile.mkstemp(prefix=".awa-", dir=os.path.dirname(path))
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        # unsafe_writes=False: the move is atomic, or it fails and the file stays as it was.
        module.atomic_move(temporary, path, unsafe_writes=False)
        return None
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # An OSError, or an Exception with the move's OSError its cause: the reason is the OSError's.
        cause = exc if isinstance(exc, OSError) else exc.__cause__
        return _reason(cause) if isinstance(cause, OSError) else str(exc)
    finally:
        module.fail_json = fail_json
        if temporary and os.path.exists(temporary):
            os.unlink(temporary)


def _current_text(path: str, owner: str | None, group: str | None, mode: str | None) -> tuple[str | None, str | None]:
    """The text ``path`` holds (None: there is no file), or why it cannot be written with ``owner``, ``group`` and
    ``mode`` on this host (None: it can)."""
    for kind, name, lookup, purpose in (("user", owner, pwd.getpwnam, "to own"), ("group", group, grp.getgrnam, "for")):
        try:
            if name and not name.isdigit():
                lookup(name)
        except KeyError:
            return None, f"there is no {kind} {name} on this host {purpose} the file"
    if mode is not None and not OCTAL_MODE.match(mode):
        return None, f'the mode must be a quoted octal mode such as "0640", got {mode!r}'
    if not os.path.isabs(path):
        return None, "its path must be absolute"
    if not os.path.isdir(os.path.dirname(path)):
        return None, (f"its folder {os.path.dirname(path)} does not exist: create it, or choose a path in an existing "
                      "folder")
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), None
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeError) as exc:
        return None, f"it could not be read ({_reason(exc)})"


def ensure_file(module: Any, path: str, text: str, *, show_change: Callable[[str | None, str], str],
                owner: str | None = None, group: str | None = None,
                mode: str | None = None) -> tuple[dict[str, Any], dict[str, str] | None]:
    """Make ``path`` hold ``text`` with ``owner``, ``group`` and ``mode`` (None: left as they are).

    Returns the outcome (``path``, ``changed``, and ``error`` when it could not be done) and the diff
    (None when the text is unchanged): Ansible's ``prepared`` form, the file's
    path and then what ``show_change(before, text)`` says of the change (before
    is None when there is no file). In check mode nothing is written and
    ``changed`` says whether it would be.
    """
    before, problem = _current_text(path, owner, group, mode)
    diff: dict[str, str] | None = None
    if problem is None and before != text:
        # Not the two texts, which Ansible would print as a unified diff: the caller says what may be shown.
        diff = {"prepared": f"--- {path if before is not None else '(absent)'}\n+++ {path}\n"
                            + show_change(before, text)}
        problem = None if module.check_mode else _write(module, path, text)
    if problem is not None:
        return {"path": path, "changed": False, "error": f"{path} was not written: {problem}"}, None
    try:
        # In check mode a file that would be created has no attributes to compare yet.
        attributes_changed = os.path.exists(path) and module.set_fs_attributes_if_different(
            {"path": path, "owner": owner, "group": group, "mode": mode, "attributes": None,
             "secontext": [None, None, None]}, False)
    except OSError as exc:
        return {"path": path, "changed": bool(diff), "error": f"{path} has its text, but not its owner, group or "
                                                              f"mode: {exc}"}, diff
    return {"path": path, "changed": bool(diff or attributes_changed)}, diff
