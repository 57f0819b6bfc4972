# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long a drain takes: the backlog beyond a count, the claim rate of two reads, the time left poll by poll."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.info import drain_time
from ansible_collections.awa.operations.plugins.module_utils.info.convergence import ready_beyond
from ansible_collections.awa.operations.plugins.module_utils.info.drain_time import (
    DrainHistory,
    claim_rate,
    seconds_text,
)


def lane(shard: int, depth: int | None, enqueued: int | None = 1, priority: int = 2) -> dict:
    """A lane whose enqueue cursor is ``enqueued`` with ``depth`` jobs not yet claimed (None: unreadable)."""
    return {"queue": "orders", "priority": priority, "shard": shard, "ready_depth": depth,
            "seq_lag": depth, "enqueue_cursor": None if depth is None else enqueued}


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (44.6, "45s"), (119, "119s"), (120, "2 min"),
                                           (1800, "30 min"), (7140, "119 min"), (7200, "2 h"), (7500, "2 h 5 min")])
def test_a_duration_reads_in_the_unit_an_operator_would_say(seconds, text):
    assert seconds_text(seconds) == text


def test_the_backlog_beyond_a_count_sums_the_lanes_at_and_above_it_and_is_unknown_if_one_is_unreadable():
    lanes = [lane(0, 5), lane(1, 7), lane(2, 11), lane(3, 13, priority=1), lane(3, 17)]
    assert ready_beyond(lanes, 2) == 41
    assert ready_beyond(lanes, 4) == 0
    assert ready_beyond(lanes, 0) == 53
    assert ready_beyond(lanes + [lane(2, None)], 2) is None
    assert ready_beyond(lanes + [lane(2, None)], 3) == 30


def test_the_claim_rate_is_the_claim_cursors_moved_between_two_reads_over_the_database_time_between_them():
    # Claim cursor = enqueue cursor - lag: lane 0 claims 100 -> 130, lane 1 claims 40 -> 50, lane 2 is new (from 1).
    before = {"lanes": [lane(0, 20, enqueued=120), lane(1, 0, enqueued=40)]}
    after = {"lanes": [lane(0, 10, enqueued=140), lane(1, 5, enqueued=55), lane(2, 0, enqueued=11)]}
    rate = claim_rate(before, "2026-12-05T10:00:00.000000+00:00", after, "2026-12-05T10:00:05.000000+00:00")
    assert rate == (30 + 10 + 10) / 5
    assert claim_rate(before, "2026-12-05T10:00:05+00:00", after, "2026-12-05T10:00:05+00:00") is None
    assert claim_rate(before, "2026-12-05T10:00:00+00:00", {"lanes": [lane(0, None)]},
                      "2026-12-05T10:00:05+00:00") is None


def poll(**depths) -> dict:
    return {"queues": {name: {"depth_beyond_count": depth} for name, depth in depths.items()}}


def test_the_time_left_follows_the_slowest_queue_over_the_last_polls_against_the_timeout(monkeypatch):
    monkeypatch.setattr(drain_time, "RATE_POLLS", 3)
    history = DrainHistory()
    history.add(poll(orders=400, mail=100), 0)
    assert history.time_left(0, 1800) == "", "one poll gives no rate"
    history.add(poll(orders=300, mail=90), 10)
    # orders: 10 jobs/s, 30 s left; mail: 1 job/s, 90 s left.
    assert history.time_left(10, 1800) == "about 90s left (mail, the slowest, falls 1.0 jobs/s)"
    history.add(poll(orders=0, mail=80), 20)
    assert history.time_left(20, 60) == "about 80s left (falling 1.0 jobs/s), more than the 40s the timeout leaves"
    # Only the last three polls count: mail fell 20 jobs in 20 s, then none in 20 s.
    history.add(poll(orders=0, mail=80), 30)
    history.add(poll(orders=0, mail=80), 40)
    assert history.time_left(40, 1800) == "mail: not falling over the last 20s, no time left to estimate"
    history.add(poll(orders=0, mail=0), 50)
    assert history.time_left(50, 1800) == ""


def test_a_depth_that_cannot_be_read_starts_its_queue_s_rate_again():
    history = DrainHistory()
    history.add(poll(orders=100), 0)
    history.add(poll(orders=None), 5)
    history.add(poll(orders=60), 10)
    assert history.time_left(10, 1800) == ""
    history.add(poll(orders=40), 15)
    assert history.time_left(15, 1800) == "about 10s left (falling 4.0 jobs/s)"
