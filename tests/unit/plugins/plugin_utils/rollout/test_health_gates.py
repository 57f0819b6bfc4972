# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health gates: readings from the info module's health, limits that stop a rollout."""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.health_gates import evaluate

NO_LIMITS = {"deadlocks": None, "failed_jobs": None, "retried_jobs": None}


def health(deadlocks: int, failed: int | None = 0, retried: int | None = 0, reset: str | None = None) -> dict:
    return {"deadlocks": deadlocks, "stats_reset": reset,
            "queues": {"demo": {"since": "2026-11-30T16:55:37+00:00", "failed_jobs": failed, "retried_jobs": retried}}}


def test_default_limits_never_stop_and_the_readings_are_shown():
    gates = evaluate(health(7, 2, 3), baseline=health(4), queues=["demo"], limits=NO_LIMITS)
    assert gates["crossed"] == []
    assert gates["readings"] == {"deadlocks": 3, "failed_jobs": 2, "retried_jobs": 3}
    assert gates["text"] == "deadlocks 3; failed jobs 2; retried jobs 3"


def test_each_gate_over_its_limit_is_named_with_reading_and_limit():
    gates = evaluate(health(7, 2, 3), baseline=health(4), queues=["demo"],
                     limits={"deadlocks": 0, "failed_jobs": 2, "retried_jobs": 1})
    assert gates["crossed"] == [
        "health gate deadlocks: 3 deadlocks on the database since the change, over the limit of 0 "
        "(enqueue_shards_max_deadlocks)",
        "health gate retried_jobs: 3 jobs of the changed queues retried since the change (still in flight), over the "
        "limit of 1 (enqueue_shards_max_retried_jobs)"]
    assert "deadlocks 3 (limit 0)" in gates["text"] and "failed jobs 2 (limit 2)" in gates["text"]


def test_a_statistics_reset_counts_from_the_reset_and_unknown_readings_never_stop():
    reset = evaluate(health(2, reset="2026-11-30T17:00:00+00:00"), baseline=health(40), queues=["demo"],
                     limits={"deadlocks": 1})
    assert reset["readings"]["deadlocks"] == 2 and len(reset["crossed"]) == 1
    assert "counted from the statistics reset at 2026-11-30T17:00:00+00:00" in reset["text"]
    unknown = evaluate(health(5, failed=None), baseline=None, queues=["demo"],
                       limits={"deadlocks": 0, "failed_jobs": 0, "retried_jobs": None})
    assert unknown["crossed"] == [] and unknown["readings"]["deadlocks"] is None
    assert evaluate(None, baseline=None, queues=["demo"], limits={"deadlocks": 0})["text"].startswith("deadlocks unknown")
