# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which shard advice becomes an Event-Driven Ansible event, and the event source's options. Pure.

The event source ``awa.operations.shard_advice`` watches the load on queues
window after window, with the info module's advice rule. A verdict becomes an
event only through ``AdviceGate``, so that a rulebook acting on events cannot
flap a queue's shard count:

* only ``raise`` and ``lower`` are actionable;
* the same verdict on the same current count must hold for ``stable``
  windows in a row (one busy or quiet window is not a trend);
* an event moves one step: a raise at most doubles the count, a lower at
  most halves it, so 1 -> 8 takes three changes, each confirmed afresh under
  the new count; the event carries the rule's own target as ``advised_to``;
* after a change of a queue's count, that queue gets none for ``cooldown``
  seconds, and none in the opposite direction for twice that. A change is
  the source's own event or a change recorded in the change ledger (by the
  source's rulebook or by hand with the module, the role or the playbook),
  which the window's read returns as ``last_change``; so the cooldown
  survives a restart of the source and sees changes it did not ask for.
  Times are the database's clock (the read's ``read_at``, the ledger's
  ``changed_at``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.db.options import (
    DEFAULT_LOCK_TIMEOUT,
    MAX_LOCK_TIMEOUT,
    connection_argument_spec,
    connection_defaults,
)
from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import MAX_SHARDS, validate_queue_name
from ansible_collections.awa.operations.plugins.module_utils.info.options import DEFAULT_ADVISE_WINDOW, validate_advice_options
from ansible_collections.awa.operations.plugins.module_utils.advice.result import Advice
from ansible_collections.awa.operations.plugins.module_utils.info.result import QueueView, StateRead

ACTIONABLE = ("raise", "lower")
EVENT_KEY = "awa_shard_advice"
ERROR_KEY = "awa_shard_advice_error"

# The source's arguments and their defaults.
SOURCE_DEFAULTS: dict[str, object] = {
    "connection": {},
    "queues": None,  # None: every queue
    "window": DEFAULT_ADVISE_WINDOW,
    "interval": 300.0,
    "stable": 3,
    "cooldown": 3600.0,
    "gains": None,
    "lock_timeout": DEFAULT_LOCK_TIMEOUT,
    "every_window": False,
}


@dataclass(frozen=True)
class SourceOptions:
    """The event source's arguments, checked."""

    connection: dict[str, Any]
    queues: list[str] | None
    window: float
    interval: float
    stable: int
    cooldown: float
    gains: dict[str, Any] | None
    lock_timeout: float
    every_window: bool


def _seconds(name: str, value: object, low: float, high: float) -> float:
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not low <= seconds <= high:
        raise InvalidRequest(f"{name} must be a number of seconds between {low:g} and {high:g}, got {value!r}")
    return seconds


def connection_options(given: object) -> dict[str, Any]:
    """``connection``: the modules' connection options by name (as the role's enqueue_shards_connection).

    What is not given takes the modules' defaults, libpq's environment first (PGUSER, PGPORT, ...), as in the modules.
    """
    spec = connection_argument_spec()
    if not isinstance(given, Mapping):
        raise InvalidRequest(f"connection must be a mapping of the modules' connection options (login_host, "
                             f"login_user, login_password, login_db, ...), got {type(given).__name__}")
    unknown = sorted(set(given) - set(spec))
    if unknown:
        raise InvalidRequest(f"unknown connection option(s) {', '.join(unknown)}; the options are "
                             f"{', '.join(sorted(spec))}")
    return {**connection_defaults(), **given}


def source_options(args: Mapping[str, Any]) -> SourceOptions:
    """The rulebook's ``args`` as options, or InvalidRequest naming the unknown ones or the first bad value."""
    unknown = sorted(set(args) - set(SOURCE_DEFAULTS))
    if unknown:
        raise InvalidRequest(f"unknown argument(s) {', '.join(unknown)} of awa.operations.shard_advice; it takes "
                             f"{', '.join(sorted(SOURCE_DEFAULTS))}")
    given = {**SOURCE_DEFAULTS, **args}
    queues = given["queues"]
    if queues is not None:
        if isinstance(queues, str) or not isinstance(queues, list) or not queues:
            raise InvalidRequest(f"queues must be a non-empty list of queue names (or left out for every queue), "
                                 f"got {queues!r}")
        for name in queues:
            validate_queue_name(name)
    stable = given["stable"]
    if isinstance(stable, bool) or not isinstance(stable, int) or not 1 <= stable <= 1000:
        raise InvalidRequest(f"stable must be a whole number of windows between 1 and 1000, got {stable!r}")
    if not isinstance(given["every_window"], bool):
        raise InvalidRequest(f"every_window must be true or false, got {given['every_window']!r}")
    window = _seconds("window", given["window"], 1, 600)
    interval = _seconds("interval", given["interval"], window, 86400)
    cooldown = _seconds("cooldown", given["cooldown"], 0, 30 * 86400)
    lock_timeout = _seconds("lock_timeout", given["lock_timeout"], 0, MAX_LOCK_TIMEOUT)
    validate_advice_options(True, window, given["gains"], "none")
    return SourceOptions(connection=connection_options(given["connection"]), queues=queues, window=window,
                         interval=interval, stable=stable, cooldown=cooldown, gains=given["gains"],
                         lock_timeout=lock_timeout, every_window=given["every_window"])


def one_step(verdict: str, shards: int, advised_to: int) -> int:
    """The count an event moves to: toward the advised one, at most double (raise) or half (lower) the current."""
    if verdict == "raise":
        return min(advised_to, shards * 2, MAX_SHARDS)
    return max(advised_to, math.ceil(shards / 2), 1)


@dataclass(frozen=True)
class Move:
    """A change of a queue's count: when (seconds since the epoch, database clock) and which way."""

    at: float
    verdict: str  # raise or lower


def database_time(iso: str) -> float:
    """An ISO 8601 time of the database (read_at, changed_at) as seconds since the epoch."""
    return datetime.fromisoformat(iso).timestamp()


def recorded_move(queue_view: QueueView | None) -> Move | None:
    """The latest change of the queue's count in the change ledger (over its physical queues), from the info
    read's ``last_change``; None when none is recorded (or the read has no such queue)."""
    changes = list(queue_view["last_change"].values()) if queue_view else []
    if not changes:
        return None
    latest = max(changes, key=lambda change: (database_time(change["changed_at"]), change["id"]))
    # No queue_meta row before the change: Awa's default count, 1.
    before = latest["from_shards"] if latest["from_shards"] is not None else 1
    return Move(database_time(latest["changed_at"]), "raise" if latest["to_shards"] > before else "lower")


@dataclass
class _QueueHistory:
    streak_of: tuple[str, int] | None = None  # (verdict, current count) of the windows in a row
    streak: int = 0
    emitted: Move | None = None  # the source's own last event


@dataclass
class AdviceGate:
    """Turns one queue's advice per window into an event, or into nothing (see the module docstring)."""

    stable: int
    cooldown: float
    history: dict[str, _QueueHistory] = field(default_factory=dict)

    def hold_until(self, queue: str, verdict: str, recorded: Move | None = None) -> float | None:
        """When ``verdict`` may next become an event for ``queue``, after its last event and its last ``recorded``
        change (None: neither, any time)."""
        past = self.history.get(queue)
        moves = [move for move in (past.emitted if past else None, recorded) if move is not None]
        return max((move.at + self.cooldown * (1 if move.verdict == verdict else 2) for move in moves), default=None)

    def admit(self, queue: str, advice: Advice, now: float, recorded: Move | None = None) -> dict[str, Any] | None:
        """The event for this window's advice of ``queue``, if it passes; None otherwise."""
        past = self.history.setdefault(queue, _QueueHistory())
        verdict, shards = advice["verdict"], advice["shards"]
        if verdict not in ACTIONABLE:
            past.streak_of, past.streak = None, 0
            return None
        if past.streak_of == (verdict, shards):
            past.streak += 1
        else:
            past.streak_of, past.streak = (verdict, shards), 1
        hold = self.hold_until(queue, verdict, recorded)
        if past.streak < self.stable or (hold is not None and now < hold):
            return None
        past.streak_of, past.streak = None, 0
        past.emitted = Move(now, verdict)
        return advice_event(queue, advice, actionable=True, windows=self.stable)


def advice_event(queue: str, advice: Advice, *, actionable: bool, windows: int) -> dict[str, Any]:
    """The event: the advice, with ``to`` one step toward the rule's own target (``advised_to``)."""
    verdict, shards = advice["verdict"], advice["shards"]
    to = one_step(verdict, shards, advice["to"]) if verdict in ACTIONABLE else advice["to"]
    return {EVENT_KEY: {
        "queue": queue, "verdict": verdict, "shards": shards, "to": to, "advised_to": advice["to"],
        "actionable": actionable, "windows": windows, "limit": advice["limit"], "message": advice["message"],
        "ordering": advice["ordering"], "findings": advice["findings"], "evidence": advice["evidence"],
    }}


def events_for_window(gate: AdviceGate, info: StateRead, advised: dict[str, Advice], every_window: bool) -> list[dict[str, Any]]:
    """The events of one window: what the gate admits, and with ``every_window`` the rest as not actionable.

    ``info`` is the window's read (read_shards_info): its ``read_at`` is now, and
    each queue's ``last_change`` its last recorded change.
    """
    now = database_time(info["read_at"])
    events = []
    for queue, advice in advised.items():
        event = gate.admit(queue, advice, now, recorded_move(info["queues"].get(queue)))
        if event is None and every_window:
            event = advice_event(queue, advice, actionable=False, windows=1)
        if event is not None:
            events.append(event)
    return events


def error_event(message: str, retry_in: float) -> dict[str, Any]:
    """A window that could not be read: the reason, and when the source tries again."""
    return {ERROR_KEY: {"message": message, "retry_in_seconds": retry_in}}
