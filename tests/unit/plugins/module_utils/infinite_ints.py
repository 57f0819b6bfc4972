# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a module's failure says for an infinite value (YAML ``.inf``) of an integer option, on the running ansible-core.

Up to 2.21, ansible-core's integer check raises ``OverflowError`` on it, and
``module_main.build_module`` fails with the collection's message naming
the option. From 2.22 the check reports a type error itself, naming the option
and, for a sub-option, the option holding it, before build_module sees anything.
"""

from __future__ import annotations

from ansible.module_utils.common.validation import check_type_int


def core_refuses_infinity() -> bool:
    """Whether the running ansible-core's integer check reports an infinite value as a type error (2.22 on)."""
    try:
        check_type_int(float("inf"))
    except OverflowError:
        return False
    except TypeError:
        return True
    raise AssertionError("ansible-core's integer check took an infinite value")


def infinite_int_refusal(path: str) -> str:
    """What the failure message for an infinite ``path`` (``shards``, ``queues[1].shards``) contains."""
    if not core_refuses_infinity():
        return f"{path} must be a finite integer, got an infinite value"
    holder, dot, option = path.rpartition(".")
    found_in = f" found in '{holder.partition('[')[0]}'." if dot else ""
    return f"argument '{option}' is of type float{found_in} and we were unable to convert to int: \"inf\""
