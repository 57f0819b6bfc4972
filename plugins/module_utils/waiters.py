# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waiting: predicates on an observed state, and one loop with one deadline.

The loop owns no clock of its own (``clock`` and ``sleep`` are injected), so
it is tested without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ansible_collections.awa.operations.plugins.module_utils.shards_info_result import ShardsRead

WAIT_CHOICES = ("none", "converged", "drained", "restarted")


def converged(info: ShardsRead) -> bool:
    return bool(info["converged"])


def drained(info: ShardsRead) -> bool:
    # Drained implies converged: a runtime with the old count refills old shards.
    return bool(info["converged"] and info["drained"])


def restarted(info: ShardsRead) -> bool:
    # After a restart: enough new runtime instances are live and healthy.
    return len(info["new_runtimes"]) >= info["expected_new_runtimes"]


PREDICATES: dict[str, Callable[[ShardsRead], bool]] = {"converged": converged, "drained": drained, "restarted": restarted}


@dataclass(frozen=True)
class WaitOutcome:
    satisfied: bool
    last: dict
    elapsed: float
    polls: int


def wait_until(fetch: Callable[[], dict], predicate: Callable[[dict], bool], timeout: float, interval: float, *,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
               on_poll: Callable[[dict, float], None] | None = None) -> WaitOutcome:
    """Fetch until ``predicate`` holds or ``timeout`` seconds pass; a timeout of 0 means one look."""
    started = clock()
    deadline = started + timeout
    polls = 0
    while True:
        observed = fetch()
        polls += 1
        elapsed = clock() - started
        if on_poll is not None:
            on_poll(observed, elapsed)
        if predicate(observed):
            return WaitOutcome(True, observed, elapsed, polls)
        remaining = deadline - clock()
        if remaining <= 0:
            return WaitOutcome(False, observed, elapsed, polls)
        sleep(min(interval, remaining))
