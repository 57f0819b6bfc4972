# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Opening a lost connection again: how often, how long, and what a failure says (the wait's session is tested with
the wait, tests/unit/plugins/module_utils/info/wait/test_polls.py)."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.db.reconnect import reconnect_with_retries
from ansible_collections.awa.operations.plugins.module_utils.errors import ConnectionFailed


class Unreachable:
    """A reconnect that fails every time, and the sleeps between attempts."""

    def __init__(self) -> None:
        self.calls = 0
        self.slept: list[float] = []

    def __call__(self):
        self.calls += 1
        raise ConnectionFailed(f"could not connect to database 'app' on db1:5432 as 'awa_migrator': refused #{self.calls}")


def test_reconnecting_for_the_next_queue_of_a_list_retries_then_names_the_attempts():
    reconnect = Unreachable()
    with pytest.raises(ConnectionFailed, match=r"refused #6 \(6 attempts within 15\.5 s\)$"):
        reconnect_with_retries(reconnect, sleep=reconnect.slept.append)
    sentinel = object()
    failures = iter([ConnectionFailed("refused"), None])

    def flaky():
        failure = next(failures)
        if failure:
            raise failure
        return sentinel
    assert reconnect_with_retries(flaky, sleep=lambda seconds: None) is sentinel
