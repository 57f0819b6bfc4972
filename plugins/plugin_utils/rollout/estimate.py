# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long a change window will take, said before it runs: an estimate and its bounds.

From what the role knows: the batches (their count), the pauses, the
timeouts and - where an earlier window's record is at hand in the report
directory - how long its batches and the rest of it took. At least the
pauses; at most the timeouts and pauses, with an allowance a batch for its
restarts and checks (a restart command has no timeout of its own) and one for
the window's steps before and after them.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.info.drain_time import seconds_text
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import serial

# Until a window has been measured: a batch's restarts, wait and checks, and the steps before and after them.
BATCH_SECONDS, REST_SECONDS = 15.0, 30.0
# What the bounds allow beyond the timeouts: a batch's restarts and checks, and the steps before and after them.
BATCH_ALLOWANCE, REST_ALLOWANCE = 60.0, 120.0
# Past this many batches, the estimate says how many in so many words.
MANY_BATCHES = 100


def measured(report_dir: str) -> tuple[list[float], float | None]:
    """The batches' seconds and the rest of the window's, of the newest record in ``report_dir`` that has them."""
    for path in sorted(Path(report_dir).glob("enqueue_shards-*.json"), key=os.path.getmtime, reverse=True):
        # A record that cannot be read, or that lacks a figure, is passed over for the one before it.
        with suppress(OSError, ValueError, KeyError, TypeError):
            report = json.loads(path.read_text(encoding="utf-8"))
            batches = [float(batch["seconds"]) for batch in report.get("batches") or [] if "seconds" in batch]
            if batches:
                return batches, max(float(report["outcome"]["total_seconds"]) - sum(batches), 0.0)
    return [], None


def every_host_batches(hosts: list[dict[str, Any]], batch_size: Any) -> int:
    """How many batches restart every host with producer services (``hosts``: each host's settings) - what the
    estimate before the change counts."""
    return len(serial.split([host["host"] for host in hosts if host["services"]], batch_size))


def estimate(batches: int, timing: Mapping[str, Any], lowering: bool) -> dict[str, Any]:
    """The window's ``seconds``, its ``least`` and ``most``, and the ``line`` that says them (``timing``: the role's
    pauses, timeouts and report directory, rollout.state.RolloutSettings)."""
    pauses = 0.0 if batches < 2 else (
        float(timing["batch_pause"] if timing["canary_pause"] is None else timing["canary_pause"])
        + float(timing["batch_pause"]) * (batches - 2))
    batch_seconds, rest = measured(timing["report_dir"]) if timing["report_dir"] else ([], None)
    per_batch = statistics.median(batch_seconds) if batch_seconds else BATCH_SECONDS
    seconds = (REST_SECONDS if rest is None else rest) + batches * per_batch + pauses
    most = (batches * (float(timing["restart_timeout"]) + BATCH_ALLOWANCE) + pauses
            + float(timing["converge_timeout"]) + (float(timing["drain_timeout"]) if lowering else 0.0) + REST_ALLOWANCE)
    source = ", as the last window's record measured" if batch_seconds else " until a window's record has measured one"
    many = (f" - {batches} batches in a row: set enqueue_shards_batch_size to restart more hosts at once"
            if batches > MANY_BATCHES else "")
    return {"seconds": seconds, "least": pauses, "most": most, "line": (
        f"The window should take about {seconds_text(seconds)} ({batches} batch(es), {seconds_text(per_batch)} a "
        f"batch{source}){many}; at least {seconds_text(pauses)} (the pauses), at most {seconds_text(most)} (the "
        "timeouts and pauses, a minute a batch for its restarts and two for the rest)")}
