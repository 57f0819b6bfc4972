# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Holding a value, or a module's RETURN documentation, against a declared TypedDict (module_utils/info/result.py).

``value_problems`` lists every way a result differs from its declaration:
a missing key, a key the declaration does not name, a value of another type.
``doc_problems`` does the same for RETURN documentation: the same keys at
every level (``contains``), the same types and list elements, and
``returned: always`` exactly for the keys always returned. Both return
messages naming the path of each difference, so a failing test says where.
Shared by the unit test of the declaration and the functional test that
reads a live result on PostgreSQL 17 and 18.
"""

from __future__ import annotations

import types
import typing

from ansible_collections.awa.operations.plugins.module_utils.schema.ledger import LedgerRow

# Keys every Ansible module result may carry, documented by Ansible rather than by the module.
COMMON_RETURN_KEYS = frozenset({"changed", "warnings"})
DOC_TYPES = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict"}
# Types the declarations import for their annotations only (under TYPE_CHECKING, so that the role's filters, which
# read results with them, import no database driver), resolved here.
ANNOTATION_ONLY = {"LedgerRow": LedgerRow}


def _hints(declared: type) -> dict[str, object]:
    return typing.get_type_hints(declared, localns=ANNOTATION_ONLY)


def _unwrap_optional(declared: object) -> tuple[object, bool]:
    """(X, True) for ``X | None``; (declared, False) otherwise."""
    if typing.get_origin(declared) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(declared) if arg is not types.NoneType]
        if len(members) == 1 and len(typing.get_args(declared)) == 2:
            return members[0], True
    return declared, False


def _is_instance(value: object, declared: type) -> bool:
    if declared is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if declared is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, declared)


def value_problems(value: object, declared: object, where: str = "result") -> list[str]:
    """Every difference between ``value`` and the declared type ``declared``, each naming its path."""
    declared, optional = _unwrap_optional(declared)
    if declared is typing.Any:
        return []
    if value is None:
        return [] if optional else [f"{where}: None, declared {declared!r}"]
    if typing.is_typeddict(declared):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, declared {declared.__name__}"]
        hints = _hints(declared)
        problems = [f"{where}.{key}: missing (declared by {declared.__name__})"
                    for key in sorted(declared.__required_keys__ - value.keys())]
        problems += [f"{where}.{key}: not declared by {declared.__name__}" for key in sorted(value.keys() - hints.keys())]
        for key in sorted(value.keys() & hints.keys()):
            problems += value_problems(value[key], hints[key], f"{where}.{key}")
        return problems
    origin, args = typing.get_origin(declared), typing.get_args(declared)
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, declared a list"]
        return [problem for index, item in enumerate(value)
                for problem in value_problems(item, args[0], f"{where}[{index}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, declared a dict"]
        return [problem for key, item in value.items()
                for problem in ([f"{where}: key {key!r} is not a {args[0].__name__}"]
                                if not _is_instance(key, args[0]) else [])
                + value_problems(item, args[1], f"{where}[{key!r}]")]
    if not _is_instance(value, declared):
        return [f"{where}: {type(value).__name__} {value!r}, declared {declared.__name__}"]
    return []


def _doc_type(declared: object) -> tuple[str, str | None, object | None]:
    """(RETURN type, list elements type or None, the TypedDict whose keys ``contains`` lists or None)."""
    declared, dummy = _unwrap_optional(declared)
    if typing.is_typeddict(declared):
        return "dict", None, declared
    origin, args = typing.get_origin(declared), typing.get_args(declared)
    if origin is list:
        elements, dummy, described = _doc_type(args[0])
        return "list", elements, described
    if origin is dict:
        dummy_type, dummy_elements, entry = _doc_type(args[1])
        # dict[str, SomeView]: a mapping of names to views, documented by the view's keys.
        return "dict", None, entry
    return DOC_TYPES[declared], None, None


def doc_problems(declared: type, documented: dict, where: str = "RETURN", top_level: bool = False) -> list[str]:
    """Every difference between a TypedDict and the RETURN entries (``documented``) that describe it."""
    hints = _hints(declared)
    # Keys Ansible documents itself are held only where the module documents them too.
    names = hints.keys() - (COMMON_RETURN_KEYS - documented.keys() if top_level else set())
    problems = [f"{where}.{key}: declared by {declared.__name__}, not documented" for key in sorted(names - documented.keys())]
    problems += [f"{where}.{key}: documented, not declared by {declared.__name__}"
                 for key in sorted(documented.keys() - names)]
    for key in sorted(names & documented.keys()):
        entry, path = documented[key], f"{where}.{key}"
        doc_type, elements, described = _doc_type(hints[key])
        if entry.get("type") != doc_type:
            problems.append(f"{path}: documented type {entry.get('type')}, declared {doc_type}")
        if entry.get("elements") != elements:
            problems.append(f"{path}: documented elements {entry.get('elements')}, declared {elements}")
        if top_level:
            always = key in declared.__required_keys__
            if (entry.get("returned") == "always") != always:
                problems.append(f"{path}: documented returned {entry.get('returned')!r}, declared "
                                f"{'always' if always else 'only sometimes'}")
        if described is None and "contains" in entry:
            problems.append(f"{path}: documents contains, declared {hints[key]!r} has no keys")
        elif described is not None:
            if "contains" not in entry:
                problems.append(f"{path}: documents no contains, declared {described.__name__} has keys")
            else:
                problems += doc_problems(described, entry["contains"], path)
    return problems
