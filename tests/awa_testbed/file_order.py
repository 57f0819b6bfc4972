"""The order in which pytest-xdist hands out the functional test files: the costliest first.

hack/test.sh runs the functional tests on three workers with ``--dist loadfile``:
a file's tests stay on one worker. xdist hands files out in collection order
(with ``--no-loadscope-reorder``; by default it puts the files with the most
tests first), so a file that takes minutes and comes late leaves the other
workers idle at the end. Started first, it runs beside the short ones.

The cost of a file is its seconds in an earlier run, kept in
tests/functional/file_seconds.json (``pytest --record-file-seconds PATH``
writes it). A file it does not know yet counts as the median known file.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar


class HasNodeId(Protocol):  # pylint: disable=too-few-public-methods
    nodeid: str


Item = TypeVar("Item", bound=HasNodeId)


def file_of(nodeid: str) -> str:
    """``tests/functional/test_x.py::test_y[pg18]`` -> ``tests/functional/test_x.py``."""
    return nodeid.split("::", 1)[0]


def costliest_files_first(items: Sequence[Item], file_seconds: dict[str, float]) -> list[Item]:
    """The items grouped by file, the files by their seconds (most first), each file's items in their order."""
    default = statistics.median(file_seconds.values()) if file_seconds else 0.0
    first_position: dict[str, int] = {}
    for position, item in enumerate(items):
        first_position.setdefault(file_of(item.nodeid), position)

    def cost(item: Item) -> tuple[float, int]:
        name = file_of(item.nodeid)
        # Equal costs keep the collection's order of files; sorted() keeps the order within a file.
        return -file_seconds.get(name, default), first_position[name]

    return sorted(items, key=cost)


def seconds_by_file(reports: Iterable[tuple[str, float]]) -> dict[str, float]:
    """(nodeid, seconds) of every setup, call and teardown -> each file's seconds, rounded."""
    totals: dict[str, float] = defaultdict(float)
    for nodeid, seconds in reports:
        totals[file_of(nodeid)] += seconds
    return {name: round(total, 1) for name, total in sorted(totals.items())}


def load(path: Path) -> dict[str, float]:
    """The recorded seconds, or none when the file is missing."""
    try:
        return {str(name): float(seconds) for name, seconds in json.loads(path.read_text(encoding="utf-8")).items()}
    except FileNotFoundError:
        return {}


def save(path: Path, file_seconds: dict[str, float]) -> None:
    path.write_text(json.dumps(file_seconds, indent=1) + "\n", encoding="utf-8")
