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
# The lines that are not NAME=value, by kind: how the diff counts them, and why it does not show them.
OTHER_LINES = {"comment": ("comment line", " (not shown: a comment may hold a secret)"), "blank": ("blank line", ""),
               "other": ("other line", " (not NAME=value, not shown)")}


def _parse(text: str | None) -> tuple[dict[str, str], Counter[tuple[str, str]]]:
    """Each variable's value (the last one assigned, as systemd reads it), and every other line by (kind, line)."""
    variables: dict[str, str] = {}
    others: Counter[tuple[str, str]] = Counter()
    for line in (text or "").splitlines():
        match = VARIABLE.match(line)
        if match:
            variables[match.group(1)] = match.group(2)
        else:
            others[("comment" if line.strip()[:1] in ("#", ";") else "other" if line.strip() else "blank", line)] += 1
    return variables, others


def _variable_line(name: str, before: str | None, after: str | None, shown: bool) -> str:
    """One variable that is added, removed or changed."""
    sign, change = ("+", "added") if before is None else ("-", "removed") if after is None else (
        "~", f"changed from {before}" if shown else "changed")
    return f"{sign}{name}={(after if after is not None else before) if shown else MASK} ({change})"


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
    # How many lines of each kind that is not NAME=value are added and removed (never the lines).
    added, removed = (Counter(kind for kind, dummy in (more - fewer).elements())
                      for more, fewer in ((new_others, old_others), (old_others, new_others)))
    lines += [f"~{counted(added[kind], noun)} added, {removed[kind]} removed{why}" if added[kind] and removed[kind]
              else f"{'+' if added[kind] else '-'}{counted(added[kind] or removed[kind], noun)}{why}"
              for kind, (noun, why) in OTHER_LINES.items() if added[kind] or removed[kind]]
    if not lines and before != after:
        lines.append(" only the layout changed (the order of lines, spaces, line endings or a variable assigned "
                     "twice): every variable keeps the value a service reads")
    if unchanged:
        lines.append(f" unchanged: {names_text(unchanged)}")
    return "".join(line + "\n" for line in lines)
