"""The one way the test bed and the tests wait: poll what they wait for, until a deadline.

A wait synchronises on the event itself (a row, a file, a log line, a process
gone), read again every ``interval`` seconds; the deadline only bounds how long
a broken run takes to say what it waited for. Nothing here sleeps a fixed time
and hopes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(fetch: Callable[[], T], done: Callable[[T], object], timeout: float,
         interval: float = 0.1) -> tuple[bool, T]:
    """``fetch()`` until ``done`` holds for what it returned, or ``timeout`` seconds passed (0: once).

    Returns whether it held and the last value fetched, for waits whose caller
    reports (or uses) the state as it stood at the deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if done(value):
            return True, value
        if time.monotonic() >= deadline:
            return False, value
        time.sleep(interval)


def wait_until(condition: Callable[[], T], timeout: float, what: str | Callable[[], str],
               interval: float = 0.1, error: type[Exception] = AssertionError) -> T:
    """Poll ``condition`` until it returns something truthy, and return that.

    At the deadline, raise ``error`` naming ``what`` (a callable is called then,
    for a message that shows the state at that moment, such as a program's log).
    ``condition`` may itself raise, to stop the wait early (a process that died).
    """
    satisfied, value = poll(condition, bool, timeout, interval)
    if not satisfied:
        described = what() if callable(what) else what
        raise error(f"timed out after {timeout:g}s waiting for {described}")
    return value
