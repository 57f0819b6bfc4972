# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Advice on a read's queues (``advise: true``): watch their load for a window, and put the rule's verdicts in.

The rule is rule.py's (pure), its words words.py's; the window is load_window.py's. The
shard_advice event source calls ``advise_queues`` window after window.
"""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.module_utils.advice import gains, load_window, rule, words
from ansible_collections.awa.operations.plugins.module_utils.info.result import Advice, ShardsInfo, ShardsRead


def advise_queues(conn, info: ShardsRead, seconds: float, lock_timeout: float,
                  measured: dict | None = None) -> dict[str, Advice]:
    """Watch the load on the queues of ``info`` for ``seconds`` and advise a shard count for each.

    Returns queue -> advice (words.advise); ``measured`` defaults to the shipped gains table.
    """
    views = info["queues"]
    physical = [name for view in views.values() for name in view["physical_queues"]]
    window = load_window.watch(conn, physical, seconds, lock_timeout)
    table = measured or gains.MEASURED
    advised = {}
    for name, view in views.items():
        shards = max(view["enqueue_shards"].values(), default=1)
        advised[name] = words.advise(rule.queue_load(name, view["physical_queues"], shards, window),
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
