"""A session that holds a queue's lane reservation locks most of the time, so its enqueuers queue on them.

Contention that happens by itself needs enqueuers that overlap on a lane,
and a starved CPU makes that rare: beside other work, 16 inserters once put
fewer than 0.5 of themselves in the lock queue per sample for two minutes.
The advice tests are about what the advice makes of lane-lock waits, not
about whether this machine can produce them, so the holder makes the waits
happen whatever the CPU does: it takes the lock ``reserve_enqueue_seq``
takes on every lane of the queue (keys read by the collection's own
``fetch_lane_keys``), keeps them for ``hold`` seconds, commits, lets ``gap``
seconds pass, and starts again. Every SQL insert into the queue in that
time waits on its lane's lock, exactly as it would behind a slow enqueuer.
The Rust producers' insert locks are left alone: the change module takes
those, and the holder must never stand in a change's way.
"""

from __future__ import annotations

import threading

import psycopg

from ansible_collections.awa.operations.plugins.module_utils.advice.load_window import RESERVATION, fetch_lane_keys

# Not an enqueue statement to the advice's classifier (load_window.STATEMENT_KINDS): the holder is not an enqueuer.
LOCK_SQL = "SELECT count(pg_advisory_xact_lock(k)) FROM unnest(%s::int8[]) AS k"


def advisory_key(classid: int, objid: int) -> int:
    """The bigint advisory key pg_locks shows as (classid, objid)."""
    unsigned = classid << 32 | objid
    return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned


class LaneHolder:
    """Holds every lane reservation lock of ``queue`` for ``hold`` of every ``hold + gap`` seconds, until stopped."""

    def __init__(self, dsn: str, queue: str, schema: str = "awa", hold: float = 0.25, gap: float = 0.05) -> None:
        self.dsn, self.queue, self.schema, self.hold, self.gap = dsn, queue, schema, hold, gap
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lane holder {queue}", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> "LaneHolder":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=30)
        if self._thread.is_alive():
            # Still in a transaction that may hold the queue's lane locks: every later insert would wait on it.
            raise RuntimeError(f"the lane holder of {self.queue} did not stop within 30 s")
        if self.error is not None:
            raise RuntimeError(f"the lane holder of {self.queue} failed") from self.error

    def _run(self) -> None:
        try:
            with psycopg.connect(self.dsn, application_name="testbed lane holder") as conn:
                while not self._stopped.is_set():
                    with conn.transaction():
                        # Read each time: a lane appears with the first job of its priority.
                        keys = [advisory_key(*key) for key, (kind, _lane) in
                                fetch_lane_keys(conn, self.schema, [self.queue]).items() if kind == RESERVATION]
                        conn.execute(LOCK_SQL, (keys,))
                        self._stopped.wait(self.hold)
                    self._stopped.wait(self.gap)
        except BaseException as exc:  # pylint: disable=broad-except  # reported by stop()
            self.error = exc
