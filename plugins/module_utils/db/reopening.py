# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A connection opened again after it was lost: the session of a read-only wait that may outlive its server."""

from __future__ import annotations

from collections.abc import Callable


class Reopening:
    """A connection that is opened again (``reopen``) after it was lost, for read-only work - a wait - that may
    outlive the server it started on. ``close`` closes the connections it opened; the first is the caller's.
    Without ``reopen``, a lost connection stays lost."""

    def __init__(self, conn, reopen: Callable[[], object] | None) -> None:
        self._first = conn
        self._conn = conn
        self._reopen = reopen

    @property
    def reopens(self) -> bool:
        """Whether a lost connection is opened again."""
        return self._reopen is not None

    def current(self):
        """The connection, opened again when the last one was lost (raises ``ServerUnreachable`` when it cannot be)."""
        if self._conn.closed and self._reopen is not None:
            self._conn = self._reopen()
        return self._conn

    def lost(self) -> None:
        """The connection was lost (the server ended the session): the next ``current()`` opens another."""
        self._conn.close()

    def close(self) -> None:
        if self._conn is not self._first:
            self._conn.close()
