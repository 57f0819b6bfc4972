# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wait loop, driven by a fake clock and a scripted fetch (no real sleeping)."""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.module_utils.waiters import PREDICATES, wait_until


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
