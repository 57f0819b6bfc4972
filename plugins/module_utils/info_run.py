# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The info modules' run: a read of the queues, or a wait, then the advice on them when asked (``advise: true``).

``run`` is what awa_enqueue_shards_info and the role's internal read run; it
stands above the two packages it composes, info/ (the read and the wait) and
advice/ (the rule and its words are rule.py's, pure, the window
load_window.py's). The action plugins check the options as it does
(options.validated) before they poll the module; the shard_advice event source calls
``advise_queues`` window after window.
"""

from __future__ import annotations

import time
from contextlib import closing
from typing import TYPE_CHECKING, Any

from ansible_collections.awa.operations.plugins.module_utils.advice import gains, load_window, rule
from ansible_collections.awa.operations.plugins.module_utils.advice.result import Advice
from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection
from ansible_collections.awa.operations.plugins.module_utils.errors import FailedWithState
from ansible_collections.awa.operations.plugins.module_utils.info import options, wait
from ansible_collections.awa.operations.plugins.module_utils.info.result import ShardsInfo, ShardsRead
from ansible_collections.awa.operations.plugins.module_utils.info.views import shown

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection
    from ansible_collections.awa.operations.plugins.module_utils.db.options import Module


def advise_queues(conn: Connection, info: ShardsRead, seconds: float, lock_timeout: float,
                  measured: dict[str, Any] | None = None) -> dict[str, Advice]:
    """Watch the load on the queues of ``info`` for ``seconds`` and advise a shard count for each.

    Returns queue -> advice (rule.advise); ``measured`` defaults to the shipped gains table.
    """
    views = info["queues"]
    window = load_window.watch(conn, [name for view in views.values() for name in view["physical_queues"]], seconds,
                               lock_timeout)
    return {name: rule.advise(rule.queue_load(name, view["physical_queues"],
                                              max(view["enqueue_shards"].values(), default=1), window),
                              window.tally, measured or gains.MEASURED) for name, view in views.items()}


def add_advice(info: ShardsInfo, advised: dict[str, Advice]) -> None:
    """Put the advice into a read's result: ``advice``, its lines in the summary, its findings among the findings."""
    info["advice"] = advised
    info["summary_lines"] = info["summary_lines"] + [f"advice: {view['message']} {view['ordering']}"
                                                     for view in advised.values()]
    info["summary"] = "\n".join(info["summary_lines"])
    info["findings"] = list(dict.fromkeys(info["findings"] + [finding for view in advised.values()
                                                              for finding in view["findings"]]))


def run(module: Module) -> tuple[ShardsInfo, list[str]]:
    """The run: one read of the queues, or a wait; then their health and advice when asked. The result, or a failed
    wait's, as the module returns it (views.shown: the whole of it with ``detail``)."""
    params = options.validated(module.params)
    committed = wait.validate_committed(params["committed"])
    # The action plugin waits out the delay itself and passes none; the module waits it out under async.
    time.sleep(params["delay"])
    # After a wait that reconnected (a failover), advice reads on the connection it ended on.
    with open_connection(params) as conn, closing(wait.ReadSession(conn, lambda: connect(params))) as session:
        try:
            # The read's options that read_shards_info takes by the same name, and the one it names otherwise.
            info = wait.wait_in_session(
                session, params["wait"], params["wait_timeout"], params["wait_sleep"], committed=committed,
                margin_seconds=params["clock_margin"], **{name: params[name] for name in (
                    "queue", "queues", "stripes", "runtime_roles", "known_runtimes", "ledger_schema",
                    "expected_new_runtimes", "lock_timeout", "health", "lanes", "restarted_services", "window_services")})
            if params["advise"]:
                add_advice(info, advise_queues(session.current(), info, params["advise_window"],
                                               params["lock_timeout"], params["advise_gains"]))
        except FailedWithState as failed:
            failed.result = shown(failed.result, detail=params["detail"])
            raise
    return shown(info, detail=params["detail"]), info["warnings"]
