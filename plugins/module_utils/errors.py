# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one exception family of awa.operations.

module_utils raise these; a module's ``main()`` turns them into ``fail_json``.
Every message names what was asked, what was found and what to do next, and
never contains a password or a full connection string.
"""

from __future__ import annotations

from collections.abc import Mapping


class AwaOperationsError(Exception):
    """Base class. ``details`` is extra, JSON-safe context for the result."""

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidRequest(AwaOperationsError):
    """The request itself is wrong (a bad option value). Nothing was read or written."""


class PreconditionFailed(AwaOperationsError):
    """The database is not in a state the operation can safely act on. Nothing was written."""


class UnknownQueue(PreconditionFailed):
    """A queue the database has never seen, asked for without ``new_queue`` (a typo, most likely). Nothing was
    written."""


class ConnectionFailed(AwaOperationsError):
    """Could not connect, authenticate or switch role."""


class Disconnected(AwaOperationsError):
    """No server could be reached, or the session ended: a later attempt may succeed (a failover, a restart)."""


class ServerUnreachable(ConnectionFailed, Disconnected):
    """No server of ``login_host`` accepted the connection (refused, down, or not the kind asked for)."""


class LockTimeout(AwaOperationsError):
    """A lock was not granted within ``lock_timeout``; the transaction was rolled back."""


class DatabaseError(AwaOperationsError):
    """A statement failed; the transaction was rolled back."""


class CommitLost(DatabaseError):
    """The connection was lost while COMMIT was in flight: whether it committed is not known yet."""


class CommitNotApplied(DatabaseError):
    """A lost COMMIT was looked up after reconnecting: it did not commit, nothing was written."""


class CommitOutcomeUnknown(DatabaseError):
    """A lost COMMIT could not be looked up (the database stayed unreachable, or cannot tell)."""


class ConnectionLost(DatabaseError, Disconnected):
    """The session ended in the middle of a transaction, which did not commit."""


class FailedWithState(AwaOperationsError):
    """A read or wait that failed after seeing the state: ``result`` carries the last state it saw."""

    def __init__(self, message: str, result: Mapping[str, object]) -> None:
        super().__init__(message)
        # A copy: the module hands its warnings to Ansible and fails with the rest.
        self.result: dict[str, object] = dict(result)


class WaitTimeout(FailedWithState):
    """A wait ran out of time. ``result`` carries the last observed state."""


class WaitInterrupted(FailedWithState):
    """A wait lost its connection and could not reconnect within its attempts."""


class ChangeNotFound(FailedWithState):
    """The server read does not hold what a change committed (a failover to a standby that lacked it)."""
