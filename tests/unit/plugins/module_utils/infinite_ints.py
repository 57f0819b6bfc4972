# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the running ansible-core's integer check does with a float: an integral one, and an infinite one (YAML ``.inf``).

ansible-core 2.16 and 2.17 take no float for an integer option: a type error
of their own names the option. From 2.18 an integral float (``8.0``, or the
string ``"8.0"``) becomes its integer. 2.18 to 2.21 raise ``OverflowError`` on
an infinite one, and ``module_main.build_module`` fails with the collection's
message naming the option; from 2.22 the check reports a type error itself,
naming the option and, for a sub-option, the option holding it, before
build_module sees anything.
"""

from __future__ import annotations

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.validation import check_type_int


def core_takes_integral_floats() -> bool:
    """Whether the running ansible-core's integer check turns ``8.0`` into 8 (2.18 on)."""
    try:
        return check_type_int(8.0) == 8
    except TypeError:
        return False


def core_refuses_infinity() -> bool:
    """Whether the running ansible-core's integer check reports an infinite value as a type error (2.16, 2.17, 2.22 on)."""
    try:
        check_type_int(float("inf"))
    except OverflowError:
        return False
    except TypeError:
        return True
    raise AssertionError("ansible-core's integer check took an infinite value")


def infinite_int_refusal(path: str) -> str:
    """What the failure message for an infinite ``path`` (``shards``, ``queues[1].shards``) contains: the
    collection's words, or the running core's own type error for an integer option at that place."""
    if not core_refuses_infinity():
        return f"{path} must be a finite integer, got an infinite value"
    holder, dot, option = path.rpartition(".")
    spec: dict = {option: {"type": "int"}}
    value: dict = {option: float("inf")}
    if dot:
        name = holder.partition("[")[0]
        spec, value = {name: {"type": "list", "elements": "dict", "options": spec}}, {name: [value]}
    [error] = ArgumentSpecValidator(spec).validate(value).errors
    return str(error)
