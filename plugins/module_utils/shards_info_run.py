# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run of awa_enqueue_shards_info, and of the rollout role's internal read: their options and their read.

Two modules run it. ``awa.operations.awa_enqueue_shards_info`` is public: its
options (``argument_spec()``) are a promise to users, documented by the doc
fragment ``awa.operations.shards_info``. The role's internal read,
``awa.operations.__role.enqueue_shards_rollout_info``, takes the same options
and the state the rollout carries from one task to the next
(``ROLLOUT_OPTIONS``: the runtimes seen before a batch's restarts, how many
new ones it waits for, the runtimes a change leaves untouched, a pause before
the read) and the wait ``restarted`` (``argument_spec(rollout=True)``). Both
run ``read``; the public module reads as the internal one does with those
options at their defaults.
"""

from __future__ import annotations

import time

from ansible_collections.awa.operations.plugins.module_utils import waiters
from ansible_collections.awa.operations.plugins.module_utils.connection import connect, open_connection
from ansible_collections.awa.operations.plugins.module_utils.connection_options import (
    DEFAULT_LOCK_TIMEOUT,
    connection_argument_spec,
)
from ansible_collections.awa.operations.plugins.module_utils.convergence import DEFAULT_MARGIN_SECONDS
from ansible_collections.awa.operations.plugins.module_utils.failover import validate_committed
from ansible_collections.awa.operations.plugins.module_utils.ledger import DEFAULT_SCHEMA
from ansible_collections.awa.operations.plugins.module_utils.reopening import Reopening
from ansible_collections.awa.operations.plugins.module_utils.shards_info_advice import add_advice, advise_queues
from ansible_collections.awa.operations.plugins.module_utils.shards_info_options import (
    DEFAULT_ADVISE_WINDOW,
    DEFAULT_WAIT_SLEEP,
    DEFAULT_WAIT_TIMEOUT,
    validate_advice_options,
    validate_lanes_option,
    validate_read_options,
)
from ansible_collections.awa.operations.plugins.module_utils.shards_info_wait import wait_in_session

# One queue, a list of queues, or neither (every queue). The action plugins validate with the same spec and rules.
ARGUMENT_RULES = {"mutually_exclusive": [("queue", "queues")]}

# The wait between the batches of a rolling restart, for the new runtimes ROLLOUT_OPTIONS name: the role's alone.
ROLLOUT_WAIT = "restarted"

# The rollout's state, carried from one of the role's tasks to the next; the internal read's options only.
ROLLOUT_OPTIONS: dict[str, dict] = {
    "known_runtimes": {"type": "list", "elements": "str", "default": []},
    "expected_new_runtimes": {"type": "int", "default": 0},
    "untouched_runtimes": {"type": "list", "elements": "str", "default": []},
    "delay": {"type": "float", "default": 0.0},
}


def argument_spec(*, rollout: bool = False) -> dict:
    """The public module's options, connection options included; with ``rollout``, the role's internal read's."""
    waits = [choice for choice in waiters.WAIT_CHOICES if rollout or choice != ROLLOUT_WAIT]
    spec = connection_argument_spec()
    spec.update(
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
    )
    if rollout:
        spec.update({name: dict(option) for name, option in ROLLOUT_OPTIONS.items()})
    return spec


def with_rollout_defaults(params: dict) -> dict:
    """``params`` of either module, with the rollout's options at their defaults where it has none."""
    defaults = {name: option["default"] for name, option in ROLLOUT_OPTIONS.items()}
    return {**defaults, **params}


def read(module) -> tuple[dict[str, object], list[str]]:
    """The run: one read of the queues, or a wait; then their health and advice when asked."""
    params = with_rollout_defaults(module.params)
    validate_read_options(params["wait_timeout"], params["wait_sleep"], params["lock_timeout"],
                          params["delay"])
    validate_advice_options(params["advise"], params["advise_window"], params["advise_gains"], params["wait"])
    validate_lanes_option(params["lanes"], params["wait"])
    committed = validate_committed(params["committed"])
    # The action plugin waits out the delay itself and passes none; the module waits it out under async.
    time.sleep(params["delay"])
    with open_connection(params) as conn:
        # After a wait that reconnected (a failover), advice reads on the connection it ended on.
        session = Reopening(conn, lambda: connect(params))
        try:
            info = wait_in_session(
                session, params["wait"], params["wait_timeout"], params["wait_sleep"], committed=committed,
                queue=params["queue"], queues=params["queues"], stripes=params["stripes"],
                runtime_roles=tuple(params["runtime_roles"]), ledger_schema=params["ledger_schema"],
                margin_seconds=params["clock_margin"], known_runtimes=tuple(params["known_runtimes"]),
                expected_new_runtimes=params["expected_new_runtimes"], lock_timeout=params["lock_timeout"],
                health=params["health"], lanes=params["lanes"],
                untouched_runtimes=tuple(params["untouched_runtimes"]))
            if params["advise"]:
                add_advice(info, advise_queues(session.current(), info, params["advise_window"],
                                               params["lock_timeout"], params["advise_gains"]))
        finally:
            session.close()
    return {key: value for key, value in info.items() if key != "warnings"}, info["warnings"]
