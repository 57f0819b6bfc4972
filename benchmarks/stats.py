"""Small statistics over lists of numbers (no third-party packages)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile (``fraction`` in 0..1); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def summary(values: Sequence[float]) -> dict:
    """count, median, min and max of repeated measurements."""
    return {
        "n": len(values),
        "median": median(values),
        "min": min(values) if values else None,
        "max": max(values) if values else None,
    }


def latency_summary(values_ms: Sequence[float]) -> dict:
    """count, p50, p99 and max of latencies."""
    return {
        "calls": len(values_ms),
        "p50": percentile(values_ms, 0.50),
        "p99": percentile(values_ms, 0.99),
        "max": max(values_ms) if values_ms else None,
    }
