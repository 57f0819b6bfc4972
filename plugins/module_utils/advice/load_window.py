# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Watch the load on queues for a window: lane cursors at both ends, and what the backends wait on.

Round trips do not grow with the lanes: one statement for the lock keys of
every lane of the queues, one for every lane's cursors at each end of the
window, and one per sample (every ``interval`` seconds) of pg_stat_activity
joined to the lock each backend waits for (the reads are in introspect/load.py).
Each read is its own READ ONLY transaction, because PostgreSQL keeps one
statistics snapshot per transaction: a sample in a new transaction sees the
backends as they are now.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ansible_collections.awa.operations.plugins.module_utils.advice import contention, load
from ansible_collections.awa.operations.plugins.module_utils.db.connection import transaction
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.installation import fetch_queue_storage_schema

SAMPLE_INTERVAL = 0.025


@dataclass(frozen=True)
class LoadWindow:
    """What one window of ``seconds`` saw."""

    seconds: float
    tally: contention.ContentionTally
    cursors_before: load.Cursors
    cursors_after: load.Cursors


def watch(conn, queues: list[str], seconds: float, lock_timeout: float, interval: float = SAMPLE_INTERVAL) -> LoadWindow:
    """Sample the backends every ``interval`` seconds for ``seconds``, between two reads of the lanes' cursors."""
    def read(action: str, reader):
        with transaction(conn, action, lock_timeout=lock_timeout, read_only=True):
            return reader()

    # The info module's read has checked that queue storage is active: this names its schema.
    schema = read("reading the queue storage schema", lambda: fetch_queue_storage_schema(conn))
    # Reading a lane's cursors locks its sequences until the transaction ends: the reads are short transactions.
    lane_keys = read("reading the lane lock keys", lambda: load.fetch_lane_keys(conn, schema, queues))
    before = read("reading the lane cursors", lambda: load.fetch_cursors(conn, schema, queues))
    started = time.monotonic()
    tally, next_at = contention.ContentionTally(), started
    while time.monotonic() - started < seconds:
        rows = read("sampling pg_stat_activity", lambda: load.fetch_activity_sample(conn))
        tally.add([contention.classify(row, lane_keys) for row in rows])
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    after = read("reading the lane cursors", lambda: load.fetch_cursors(conn, schema, queues))
    return LoadWindow(round(time.monotonic() - started, 3), tally, before, after)
