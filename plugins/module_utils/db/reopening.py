# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A connection opened again after it was lost: a few attempts with a short backoff (a change whose COMMIT lost
its connection, the next queue of a list after it, the read after the change), and the session of a read-only wait
that may outlive its server."""

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


class Reopening:
    """A connection that is opened again (``reopen``) after it was lost, for read-only work - a wait - that may
    outlive the server it started on. ``close`` closes the connections it opened; the first is the caller's.
    Without ``reopen``, a lost connection stays lost."""

    def __init__(self, conn: Connection, reopen: Callable[[], Connection] | None) -> None:
        self._first = conn
        self._conn = conn
        self._reopen = reopen
        self._told = False  # lost() was called for the connection that is closed now

    @property
    def reopens(self) -> bool:
        """Whether a lost connection is opened again."""
        return self._reopen is not None

    def ended_untold(self) -> bool:
        """The session ended without a read failing: psycopg closed it after the last read (the rollback that ends
        a read's transaction met the server gone), and nobody called ``lost()``. A wait must still count that loss -
        the next ``current()`` would otherwise reconnect without a word."""
        return self.reopens and self._conn.closed and not self._told

    def current(self) -> Connection:
        """The connection, opened again when the last one was lost (raises ``ServerUnreachable`` when it cannot be)."""
        if self._conn.closed and self._reopen is not None:
            self._conn = self._reopen()
            self._told = False
        return self._conn

    def lost(self) -> None:
        """The connection was lost (the server ended the session): the next ``current()`` opens another."""
        self._told = True
        self._conn.close()

    def close(self) -> None:
        if self._conn is not self._first:
            self._conn.close()
