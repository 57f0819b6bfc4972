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

from collections.abc import Mapping
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.db.options import DEFAULT_LOCK_TIMEOUT, MAX_LOCK_TIMEOUT
from ansible_collections.awa.operations.plugins.module_utils.db.options import connection_defaults
from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import MAX_SHARDS, validate_queue_name
from ansible_collections.awa.operations.plugins.module_utils.info.options import DEFAULT_ADVISE_WINDOW, validate_advice_options
from ansible_collections.awa.operations.plugins.module_utils.advice.result import Advice
from ansible_collections.awa.operations.plugins.module_utils.info.result import QueueView, StateRead

EVENT_KEY = "awa_shard_advice"
ERROR_KEY = "awa_shard_advice_error"


@dataclass(frozen=True)
class SourceOptions:
    """The event source's arguments, checked; their defaults are the source's (SOURCE_DEFAULTS)."""

    # The modules' connection options by name (as the role's enqueue_shards_connection); what is not given takes the
    # modules' defaults, libpq's environment first (PGUSER, PGPORT, ...), as in the modules.
    connection: dict[str, Any] = field(default_factory=dict)
    queues: list[str] | None = None  # None: every queue
    window: float = DEFAULT_ADVISE_WINDOW
    interval: float = 300.0
    stable: int = 3
    cooldown: float = 3600.0
    gains: dict[str, Any] | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    every_window: bool = False


# The source's arguments and their defaults.
SOURCE_DEFAULTS = asdict(SourceOptions())


def _seconds(name: str, value: Any, low: float, high: float) -> float:
    with suppress(TypeError, ValueError):
        if not isinstance(value, bool) and low <= float(value) <= high:
            return float(value)
    raise InvalidRequest(f"{name} must be a number of seconds between {low:g} and {high:g}, got {value!r}")


def source_options(args: Mapping[str, Any]) -> SourceOptions:
    """The rulebook's ``args`` as options, or InvalidRequest naming the unknown ones or the first bad value."""
    if unknown := sorted(set(args) - set(SOURCE_DEFAULTS)):
        raise InvalidRequest(f"unknown argument(s) {', '.join(unknown)} of "
                             f"awa.operations.shard_advice; it takes {', '.join(sorted(SOURCE_DEFAULTS))}")
    given = {**SOURCE_DEFAULTS, **args}
    queues, stable, connection = given["queues"], given["stable"], given["connection"]
    if queues is not None and (not isinstance(queues, list) or not queues):
        raise InvalidRequest(f"queues must be a non-empty list of queue names (or left out for every queue), "
                             f"got {queues!r}")
    for name in queues or ():
        validate_queue_name(name)
    if isinstance(stable, bool) or not isinstance(stable, int) or not 1 <= stable <= 1000:
        raise InvalidRequest(f"stable must be a whole number of windows between 1 and 1000, got {stable!r}")
    if not isinstance(given["every_window"], bool):
        raise InvalidRequest(f"every_window must be true or false, got {given['every_window']!r}")
    window = _seconds("window", given["window"], 1, 600)
    validate_advice_options(True, window, given["gains"], "none")
    if not isinstance(connection, Mapping):
        raise InvalidRequest(f"connection must be a mapping of the modules' connection options (login_host, "
                             f"login_user, login_password, login_db, ...), got {type(connection).__name__}")
    defaults = connection_defaults()
    if unknown := sorted(set(connection) - set(defaults)):
        raise InvalidRequest(f"unknown connection option(s) {', '.join(unknown)}; "
                             f"the options are {', '.join(sorted(defaults))}")
    bounds = {"interval": (window, 86400), "cooldown": (0, 30 * 86400), "lock_timeout": (0, MAX_LOCK_TIMEOUT)}
    return SourceOptions(**{**given, "connection": {**defaults, **connection}, "window": window,
                            **{name: _seconds(name, given[name], *bound) for name, bound in bounds.items()}})


def database_time(iso: str) -> float:
    """An ISO 8601 time of the database (read_at, changed_at) as seconds since the epoch."""
    return datetime.fromisoformat(iso).timestamp()


# A change of a queue's count: when (seconds since the epoch, database clock) and which way (raise or lower).
Move = tuple[float, str]


def recorded_move(queue_view: QueueView | None) -> Move | None:
    """The latest change of the queue's count in the change ledger (over its physical queues), from the info
    read's ``last_change``; None when none is recorded (or the read has no such queue)."""
    changes = queue_view["last_change"].values() if queue_view else ()
    latest = max(changes, key=lambda change: (database_time(change["changed_at"]), change["id"]), default=None)
    # No queue_meta row before the change (from_shards None): Awa's default count, 1.
    return None if latest is None else (database_time(latest["changed_at"]),
                                        "raise" if latest["to_shards"] > (latest["from_shards"] or 1) else "lower")


@dataclass
class AdviceGate:
    """Turns one queue's advice per window into an event, or into nothing (see the module docstring)."""

    stable: int
    cooldown: float
    # queue -> (verdict, current count, windows in a row) of the actionable windows in a row.
    streaks: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    # queue -> the source's own last event.
    emitted: dict[str, Move] = field(default_factory=dict)

    def admit(self, queue: str, advice: Advice, now: float, recorded: Move | None = None) -> dict[str, Any] | None:
        """The event for this window's advice of ``queue``, if it passes; None otherwise. A move (its last event,
        its last ``recorded`` change) holds the same verdict for ``cooldown``, the opposite one for twice that."""
        verdict, shards = advice["verdict"], advice["shards"]
        last = self.streaks.pop(queue, None)
        if verdict not in ("raise", "lower"):  # keep and will_not_help are not actionable
            return None
        streak = last[2] + 1 if last and last[:2] == (verdict, shards) else 1
        moves = [move for move in (self.emitted.get(queue), recorded) if move is not None]
        if streak < self.stable or any(now < at + self.cooldown * (1 if way == verdict else 2) for at, way in moves):
            self.streaks[queue] = (verdict, shards, streak)
            return None
        self.emitted[queue] = (now, verdict)
        return advice_event(queue, advice, actionable=True, windows=self.stable)


def advice_event(queue: str, advice: Advice, *, actionable: bool, windows: int) -> dict[str, Any]:
    """The event: the advice, with ``to`` one step toward the rule's own target (``advised_to``): at most double
    (raise) or half (lower) the current count."""
    shards, advised_to = advice["shards"], advice["to"]
    step = {"raise": min(advised_to, shards * 2, MAX_SHARDS), "lower": max(advised_to, (shards + 1) // 2, 1)}
    return {EVENT_KEY: {"queue": queue, **advice, "to": step.get(advice["verdict"], advised_to),
                        "advised_to": advised_to, "actionable": actionable, "windows": windows}}


def events_for_window(gate: AdviceGate, info: StateRead, advised: dict[str, Advice], every_window: bool) -> list[dict[str, Any]]:
    """The events of one window: what the gate admits, and with ``every_window`` the rest as not actionable.

    ``info`` is the window's read (read_shards_info): its ``read_at`` is now, and
    each queue's ``last_change`` its last recorded change.
    """
    admitted = {queue: gate.admit(queue, advice, database_time(info["read_at"]),
                                  recorded_move(info["queues"].get(queue))) for queue, advice in advised.items()}
    return [event or advice_event(queue, advised[queue], actionable=False, windows=1)
            for queue, event in admitted.items() if event or every_window]


def error_event(message: str, retry_in: float) -> dict[str, Any]:
    """A window that could not be read: the reason, and when the source tries again."""
    return {ERROR_KEY: {"message": message, "retry_in_seconds": retry_in}}
