# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A connection opened again after it was lost: a few attempts with a short backoff (a change whose COMMIT lost
its connection, the next queue of a list after it, the read after the change). A read-only session that opens
its connection again is info/wait/session.py's."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ansible_collections.awa.operations.plugins.module_utils.errors import ConnectionFailed

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection

# Seconds to wait before each attempt after the first: six attempts within about 15 s, which outlasts a restart
# (benchmarks/lost_commit.py: a fast restart of a busy 2-core test machine answered after 3.5 to 7.5 s, once later).
RECONNECT_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)


def attempts(delays: tuple[float, ...] | None, sleep: Callable[[float], None]) -> Iterator[int]:
    """Attempt numbers 1..len(delays)+1, sleeping ``delays`` (RECONNECT_DELAYS when None) in between."""
    yield 1
    delays = RECONNECT_DELAYS if delays is None else delays
    for number, delay in enumerate(delays, start=2):
        sleep(delay)
        yield number


def reconnect_with_retries(reconnect: Callable[[], Connection], *, delays: tuple[float, ...] | None = None,
                           sleep: Callable[[float], None] = time.sleep) -> Connection:
    """A new connection from ``reconnect`` (a connect with the run's options), retried a few times."""
    failures: list[str] = []
    for dummy in attempts(delays, sleep):
        try:
            return reconnect()
        except ConnectionFailed as exc:
            failures.append(exc.message)
    raise ConnectionFailed(f"{failures[-1]} ({attempts_text(failures, delays)})")


def attempts_text(failures: list[str], delays: tuple[float, ...] | None) -> str:
    """How many attempts failed, and within how many seconds (``delays``, RECONNECT_DELAYS when None)."""
    return f"{len(failures)} attempts within {sum(RECONNECT_DELAYS if delays is None else delays):g} s"
