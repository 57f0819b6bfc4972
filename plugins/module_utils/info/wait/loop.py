# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a wait is: its conditions (predicates on an observed state, by the wait's name) and one loop with one
deadline.

The loop owns no clock of its own (``clock`` and ``sleep`` are injected), so
it is tested without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from ansible_collections.awa.operations.plugins.module_utils.info.result import StateRead

# What a wait fetches: a read of the state (any of its declared shapes).
Read = TypeVar("Read", bound=StateRead)


def converged(info: StateRead) -> bool:
    return bool(info["converged"])


def drained(info: StateRead) -> bool:
    # Drained implies converged: a runtime with the old count refills old shards.
    return bool(info["converged"] and info.get("drained", False))


def restarted(info: StateRead) -> bool:
    # After a restart: enough new runtime instances are live and healthy.
    return len(info["new_runtimes"]) >= info["expected_new_runtimes"]


PREDICATES: dict[str, Callable[[StateRead], bool]] = {"converged": converged, "drained": drained, "restarted": restarted}


@dataclass(frozen=True)
class Interruption:
    """Polls that failed in a row with a lost connection, until one succeeded again."""

    lost_at: float  # seconds into the wait of the first failed poll
    error: str  # why the first one failed
    attempts: int  # reconnection attempts after it (the last one succeeded, unless the wait gave up)


@dataclass(frozen=True)
class WaitOutcome(Generic[Read]):
    satisfied: bool
    last: Read
    elapsed: float
    polls: int
    interruptions: tuple[Interruption, ...] = ()


@dataclass(frozen=True)
class Reconnect:
    """How a wait rides out polls that fail because the connection was lost (a failover, a restart).

    A poll failing so is not the end of the wait: the wait tries again
    ``attempts`` times, ``interval`` seconds apart (at least its own interval),
    within its deadline, and only then gives up (``ReconnectGaveUp``).
    """

    lost: Callable[[BaseException], bool]  # which failures are a lost connection
    attempts: int
    interval: float
    describe: Callable[[BaseException], str] = str  # the failure, in one line for messages
    on_attempt: Callable[[BaseException, int, float], None] | None = None  # failure, attempt number, delay


class ReconnectGaveUp(Exception):
    """The connection stayed lost: every reconnection attempt failed, or the deadline came first."""

    def __init__(self, interruption: Interruption, last_error: str, elapsed: float, polls: int,
                 last: StateRead | None, deadline_reached: bool) -> None:
        super().__init__(last_error)
        self.interruption = interruption
        self.last_error = last_error
        self.elapsed = elapsed
        self.polls = polls
        self.last = last
        self.deadline_reached = deadline_reached


def wait_until(fetch: Callable[[], Read], predicate: Callable[[Read], bool], timeout: float, interval: float, *,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
               on_poll: Callable[[Read, float], None] | None = None,
               reconnect: Reconnect | None = None) -> WaitOutcome[Read]:
    """Fetch until ``predicate`` holds or ``timeout`` seconds pass; a timeout of 0 means one look.

    With ``reconnect``, a fetch that raises a lost connection is tried again
    (see ``Reconnect``); any other exception ends the wait as it is.
    """
    started = clock()
    deadline = started + timeout
    polls = 0
    observed: Read | None = None
    interruptions: list[Interruption] = []
    lost: Interruption | None = None
    while True:
        try:
            current = fetch()
        except Exception as exc:  # pylint: disable=broad-exception-caught
            if reconnect is None or not reconnect.lost(exc):
                raise
            if lost is None:
                lost = Interruption(clock() - started, reconnect.describe(exc), attempts=0)
            else:
                lost = replace(lost, attempts=lost.attempts + 1)
            remaining = deadline - clock()
            if lost.attempts >= reconnect.attempts or remaining <= 0:
                raise ReconnectGaveUp(lost, reconnect.describe(exc), clock() - started, polls, observed,
                                      deadline_reached=remaining <= 0) from None
            delay = min(max(interval, reconnect.interval), remaining)
            if reconnect.on_attempt is not None:
                reconnect.on_attempt(exc, lost.attempts + 1, delay)
            sleep(delay)
            continue
        observed = current
        if lost is not None:
            interruptions.append(replace(lost, attempts=lost.attempts + 1))
            lost = None
        polls += 1
        elapsed = clock() - started
        if on_poll is not None:
            on_poll(observed, elapsed)
        if predicate(observed):
            return WaitOutcome(True, observed, elapsed, polls, tuple(interruptions))
        remaining = deadline - clock()
        if remaining <= 0:
            return WaitOutcome(False, observed, elapsed, polls, tuple(interruptions))
        sleep(min(interval, remaining))
