# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How messages word names: a list of them in a few words, a count, the name meant by a misspelt one.

What the role and the modules print stays one screen long for a hundred queues.

A change window of a few queues and services prints one line for each; past
``LISTED`` they are counted, named by ranges (``q001..q100``) or by the
first few, and the whole record goes to the run's JSON report. The modules
name queues the same way: the change's warnings, a wait's progress line and
its timeout message say each thing once for the queues it concerns.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from typing import Any

# Items listed one by one (a line each, or a name each) before they are counted instead.
LISTED = 10
# Queues whose own lines (the info module's summary of each) the summary prints before it prints counts.
DETAILED_QUEUES = 3
NUMBERED = re.compile(r"^(.*?)(\d+)$")


def _ranges(names: list[str]) -> list[str] | None:
    """``q001, q002, q003, q007`` -> ``q001..q003, q007``; None when the names are not numbered alike."""
    matches = [NUMBERED.match(name) for name in names]
    if not all(matches):
        return None
    # Each run of consecutive numbers of one prefix and width: [prefix, width, first name, last name, last number].
    runs: list[list[Any]] = []
    for match in sorted((m for m in matches if m), key=lambda m: (m.group(1), len(m.group(2)), int(m.group(2)))):
        prefix, digits = match.groups()
        if runs and runs[-1][:2] == [prefix, len(digits)] and runs[-1][4] + 1 == int(digits):
            runs[-1][3:] = [match.group(0), int(digits)]
        else:
            runs.append([prefix, len(digits), match.group(0), match.group(0), int(digits)])
    return [first if first == last else f"{first}..{last}" for dummy, dummy, first, last, dummy in runs]


def names_text(names: Iterable[str], limit: int = LISTED) -> str:
    """The names, one by one up to ``limit``; past it as numbered ranges when those are few, else the first
    ``limit`` and a count of the others."""
    names = list(dict.fromkeys(names))
    if len(names) <= limit:
        return ", ".join(names)
    ranges = _ranges(names)
    if ranges is not None and len(ranges) <= limit:
        return ", ".join(ranges)
    return ", ".join(names[:limit]) + f" and {len(names) - limit} more"


def named_queues(queues: list[str]) -> str:
    """One queue by its name; more as ``3 queues (a, b, c)`` or ``100 queues (q000..q099)``."""
    return queues[0] if len(queues) == 1 else f"{counted(len(queues), 'queue')} ({names_text(queues)})"


def counted(count: int, noun: str) -> str:
    """``1 queue``, ``3 queues``: nouns whose plural takes an s."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def kind_lines(lines: list[str], kind: str) -> list[str]:
    """Lines of one kind (findings, notes), each as ``kind: line`` up to LISTED; past it, counted with the first."""
    if len(lines) <= LISTED:
        return [f"{kind}: {line}" for line in lines]
    return [f"{counted(len(lines), kind)}, the first: {lines[0]} (-v, or the run's report, lists them all)"]


def did_you_mean(name: str, known: Iterable[str], *, compared: Callable[[str], str] = str, limit: int = 3) -> str:
    """`` (did you mean orders?)``: the known names closest to a name that is not one of them (a typo's likely
    intent), the closest first; empty when none is close. ``compared`` is what of each name is compared (for role
    variables, the name without the role's prefix, which every one of them shares)."""
    # Of the names compared alike, the first.
    by_compared = {compared(candidate): candidate for candidate in reversed(list(known))}
    close = difflib.get_close_matches(compared(name), list(by_compared), n=limit, cutoff=0.6)
    return f" (did you mean {' or '.join(by_compared[match] for match in close)}?)" if close else ""
