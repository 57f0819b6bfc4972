# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The session of a read that may outlive its server: a wait, the read after a change, the advice after a wait."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection


class ReadSession:
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
