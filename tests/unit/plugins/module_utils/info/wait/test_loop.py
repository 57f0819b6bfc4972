# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wait loop, driven by a fake clock and a scripted fetch (no real sleeping)."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.info.wait.loop import (
    PREDICATES,
    Interruption,
    Reconnect,
    ReconnectGaveUp,
    wait_until,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def scripted(*states):
    remaining = list(states)
    return lambda: remaining.pop(0) if len(remaining) > 1 else remaining[0]


NOT_YET = {"converged": False, "drained": False}
CONVERGED = {"converged": True, "drained": False}
DRAINED = {"converged": True, "drained": True}


def test_returns_as_soon_as_the_predicate_holds():
    clock = FakeClock()
    polled = []
    outcome = wait_until(scripted(NOT_YET, NOT_YET, CONVERGED), PREDICATES["converged"], 60, 2,
                         clock=clock, sleep=clock.sleep, on_poll=lambda info, elapsed: polled.append(elapsed))
    assert outcome.satisfied and outcome.polls == 3 and outcome.last is CONVERGED
    assert clock.sleeps == [2, 2] and polled == [0, 2, 4]


def test_times_out_with_the_last_state_and_never_sleeps_past_the_deadline():
    clock = FakeClock()
    outcome = wait_until(scripted(NOT_YET), PREDICATES["converged"], 5, 2, clock=clock, sleep=clock.sleep)
    assert not outcome.satisfied and outcome.last is NOT_YET
    assert clock.sleeps == [2, 2, 1] and outcome.elapsed == 5


def test_zero_timeout_looks_once():
    clock = FakeClock()
    outcome = wait_until(scripted(NOT_YET), PREDICATES["drained"], 0, 2, clock=clock, sleep=clock.sleep)
    assert outcome.polls == 1 and clock.sleeps == []


def test_drained_implies_converged():
    assert not PREDICATES["drained"]({"converged": False, "drained": True})
    assert not PREDICATES["drained"](CONVERGED)
    assert PREDICATES["drained"](DRAINED)


class Lost(Exception):
    """A scripted lost connection."""


def script(*steps):
    """A fetch that returns each state or raises each exception in turn (the last step repeats)."""
    remaining = list(steps)

    def fetch():
        step = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        if isinstance(step, Exception):
            raise step
        return step

    return fetch


def reconnecting(attempts: int = 3, interval: float = 5, announced: list | None = None) -> Reconnect:
    return Reconnect(lost=lambda exc: isinstance(exc, Lost), attempts=attempts, interval=interval,
                     on_attempt=None if announced is None else lambda exc, n, delay: announced.append((str(exc), n, delay)))


def test_a_lost_connection_is_retried_at_the_reconnect_interval_and_reported_once_it_is_back():
    clock, announced = FakeClock(), []
    outcome = wait_until(script(NOT_YET, Lost("server closed the connection"), Lost("refused"), CONVERGED),
                         PREDICATES["converged"], 60, 2, clock=clock, sleep=clock.sleep,
                         reconnect=reconnecting(announced=announced))
    assert outcome.satisfied and outcome.last is CONVERGED and outcome.polls == 2
    assert clock.sleeps == [2, 5, 5]
    assert announced == [("server closed the connection", 1, 5), ("refused", 2, 5)]
    assert outcome.interruptions == (Interruption(lost_at=2, error="server closed the connection", attempts=2),)


def test_the_first_poll_may_lose_its_connection_too():
    clock = FakeClock()
    outcome = wait_until(script(Lost("admin shutdown"), CONVERGED), PREDICATES["converged"], 60, 2, clock=clock,
                         sleep=clock.sleep, reconnect=reconnecting())
    assert outcome.satisfied and outcome.interruptions == (Interruption(0, "admin shutdown", 1),)


def test_it_gives_up_after_its_attempts_with_the_first_and_the_last_error_and_the_last_state():
    clock = FakeClock()
    with pytest.raises(ReconnectGaveUp) as gave_up:
        wait_until(script(NOT_YET, Lost("terminated"), Lost("refused")), PREDICATES["converged"], 600, 2,
                   clock=clock, sleep=clock.sleep, reconnect=reconnecting(attempts=3))
    assert clock.sleeps == [2, 5, 5, 5], "three reconnection attempts, then no more"
    assert (gave_up.value.interruption, gave_up.value.last_error) == (Interruption(2, "terminated", 3), "refused")
    assert gave_up.value.last is NOT_YET and gave_up.value.polls == 1 and gave_up.value.elapsed == 17
    assert gave_up.value.deadline_reached is False


def test_reconnecting_never_runs_past_the_deadline():
    clock = FakeClock()
    with pytest.raises(ReconnectGaveUp) as gave_up:
        wait_until(script(NOT_YET, Lost("refused")), PREDICATES["converged"], 8, 2, clock=clock, sleep=clock.sleep,
                   reconnect=reconnecting(attempts=24))
    assert clock.sleeps == [2, 5, 1] and gave_up.value.deadline_reached is True
    assert gave_up.value.interruption.attempts == 2


def test_other_failures_end_the_wait_at_once():
    clock = FakeClock()
    with pytest.raises(ValueError):
        wait_until(script(NOT_YET, ValueError("lock timeout")), PREDICATES["converged"], 60, 2, clock=clock,
                   sleep=clock.sleep, reconnect=reconnecting())
    assert clock.sleeps == [2]
