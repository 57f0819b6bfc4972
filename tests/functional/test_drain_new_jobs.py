"""A drain wait that new jobs keep reaching: the old shards are named, not taken for drained.

Awa 0.6 worker runtimes cache a queue's count for promoting scheduled and
retried jobs (docs/awa-internals.md §6.3): a runtime that was not restarted
after a lowering - left out of the wait as untouched, or outside the
inventory - keeps promoting onto the shards at and above the new count. Here
the maintenance leader works another queue and promotes queue promo's
scheduled jobs with the count it cached, 4, after promo is lowered to 2. On
PostgreSQL 17 and 18.
"""

from __future__ import annotations

import pytest

from awa_testbed.environment import wait_for_live_runtimes
from awa_testbed.waiting import wait_until

from ansible_collections.awa.operations.plugins.module_utils.errors import WaitTimeout

from enqueue_shards_support import change, info


def cursors_beyond(db, queue: str, shards: int) -> dict[int, int]:
    """The enqueue cursors of the queue's lanes on shards >= ``shards`` that have received jobs."""
    lanes = info(db, queue=queue)["queues"][queue]["lanes"]
    return {lane["shard"]: lane["enqueue_cursor"] for lane in lanes
            if lane["shard"] >= shards and (lane["enqueue_cursor"] or 0) > 1}


def test_a_drain_wait_names_the_old_shards_a_stale_runtime_still_promotes_into(awa_db, fleet):
    change(awa_db, "promo", 4)
    leader = fleet.worker("leader", ["other"])
    wait_for_live_runtimes(awa_db, [leader.pid], 30)
    fleet.producer("scheduler", "promo", rate=5, scheduled_every=1)  # every job due 1-3 s ahead
    # The leader promotes them with the count it holds: once some reach shards 2 and 3, it holds 4.
    wait_until(lambda: len(cursors_beyond(awa_db, "promo", 2)) == 2, 60, "promoted jobs on promo's shards 2 and 3")
    change(awa_db, "promo", 2)
    # The leader's service, as a rollout hands it to the waits: one the change does not concern.
    untouched = {"reports_as": [{"pid": leader.pid}], "started_at": None, "concerned": False}

    with pytest.raises(WaitTimeout) as timed_out:
        info(awa_db, queue="promo", wait="drained", timeout=8, window_services=[untouched])

    view = timed_out.value.result["queues"]["promo"]
    assert view["converged"] and not view["drained"]
    assert view["new_jobs_beyond_count"] and {entry["shard"] for entry in view["new_jobs_beyond_count"]} <= {2, 3}
    assert ("promo: new jobs keep arriving at or above the count during the wait (promo shard(s) "
            in timed_out.value.message)
    assert "a producer that was not restarted still enqueues with the old count" in timed_out.value.message
