# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The info module's option values, refused before anything connects, each with what to do."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.info.options import (
    argument_spec,
    selected_queues,
    validate_advice_options,
    validate_read_options,
    validated,
)


@pytest.mark.parametrize("gains", [{}, {"gains": {"bulk": {}}}, {"gains": {"insert": {"4": {"2": 0}}}},
                                   {"gains": {"insert": {"x": {"2": 1.5}}}}, {"gains": {"insert": {"4": {}}}}])
def test_a_gains_table_of_the_wrong_shape_is_refused_before_connecting(gains):
    with pytest.raises(InvalidRequest, match="advise_gains must be a gains table"):
        validate_advice_options(True, 10, gains, "none")


def test_advice_and_a_wait_are_two_tasks_and_the_window_is_bounded():
    with pytest.raises(InvalidRequest, match="give advise or wait=drained, not both"):
        validate_advice_options(True, 10, None, "drained")
    with pytest.raises(InvalidRequest, match="advise_window must be between 1 and 600 seconds, got 0.5"):
        validate_advice_options(True, 0.5, None, "none")
    validate_advice_options(True, 10, {"gains": {"insert": {"8": {"1": 1.0, "4": 2.75}}}}, "none")


@pytest.mark.parametrize("timeout, sleep, lock_timeout, delay, message", [
    (-1, 2, 5, 0, "wait_timeout must be between 0 and 86400 seconds, got -1"),
    (300, 0.05, 5, 0, "wait_sleep must be between 0.1 and 3600 seconds, got 0.05"),
    (300, 2, -1, 0, "lock_timeout must be between 0 and 3600 seconds, got -1"),
    (300, 2, 5, -1, "delay must be between 0 and 86400 seconds, got -1"),
])
def test_wait_bounds_and_lock_timeout_are_refused_out_of_range(timeout, sleep, lock_timeout, delay, message):
    with pytest.raises(InvalidRequest, match=message):
        validate_read_options(timeout, sleep, lock_timeout, delay)


def test_a_read_covers_one_queue_several_once_each_none_or_every_queue():
    assert selected_queues("orders", None, 2) == ("orders",)
    assert selected_queues(None, ["a", "b", "a"], None) == ("a", "b")
    assert selected_queues(None, [], None) == ()
    assert selected_queues(None, None, None) is None
    with pytest.raises(InvalidRequest, match="give queue or queues, not both"):
        selected_queues("a", ["b"], None)
    with pytest.raises(InvalidRequest, match="stripes applies to one queue: set queue too"):
        selected_queues(None, ["a", "b"], 2)


def options(**given) -> dict:
    """The public module's options at their defaults, with ``given``."""
    return {**{name: option.get("default") for name, option in argument_spec().items()}, **given}


def test_the_options_are_checked_with_the_rollouts_defaulted():
    checked = validated(options(queue="orders"))
    assert (checked["queue"], checked["known_runtimes"], checked["delay"]) == ("orders", [], 0.0)
    with pytest.raises(InvalidRequest, match="wait_sleep must be between"):
        validated(options(wait_sleep=0))
    with pytest.raises(InvalidRequest, match="give advise or wait=converged, not both"):
        validated(options(advise=True, wait="converged"))


@pytest.mark.parametrize("wait", ["none", "converged", "restarted"])
def test_a_read_without_lanes_serves_every_wait_that_needs_no_depth(wait):
    validated(options(lanes=False, wait=wait))


def test_a_wait_until_drained_needs_the_lanes_and_says_so():
    validated(options(wait="drained"))
    with pytest.raises(InvalidRequest, match="wait=drained waits for the ready jobs on the old shards, and "
                                             "lanes=false reads no lane depths"):
        validated(options(lanes=False, wait="drained"))
