# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The advice as results carry it, declared once: what ``rule`` builds, and the info module's result (its
``advice``), its action plugin and the shard_advice event source read.

As info/result.py, of which it is a part: TypedDicts (PEP 589), held against
the info module's RETURN documentation and live results by
tests/unit/plugins/module_utils/info/test_result.py.
"""

from __future__ import annotations

from typing import TypedDict


class MeasuredRow(TypedDict):
    """The row of the gains table a verdict was judged by: producers, and shard count -> measured gain."""

    producers: int
    gains: dict[str, float]


class AdviceEvidence(TypedDict):
    """What one window of load showed, as the advice used it."""

    window_seconds: float
    samples: int
    enqueued_per_s: float
    claimed_per_s: float
    enqueued_by_shard: dict[str, int]
    busiest_shard_share: float | None
    lag_growth: int | None
    lane_lock_waiters: float
    notify_lock_waiters: float
    wal_waiters: float
    enqueuers_on_cpu_share: float
    concurrent_enqueuers: int
    path: str
    measured_row: MeasuredRow | None
    hidden_backend_samples: int


class Advice(TypedDict):
    """A shard count advised for one logical queue (``advise: true``)."""

    verdict: str  # raise, keep, lower or will_not_help
    shards: int
    to: int
    limit: str | None
    message: str
    ordering: str
    evidence: AdviceEvidence
    findings: list[str]
