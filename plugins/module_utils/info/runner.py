# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The info modules' run: a read of the queues, or a wait, then the advice on them when asked (``advise: true``).

``read`` is what awa_enqueue_shards_info and the role's internal read run.
The advice watches the queues' load for a window and puts the rule's
verdicts in: the advice package's (the rule and its words are rule.py's,
pure, the window load_window.py's), below this one. The
shard_advice event source calls ``advise_queues`` window after window.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ansible_collections.awa.operations.plugins.module_utils.advice import gains, load_window, rule
from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection
from ansible_collections.awa.operations.plugins.module_utils.info.wait.session import ReadSession
from ansible_collections.awa.operations.plugins.module_utils.info.wait.failover import validate_committed
from ansible_collections.awa.operations.plugins.module_utils.info.options import (
    validate_advice_options,
    validate_lanes_option,
    validate_read_options,
    with_rollout_defaults,
)
from ansible_collections.awa.operations.plugins.module_utils.advice.result import Advice
from ansible_collections.awa.operations.plugins.module_utils.errors import FailedWithState
from ansible_collections.awa.operations.plugins.module_utils.info.result import ShardsInfo, ShardsRead
from ansible_collections.awa.operations.plugins.module_utils.info.views import shown
from ansible_collections.awa.operations.plugins.module_utils.info.wait.polls import wait_in_session

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection
    from ansible_collections.awa.operations.plugins.module_utils.db.options import Module


def advise_queues(conn: Connection, info: ShardsRead, seconds: float, lock_timeout: float,
                  measured: dict[str, Any] | None = None) -> dict[str, Advice]:
    """Watch the load on the queues of ``info`` for ``seconds`` and advise a shard count for each.

    Returns queue -> advice (rule.advise); ``measured`` defaults to the shipped gains table.
    """
    views = info["queues"]
    physical = [name for view in views.values() for name in view["physical_queues"]]
    window = load_window.watch(conn, physical, seconds, lock_timeout)
    table = measured or gains.MEASURED
    advised = {}
    for name, view in views.items():
        shards = max(view["enqueue_shards"].values(), default=1)
        advised[name] = rule.advise(rule.queue_load(name, view["physical_queues"], shards, window),
                                    window.tally, table)
    return advised


def add_advice(info: ShardsInfo, advised: dict[str, Advice]) -> None:
    """Put the advice into a read's result: ``advice``, its lines in the summary, its findings among the findings."""
    info["advice"] = advised
    lines = [f"advice: {view['message']} {view['ordering']}" for view in advised.values()]
    info["summary_lines"] = info["summary_lines"] + lines
    info["summary"] = "\n".join(info["summary_lines"])
    info["findings"] = list(dict.fromkeys(info["findings"] + [finding for view in advised.values()
                                                              for finding in view["findings"]]))


def read(module: Module) -> tuple[ShardsInfo, list[str]]:
    """The run: one read of the queues, or a wait; then their health and advice when asked. The result, or a failed
    wait's, as the module returns it (views.shown: the whole of it with ``detail``)."""
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
        session = ReadSession(conn, lambda: connect(params))
        try:
            info = wait_in_session(
                session, params["wait"], params["wait_timeout"], params["wait_sleep"], committed=committed,
                queue=params["queue"], queues=params["queues"], stripes=params["stripes"],
                runtime_roles=tuple(params["runtime_roles"]), ledger_schema=params["ledger_schema"],
                margin_seconds=params["clock_margin"], known_runtimes=tuple(params["known_runtimes"]),
                expected_new_runtimes=params["expected_new_runtimes"], lock_timeout=params["lock_timeout"],
                health=params["health"], lanes=params["lanes"], restarted_services=params["restarted_services"],
                window_services=params["window_services"])
            if params["advise"]:
                add_advice(info, advise_queues(session.current(), info, params["advise_window"],
                                               params["lock_timeout"], params["advise_gains"]))
        except FailedWithState as failed:
            failed.result = shown(failed.result, detail=params["detail"])
            raise
        finally:
            session.close()
    return shown(info, detail=params["detail"]), info["warnings"]
