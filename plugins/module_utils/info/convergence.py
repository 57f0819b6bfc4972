# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Has a shard-count change taken effect, and have the old shards drained? Pure functions.

Awa 0.6 runtimes cache the count per process and publish no shard count
(docs/awa-internals.md §2, §5), so a runtime runs with the current count when:

* its snapshot reports a count for the queue (no released Awa does yet; a
  future one may): the report decides; otherwise
* it is a new process since the recorded change: its instance id is not one
  of those live when the change committed (the ledger records them), and it
  started no earlier than ``margin`` before the change. ``started_at`` comes
  from the runtime host's clock, the change time from the database's; the
  margin absorbs the skew between them.

Only live runtimes count (Awa's own staleness rule, evaluated by the database).
Drained means: converged, and no ready job left on any shard >= the count.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    # For annotations only: the rule imports no database driver (the role's filters judge with it on the controller).
    from ansible_collections.awa.operations.plugins.module_utils.schema.runtimes import Runtime
    from ansible_collections.awa.operations.plugins.module_utils.schema.ledger import RecordedChange
    from ansible_collections.awa.operations.plugins.module_utils.info.result import ShardView

DEFAULT_MARGIN_SECONDS = 5.0

# The one verdict code a reader tests (views.py: the count was changed outside the module).
CHANGED_OUTSIDE_MODULE = "changed_outside_module"


@dataclass(frozen=True)
class Verdict:
    """Whether a runtime runs with the current count, and why: ``code`` for code to test (reported_by_snapshot,
    no_recorded_change, changed_outside_module, running_at_change, started_before_change, started_after_change),
    ``reason`` for people (it may be reworded)."""

    converged: bool
    code: str
    reason: str


def judge(runtime: Runtime, physical_queue: str, current_shards: int, change: RecordedChange | None,
          margin_seconds: float = DEFAULT_MARGIN_SECONDS) -> Verdict:
    """Does ``runtime`` run with ``current_shards`` for ``physical_queue``?"""
    reported = runtime.reported_shards.get(physical_queue)
    if reported is not None:
        return Verdict(reported == current_shards, "reported_by_snapshot",
                       f"its snapshot reports enqueue_shards={reported}")
    if change is None:
        return Verdict(True, "no_recorded_change", "no recorded change of this queue")
    if change.to_shards != current_shards:
        return Verdict(False, CHANGED_OUTSIDE_MODULE, f"enqueue_shards is {current_shards} but the last recorded "
                       f"change set {change.to_shards}: it was changed outside awa_enqueue_shards")
    if runtime.instance_id in change.live_runtime_ids:
        return Verdict(False, "running_at_change",
                       f"it was already running when the count changed (change #{change.id})")
    if runtime.started_at < change.changed_at - datetime.timedelta(seconds=margin_seconds):
        return Verdict(False, "started_before_change", f"it started before the change #{change.id} (its clock says "
                       f"{runtime.started_at.isoformat()}, the change was {change.changed_at.isoformat()})")
    return Verdict(True, "started_after_change", "it started after the change")


@dataclass(frozen=True)
class Straggler:
    runtime: Runtime
    physical_queue: str
    verdict: Verdict


@dataclass(frozen=True)
class QueueConvergence:
    live: int
    converged: int
    stragglers: list[Straggler]

    @property
    def complete(self) -> bool:
        return self.converged == self.live


def queue_convergence(runtimes: list[Runtime], current: dict[str, int], changes: dict[str, RecordedChange],
                      margin_seconds: float = DEFAULT_MARGIN_SECONDS) -> QueueConvergence:
    """N of M live runtimes run with the current count of every physical queue in ``current``."""
    live = [runtime for runtime in runtimes if runtime.live]
    # Per live runtime, the physical queues it does not run with the current count of.
    pending = [[Straggler(runtime, queue, verdict) for queue, shards in sorted(current.items())
                for verdict in [judge(runtime, queue, shards, changes.get(queue), margin_seconds)]
                if not verdict.converged] for runtime in live]
    return QueueConvergence(live=len(live), converged=pending.count([]),
                            stragglers=[straggler for each in pending for straggler in each])


def ready_beyond(lanes: Sequence[ShardView], shards: int | None = None) -> int | None:
    """Ready jobs on the lanes (or shards) at or above ``shards`` (without it: at or above their own count); None
    when such a lane could not be read."""
    depths = [lane["ready_depth"] for lane in lanes
              if (lane["beyond_count"] if shards is None else lane["shard"] >= shards)]
    return None if None in depths else sum(depth or 0 for depth in depths)
