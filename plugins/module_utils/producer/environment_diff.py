# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The diff of an environment file: which variables are added, removed or changed, never a value that may be secret.

An environment file holds what services read when they start - in practice a
database URL with its password, and tokens. A unified diff prints each changed
line and the lines around it as they are, so changing one variable shows the
password on the next line. This diff names every variable added, removed or
changed, and shows a value only for the variables the caller lists as safe to
show; every other value is ``********``. Lines that are not ``NAME=value``
(comments, blank lines, anything else) are only counted: a comment may hold a
secret too (a value commented out).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection

from ansible_collections.awa.operations.plugins.module_utils.wording import counted, names_text
from ansible_collections.awa.operations.plugins.module_utils.masking import MASK

# NAME=value, as a systemd EnvironmentFile reads it (spaces around the name are ignored).
VARIABLE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$")
# The lines that are not NAME=value, by kind, and how the diff counts them.
OTHER_LINES = {"comment": "comment line", "blank": "blank line", "other": "other line"}
NOT_SHOWN = {"comment": " (not shown: a comment may hold a secret)", "blank": "",
             "other": " (not NAME=value, not shown)"}


def _kind(line: str) -> str:
    stripped = line.strip()
    if not stripped:
        return "blank"
    return "comment" if stripped[0] in "#;" else "other"


def _parse(text: str | None) -> tuple[dict[str, str], Counter[tuple[str, str]]]:
    """Each variable's value (the last one assigned, as systemd reads it), and every other line by (kind, line)."""
    variables: dict[str, str] = {}
    others: Counter[tuple[str, str]] = Counter()
    for line in (text or "").splitlines():
        match = VARIABLE.match(line)
        if match:
            variables[match.group(1)] = match.group(2)
        else:
            others[(_kind(line), line)] += 1
    return variables, others


def _variable_line(name: str, before: str | None, after: str | None, shown: bool) -> str:
    """One variable that is added, removed or changed."""
    value = (after if after is not None else before) if shown else MASK
    if before is None:
        return f"+{name}={value} (added)"
    if after is None:
        return f"-{name}={value} (removed)"
    return f"~{name}={value} (changed from {before})" if shown else f"~{name}={value} (changed)"


def _other_lines(before: Counter[tuple[str, str]], after: Counter[tuple[str, str]]) -> list[str]:
    """How many lines of each kind that is not NAME=value are added and removed (never the lines)."""
    lines = []
    for kind, noun in OTHER_LINES.items():
        added, removed = (sum(number for (line_kind, dummy), number in (more - fewer).items() if line_kind == kind)
                          for more, fewer in ((after, before), (before, after)))
        if added and removed:
            lines.append(f"~{counted(added, noun)} added, {removed} removed{NOT_SHOWN[kind]}")
        elif added or removed:
            lines.append(f"{'+' if added else '-'}{counted(added or removed, noun)}{NOT_SHOWN[kind]}")
    return lines


def environment_diff(before: str | None, after: str, shown: Collection[str] = ()) -> str:
    """What changed from ``before`` (None: no file) to ``after``, a line each, for a diff's ``prepared`` text.

    ``+NAME=...`` added, ``-NAME=...`` removed, ``~NAME=...`` changed: the value
    only when ``shown`` lists NAME (a changed one with its previous value),
    ``********`` otherwise. The unchanged variables are named on one line,
    other lines are counted, and a change of layout alone is said as such.
    """
    old, old_others = _parse(before)
    new, new_others = _parse(after)
    names = sorted(set(old) | set(new))
    unchanged = [name for name in names if old.get(name) == new.get(name)]
    lines = [_variable_line(name, old.get(name), new.get(name), name in shown) for name in names
             if name not in unchanged]
    lines += _other_lines(old_others, new_others)
    if not lines and before != after:
        lines.append(" only the layout changed (the order of lines, spaces, line endings or a variable assigned "
                     "twice): every variable keeps the value a service reads")
    if unchanged:
        lines.append(f" unchanged: {names_text(unchanged)}")
    return "".join(line + "\n" for line in lines)
