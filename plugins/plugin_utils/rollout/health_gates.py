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

# Each gate with what its reading counts; its limit is the variable enqueue_shards_max_<gate>.
GATES = {"deadlocks": "deadlocks on the database since the change",
         "failed_jobs": "jobs of the changed queues that failed since the change",
         "retried_jobs": "jobs of the changed queues retried since the change (still in flight)"}


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
    return (None, "no recorded change to count from") if None in values else (sum(values), "")


def evaluate(health: dict[str, Any] | None, *, baseline: dict[str, Any] | None, queues: list[str], limits: dict[str, Any]) -> dict[str, Any]:
    """The gates' ``readings`` as one line of ``text`` and the gates ``crossed`` (each a whole sentence)."""
    read = {gate: (*_reading(gate, health, baseline, queues), limits.get(gate)) for gate in GATES}
    return {"readings": {gate: value for gate, (value, dummy_note, dummy_limit) in read.items()},
            "text": "; ".join(f"{gate.replace('_', ' ')} {'unknown' if value is None else value}"
                              + ("" if limit is None else f" (limit {limit})") + (f" ({note})" if note else "")
                              for gate, (value, note, limit) in read.items()),
            "crossed": [f"health gate {gate}: {value} {GATES[gate]}, over the limit of {limit} "
                        f"(enqueue_shards_max_{gate})" for gate, (value, note, limit) in read.items()
                        if value is not None and limit is not None and value > limit]}
