# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The info module's health: readings per physical queue summed per logical queue (the SQL runs in functional tests)."""

from __future__ import annotations

import datetime

from ansible_collections.awa.operations.plugins.module_utils.info.health import queue_health

AT = datetime.datetime(2026, 11, 30, 16, 38, 2, tzinfo=datetime.timezone.utc)
COUNTS = {"events#0": (1, 2), "events#1": (0, 3), "orders": (4, 0)}


def info(*views: tuple[str, list[str]]) -> dict:
    return {"queues": {name: {"physical_queues": physical} for name, physical in views}}


def test_a_striped_queue_sums_its_stripes_since_the_earliest_of_their_changes():
    since = {"events#0": AT, "events#1": AT + datetime.timedelta(seconds=1), "orders": AT, "never": None}
    queues = queue_health(info(("events", ["events#0", "events#1"]), ("orders", ["orders"]), ("never", ["never"])),
                          COUNTS, since)
    assert queues == {"events": {"since": AT.isoformat(), "failed_jobs": 1, "retried_jobs": 5},
                      "orders": {"since": AT.isoformat(), "failed_jobs": 4, "retried_jobs": 0},
                      "never": {"since": None, "failed_jobs": None, "retried_jobs": None}}
