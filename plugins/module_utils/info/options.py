# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The info modules' options: their argument spec, their defaults, and the rules the spec cannot express.

Two modules take them. ``awa.operations.awa_enqueue_shards_info`` is public:
its options (``argument_spec()``) are a promise to users, documented by the
doc fragment ``awa.operations.shards_info``. The role's internal read,
``awa.operations.__role.enqueue_shards_rollout_info``, takes the same options
and the state the rollout carries from one task to the next
(``ROLLOUT_OPTIONS``: the runtimes seen before a batch's restarts, the
services it restarted and how many other new runtimes it counts, the
window's producer services, a pause before the read) and the wait
``restarted`` (``argument_spec(rollout=True)``). The
action plugins, the role's input check and the shard_advice event source check
the same values with these functions before anything connects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.db.options import (
    DEFAULT_LOCK_TIMEOUT, DEFAULT_SCHEMA, connection_argument_spec, validate_lock_timeout)
from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.info.convergence import DEFAULT_MARGIN_SECONDS
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import validate_queue_name

DEFAULT_WAIT_TIMEOUT = 300.0
DEFAULT_WAIT_SLEEP = 2.0
DEFAULT_ADVISE_WINDOW = 10.0
GAINS_PATHS = ("insert", "copy", "copy_keyed")


def validate_read_options(timeout: float, sleep: float, lock_timeout: float, delay: float = 0.0) -> None:
    """The info module's numeric options (wait_timeout, wait_sleep, lock_timeout, delay), checked before anything
    waits or connects."""
    validate_lock_timeout(lock_timeout)
    for name, value, low, high in (("wait_timeout", timeout, 0, 86400), ("wait_sleep", sleep, 0.1, 3600),
                                   ("delay", delay, 0, 86400)):
        if not low <= value <= high:
            raise InvalidRequest(f"{name} must be between {low} and {high} seconds, got {value}")


def validate_advice_options(advise: bool, window: float, gains: dict[str, Any] | None, wait: str) -> None:
    """advise, advise_window and advise_gains, checked before connecting."""
    if advise and wait != "none":
        raise InvalidRequest(f"advise watches the load and wait watches a change: give advise or wait={wait}, not "
                             "both (run them as two tasks)")
    if not 1 <= window <= 600:
        raise InvalidRequest(f"advise_window must be between 1 and 600 seconds, got {window}")
    if gains is None:
        return
    table = gains.get("gains")
    shape = "advise_gains must be a gains table as benchmarks/shard_gains.py prints it: {'gains': {PATH: {N: {S: gain}}}}"
    if not isinstance(table, dict) or not table:
        raise InvalidRequest(f"{shape}; it has no 'gains'")
    for path, rows in table.items():
        if path not in GAINS_PATHS or not isinstance(rows, dict):
            raise InvalidRequest(f"{shape}; PATH is insert, copy or copy_keyed, got {path!r}")
        for producers, row in rows.items():
            try:
                valid = int(producers) >= 1 and isinstance(row, dict) and row and all(
                    int(shards) >= 1 and float(gain) > 0 for shards, gain in row.items())
            except (TypeError, ValueError):
                valid = False
            if not valid:
                raise InvalidRequest(f"{shape}; {path} row {producers!r} is not a mapping of shard counts to "
                                     f"positive gains: {row!r}")


def selected_queues(queue: str | None, queues: list[str] | None, stripes: int | None) -> tuple[str, ...] | None:
    """The logical queues a read covers: ``(queue,)``, ``queues`` (once each), or None for every queue.

    An empty list of queues selects none (only the runtimes are read).
    """
    if queue is not None and queues:
        raise InvalidRequest("give queue or queues, not both")
    selected = (queue,) if queue is not None else tuple(dict.fromkeys(queues)) if queues is not None else None
    for name in selected or ():
        validate_queue_name(name)
    if stripes is not None and (selected is None or len(selected) != 1):
        raise InvalidRequest("stripes applies to one queue: set queue too (stripes are detected for every queue)")
    return selected


# One queue, a list of queues, or neither (every queue). The action plugins validate with the same spec and rules.
ARGUMENT_RULES = {"mutually_exclusive": [("queue", "queues")]}

# What a read may wait for (info/wait.py's PREDICATES). The wait between the batches of a rolling restart,
# for the new runtimes ROLLOUT_OPTIONS name, is the role's alone.
WAIT_CHOICES = ("none", "converged", "drained", "restarted")
ROLLOUT_WAIT = "restarted"

# A producer service's current process, as its host reported it (service_runtimes.ServiceProcess).
SERVICE_PROCESS: dict[str, dict[str, Any]] = {
    # Without suboptions: an identity without a hostname key (its environment unread) means any host name.
    "reports_as": {"type": "list", "elements": "dict", "default": []},
    "started_at": {"type": "float"},
}

# The rollout's state, carried from one of the role's tasks to the next; the internal read's options only.
ROLLOUT_OPTIONS: dict[str, dict[str, Any]] = {
    "known_runtimes": {"type": "list", "elements": "str", "default": []},
    "restarted_services": {"type": "list", "elements": "dict", "default": [], "options": {
        **SERVICE_PROCESS, "runtimes": {"type": "int", "default": 1}}},
    "expected_new_runtimes": {"type": "int", "default": 0},
    "window_services": {"type": "list", "elements": "dict", "default": [], "options": {
        **SERVICE_PROCESS, "concerned": {"type": "bool", "default": True}}},
    "delay": {"type": "float", "default": 0.0},
}


def argument_spec(*, rollout: bool = False) -> dict[str, Any]:
    """The public module's options, connection options included; with ``rollout``, the role's internal read's."""
    waits = [choice for choice in WAIT_CHOICES if rollout or choice != ROLLOUT_WAIT]
    return {**connection_argument_spec(), **dict(
        queue={"type": "str"},
        queues={"type": "list", "elements": "str"},
        stripes={"type": "int"},
        runtime_roles={"type": "list", "elements": "str", "default": []},
        wait={"type": "str", "default": "none", "choices": waits},
        wait_timeout={"type": "float", "default": DEFAULT_WAIT_TIMEOUT},
        wait_sleep={"type": "float", "default": DEFAULT_WAIT_SLEEP},
        clock_margin={"type": "float", "default": DEFAULT_MARGIN_SECONDS},
        ledger_schema={"type": "str", "default": DEFAULT_SCHEMA},
        lock_timeout={"type": "float", "default": DEFAULT_LOCK_TIMEOUT},
        advise={"type": "bool", "default": False},
        advise_window={"type": "float", "default": DEFAULT_ADVISE_WINDOW},
        advise_gains={"type": "dict"},
        committed={"type": "dict"},
        health={"type": "bool", "default": False},
        lanes={"type": "bool", "default": True},
        detail={"type": "bool", "default": False},
    ), **{name: dict(option) for name, option in ROLLOUT_OPTIONS.items() if rollout}}


def validated(params: Mapping[str, Any]) -> dict[str, Any]:
    """The options of either module, the rollout's defaulted where it has none, once their values are checked
    together (raises ``InvalidRequest``); the modules and their action plugins check them alike."""
    params = {**{name: option["default"] for name, option in ROLLOUT_OPTIONS.items()}, **params}
    validate_read_options(params["wait_timeout"], params["wait_sleep"], params["lock_timeout"], params["delay"])
    validate_advice_options(params["advise"], params["advise_window"], params["advise_gains"], params["wait"])
    # lanes: false reads no depths, so nothing can be waited on that needs them (drained).
    if not params["lanes"] and params["wait"] == "drained":
        raise InvalidRequest("wait=drained waits for the ready jobs on the old shards, and lanes=false reads no lane "
                             "depths: leave lanes at true (the default) to wait until drained, or wait until converged")
    return params
