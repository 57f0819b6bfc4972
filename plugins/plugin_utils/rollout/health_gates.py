# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health gates between the batches of a rolling restart: readings, limits, and which gate stops it.

Each reading comes from the info module's ``health`` (its read layer,
module_utils/info/health.py): deadlocks on the database since the read
before the change (the counter is cumulative: the role subtracts the
preflight reading, or counts from a statistics reset in between), and the
jobs of the changed queues that failed or were retried since their change.
A limit of None never stops a rollout (the default); a reading above its
limit stops it, and the stop names the gate, the reading and the limit.
"""

from __future__ import annotations

from typing import Any

GATES = (
    ("deadlocks", "deadlocks on the database since the change", "enqueue_shards_max_deadlocks"),
    ("failed_jobs", "jobs of the changed queues that failed since the change", "enqueue_shards_max_failed_jobs"),
    ("retried_jobs", "jobs of the changed queues retried since the change (still in flight)",
     "enqueue_shards_max_retried_jobs"),
)


def _reading(gate: str, health: dict[str, Any] | None, baseline: dict[str, Any] | None,
             queues: list[str]) -> tuple[int | None, str]:
    """A gate's reading and its note; the reading is None when it cannot be told."""
    if not health:
        return None, "not read"
    if gate == "deadlocks":
        if not baseline or "deadlocks" not in baseline:
            return None, "no reading before the change"
        if health.get("stats_reset") != baseline.get("stats_reset"):
            return health["deadlocks"], "counted from the statistics reset at " + str(health.get("stats_reset"))
        return max(0, health["deadlocks"] - baseline["deadlocks"]), ""
    values = [health.get("queues", {}).get(queue, {}).get(gate) for queue in queues]
    if any(value is None for value in values):
        return None, "no recorded change to count from"
    return sum(values), ""


def evaluate(health: dict[str, Any] | None, *, baseline: dict[str, Any] | None, queues: list[str], limits: dict[str, Any]) -> dict[str, Any]:
    """The gates' ``readings`` as one line of ``text`` and the gates ``crossed`` (each a whole sentence)."""
    parts, crossed, readings = [], [], {}
    for gate, label, variable in GATES:
        value, note = readings[gate] = _reading(gate, health, baseline, queues)
        limit = limits.get(gate)
        shown = "unknown" if value is None else str(value)
        parts.append(f"{gate.replace('_', ' ')} {shown}" + (f" (limit {limit})" if limit is not None else "")
                     + (f" ({note})" if note else ""))
        if value is not None and limit is not None and value > limit:
            crossed.append(f"health gate {gate}: {value} {label}, over the limit of {limit} ({variable})")
    return {"readings": {gate: value for gate, (value, dummy) in readings.items()},
            "text": "; ".join(parts), "crossed": crossed}
