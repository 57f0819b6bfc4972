# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long a drain takes: the rate jobs leave a queue's lanes, and the time left at that rate.

A lowering leaves ready jobs on the shards at and above the new count; they
drain as workers claim them. Two kinds of reading give a rate:

* before the change (the role's preflight), how fast workers claim the
  queue's jobs at all, from each lane's claim cursor (its enqueue cursor less
  its sequence lag) at two reads. The old shards drain no faster than that
  while the new ones take jobs too, so a backlog that needs longer than the
  drain timeout even at that rate cannot drain in time;
* during a wait until drained, how fast the depth beyond the count falls over
  the last polls (``DrainHistory``), and the time left at that rate.

Sequences have gaps (an aborted reservation spends a value), so a rate read
from cursors is a little high: an estimate from it errs short.
"""

from __future__ import annotations

import datetime
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.info.result import QueueView, StateRead

# Polls the drain's rate is measured over: long enough to smooth a poll's noise, short enough to follow a change.
RATE_POLLS = 10


def seconds_text(seconds: float) -> str:
    """``45s``, ``12 min``, ``2 h 5 min``: a duration as an operator reads it."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def _claim_cursors(view: QueueView) -> dict[tuple[str, int, int], int] | None:
    """Each lane's claim cursor (the next claim sequence value), or None when a lane's sequences are unreadable."""
    cursors = {}
    for lane in view.get("lanes", []):
        if lane["enqueue_cursor"] is None or lane["seq_lag"] is None:
            return None
        cursors[(lane["queue"], lane["priority"], lane["shard"])] = lane["enqueue_cursor"] - lane["seq_lag"]
    return cursors


def claim_rate(before: QueueView, before_at: str, after: QueueView, after_at: str) -> float | None:
    """Jobs of the queue claimed per second between two reads (their ``read_at``, the database's clock); None when
    a lane's sequences cannot be read or the reads are not apart."""
    first, last = _claim_cursors(before), _claim_cursors(after)
    seconds = (datetime.datetime.fromisoformat(after_at) - datetime.datetime.fromisoformat(before_at)).total_seconds()
    if first is None or last is None or seconds <= 0:
        return None
    # A lane created between the reads starts at 1.
    return sum(cursor - first.get(lane, 1) for lane, cursor in last.items()) / seconds


class DrainHistory:
    """The depth beyond the count of each queue, poll after poll: how fast it falls, and the time left at that
    rate (the progress line of a wait until drained)."""

    def __init__(self) -> None:
        self._depths: dict[str, deque[tuple[float, int]]] = {}

    def add(self, read: StateRead, elapsed: float) -> None:
        """One poll's read, ``elapsed`` seconds into the wait."""
        for name, view in read["queues"].items():
            depth = view.get("depth_beyond_count")
            if depth is None:
                # Unknown now: a rate across the gap would mean nothing.
                self._depths.pop(name, None)
                continue
            self._depths.setdefault(name, deque(maxlen=RATE_POLLS)).append((elapsed, depth))

    def time_left(self, elapsed: float, timeout: float) -> str:
        """The time left at the rate the slowest queue's depth falls, against what the timeout leaves ("" when
        nothing is left to drain, or before two polls)."""
        pending = {name: depths for name, depths in self._depths.items() if depths[-1][1] > 0}
        estimates = []
        for name, depths in pending.items():
            (first_at, first), (last_at, last) = depths[0], depths[-1]
            if last_at <= first_at:
                return ""
            rate = (first - last) / (last_at - first_at)
            if rate <= 0:
                return f"{name}: not falling over the last {seconds_text(last_at - first_at)}, no time left to estimate"
            estimates.append((last / rate, name, rate))
        if not estimates:
            return ""
        left, name, rate = max(estimates)
        which = f"{name}, the slowest, falls" if len(estimates) > 1 else "falling"
        text = f"about {seconds_text(left)} left ({which} {rate:.1f} jobs/s)"
        remaining = max(timeout - elapsed, 0)
        return text + (f", more than the {seconds_text(remaining)} the timeout leaves" if left > remaining else "")
