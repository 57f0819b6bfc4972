# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Batches of a rolling restart, written the way Ansible's ``serial`` is.

``enqueue_shards_batch_size`` is a number of hosts, a percentage of the hosts
with services to restart (``"25%"``), or a list of either (``[1, "25%",
"100%"]``) whose last entry repeats until every host is in a batch. A
percentage is rounded down, and never below one host (as ``serial`` does).
"""

from __future__ import annotations

import math
import re
from typing import Any

PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
ACCEPTED_FORMS = ('a whole number of hosts (2), a percentage of them ("25%"), or a list of either '
                  '([1, "25%", "100%"], the last entry repeated)')


def _size(entry: object, total: int) -> int | str:
    """How many of ``total`` hosts a batch of ``entry`` holds, or why ``entry`` is no batch size."""
    if isinstance(entry, bool):
        return f"{entry!r} is not a number"
    if isinstance(entry, (int, float)) or (isinstance(entry, str) and entry.strip().isdigit()):
        number = float(entry)
        return int(number) if number >= 1 and number.is_integer() else f"{entry!r} is not a whole number of at least 1"
    match = PERCENT.match(entry) if isinstance(entry, str) else None
    if not match:
        return f"{entry!r} is neither a number nor a percentage"
    percent = float(match.group(1))
    if not 0 < percent <= 100:
        return f"{entry!r} is not a percentage above 0 and up to 100"
    return max(1, math.floor(total * percent / 100))


def batch_size_problem(spec: object) -> str | None:
    """Why ``spec`` is not a batch size, with the accepted forms; None when it is one."""
    entries = spec if isinstance(spec, list) else [spec]
    if not entries:
        return f"enqueue_shards_batch_size is an empty list: give {ACCEPTED_FORMS}"
    problems = [problem for problem in (_size(entry, 0) for entry in entries) if isinstance(problem, str)]
    return f"enqueue_shards_batch_size: {'; '.join(problems)}. Give {ACCEPTED_FORMS}" if problems else None


def describe(spec: object, sizes: list[int]) -> str:
    """The batches' sizes as the plan's headline says them: ``of at most 2 host(s)``, or ``of 1, 2, 2 host(s)
    (enqueue_shards_batch_size 1, 50%)``."""
    return (f"of {', '.join(map(str, sizes))} host(s) (enqueue_shards_batch_size {', '.join(map(str, spec))})"
            if isinstance(spec, list) else f"of at most {spec} host(s)")


def split(order: list[Any], spec: object) -> list[list[Any]]:
    """``order`` (the hosts) cut into batches of ``spec``; raises ValueError for a spec batch_size_problem refuses."""
    if problem := batch_size_problem(spec):
        raise ValueError(problem)
    entries = spec if isinstance(spec, list) else [spec]
    batches: list[list[Any]] = []
    while (start := sum(map(len, batches))) < len(order):
        batches.append(order[start:start + int(_size(entries[min(len(batches), len(entries) - 1)], len(order)))])
    return batches
