"""awa_enqueue_shards against real Awa 0.6.9 (and older 0.6 schemas) on PostgreSQL 17 and 18.

Raise under load, re-run, lower, striped queues and check mode, with real
producers and worker runtimes. Refusals, privileges, concurrency and runs
through Ansible itself live in the sibling test_enqueue_shards_*.py files.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from psycopg import sql

from awa_testbed.awadb import AwaDatabase
from awa_testbed.environment import wait_for_live_runtimes

from enqueue_shards_support import (
    COMPLETE_LANES_SQL,
    change,
    comparable,
    complete_lanes,
    completed_shards,
    enqueued_per_producer,
    info,
    lane_objects,
    lanes_below,
    next_transaction_id,
    ready_depth_by_shard,
    refused,
    shard_counts,
    snapshot,
    wait_until,
)

# Producers that together use every enqueue path of awa-pg 0.6.9 (docs/awa-internals.md §6):
# SQL insert_job_compat (shard = backend pid % S, one per pool connection) and
# keyed direct COPY (shard = hash(key) % S, so every shard gets jobs).
LOAD_PRODUCERS = {
    "sql-insert": {"mode": "insert", "rate": 40, "concurrency": 4},
    "sql-copy": {"mode": "insert_many_copy", "batch": 5, "rate": 10},
    "keyed-copy": {"mode": "enqueue_many_copy", "batch": 16, "rate": 10, "keyed": True},
}
# Jobs of a keyed batch (97 distinct ordering keys) reach every shard of up to 8.
KEYED_BATCH = {"mode": "enqueue_many_copy", "keyed": True, "batch": 25, "rate": 0}

OBSERVE_SQL = sql.SQL("""
SELECT m.enqueue_shards,
       (SELECT count(*) FROM ({complete}) AS lane
        WHERE lane.queue = m.queue AND lane.enqueue_shard < m.enqueue_shards AND lane.priority BETWEEN 1 AND 4)
FROM awa.queue_meta AS m WHERE m.queue = %s
""").format(complete=sql.SQL(COMPLETE_LANES_SQL))


class CountObserver(threading.Thread):
    """Reads, in its own session and one statement at a time, the count producers
    read and how many of the lanes that count needs are complete."""

    def __init__(self, db: AwaDatabase, queue: str) -> None:
        super().__init__(name=f"observer-{queue}", daemon=True)
        self.db = db
        self.queue = queue
        self.done = threading.Event()
        self.seen: list[tuple[int | None, int]] = []  # (count or None without a row, complete lanes below it)
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            with self.db.connect() as conn:
                while not self.done.is_set():
                    row = conn.execute(OBSERVE_SQL, (self.queue,)).fetchone()
                    self.seen.append(tuple(row) if row else (None, 0))
        except BaseException as exc:  # pylint: disable=broad-exception-caught
            self.failure = exc

    def finish(self) -> None:
        self.done.set()
        self.join(10)
        assert self.failure is None, f"the observer failed: {self.failure!r}"

    def counts_without_their_lanes(self) -> list[tuple[int, int]]:
        return [(shards, lanes) for shards, lanes in self.seen if shards is not None and lanes < 4 * shards]


def test_raise_under_load_is_atomic_and_every_job_runs_once_on_every_shard(awa_db, fleet):
    fleet.worker("w1", ["load=8"])
    for name, options in LOAD_PRODUCERS.items():
        fleet.producer(name, "load", **options)
    wait_until(lambda: enqueued_per_producer(awa_db).keys() >= LOAD_PRODUCERS.keys(), 30,
               "every producer to enqueue at S=1")
    observer = CountObserver(awa_db, "load")
    observer.start()
    wait_until(lambda: observer.seen, 10, "the observer's first reading")
    lanes_before = complete_lanes(awa_db, "load")

    result = change(awa_db, "load", 8)

    enqueued_at_switch = enqueued_per_producer(awa_db)
    wait_until(lambda: all(count >= enqueued_at_switch[name] + 20 for name, count in
                           enqueued_per_producer(awa_db).items()), 30, "every producer to enqueue 20 more jobs at S=8")
    observer.finish()
    for name in LOAD_PRODUCERS:
        fleet.members[name].stop()

    assert (result["changed"], result["previous_shards"], result["shards"]) == (True, {"load": 1}, 8)
    assert result["lanes_created"] == 32 - len(lanes_before)
    assert complete_lanes(awa_db, "load") == lanes_below(8)
    assert fleet.producer_errors() == []
    assert observer.counts_without_their_lanes() == []
    assert {shards for shards, dummy in observer.seen} == {None, 8}, "the observer saw the switch happen"
    tags = fleet.enqueued_tags("load")
    counts = fleet.wait_all_completed(tags, timeout=90)
    assert {tag: counts[tag] for tag in tags} == dict.fromkeys(tags, 1)
    assert completed_shards(awa_db, "load") == set(range(8))


@pytest.mark.parametrize("stripes", [1, 2], ids=["plain", "striped"])
def test_a_rerun_writes_nothing_not_even_a_transaction_id(awa_db, stripes):
    first = change(awa_db, "steady", 8, stripes=stripes)
    assert first["changed"]
    state = snapshot(awa_db)
    next_xid = next_transaction_id(awa_db)

    again = change(awa_db, "steady", 8, stripes=stripes)

    assert next_transaction_id(awa_db) == next_xid, "the re-run was assigned a transaction id"
    assert snapshot(awa_db) == state
    assert (again["changed"], again["queries"], again["lanes_created"], again["grants_added"]) == (False, [], 0, 0)
    assert again["previous_shards"] == dict.fromkeys(first["physical_queues"], 8)
    assert again["diff"]["before"] == again["diff"]["after"]


def test_lowering_keeps_every_lane_and_jobs_on_old_shards_drain_through_a_worker(awa_db, fleet):
    change(awa_db, "lower", 8)
    fleet.producer("before", "lower", count=200, **KEYED_BATCH).wait(60)
    assert all(depth > 0 for depth in ready_depth_by_shard(awa_db, "lower").values())
    lanes = lane_objects(awa_db)

    lowered = change(awa_db, "lower", 2)

    assert (lowered["changed"], lowered["lanes_created"], lowered["previous_shards"]) == (True, 0, {"lower": 8})
    assert lowered["diff"] == {
        "before": {"lower": {"enqueue_shards": 8, "lanes": 32, "lanes_missing": 0, "missing_grants": 0}},
        "after": {"lower": {"enqueue_shards": 2, "lanes": 32, "lanes_missing": 0, "missing_grants": 0}}}
    assert any("jobs already on shards >= 2 keep draining" in warning for warning in lowered["warnings"])
    assert lane_objects(awa_db) == lanes, "lowering created or deleted lanes"

    fleet.producer("after", "lower", count=100, **KEYED_BATCH).wait(60)
    fleet.worker("w1", ["lower=8"])
    tags = fleet.enqueued_tags("lower")
    counts = fleet.wait_all_completed(tags, timeout=60)
    assert {tag: counts[tag] for tag in tags} == dict.fromkeys(tags, 1)
    assert ready_depth_by_shard(awa_db, "lower") == dict.fromkeys(range(8), 0)
    assert completed_shards(awa_db, "lower", "before-") == set(range(8))
    assert completed_shards(awa_db, "lower", "after-") == {0, 1}
    assert fleet.producer_errors() == []
    assert lane_objects(awa_db) == lanes, "draining created or deleted lanes"


def test_striped_queue_gets_lanes_and_count_on_every_stripe_and_runtimes_use_them_all(awa_db, fleet):
    result = change(awa_db, "striped", 4, stripes=2)

    physical = ["striped#0", "striped#1"]
    assert (result["physical_queues"], result["lanes_created"]) == (physical, 32)
    assert result["previous_shards"] == dict.fromkeys(physical, 1)
    assert shard_counts(awa_db) == dict.fromkeys(physical, 4), "no row for the logical name, one per stripe"
    assert all(complete_lanes(awa_db, queue) == lanes_below(4) for queue in physical)

    fleet.worker("w1", ["striped=4"], stripes=2)
    fleet.producer("p1", "striped", stripes=2, count=200, **KEYED_BATCH).wait(60)
    tags = fleet.enqueued_tags("striped")
    counts = fleet.wait_all_completed(tags, timeout=60)
    assert {tag: counts[tag] for tag in tags} == dict.fromkeys(tags, 1)
    assert fleet.producer_errors() == []
    assert {queue: completed_shards(awa_db, queue) for queue in physical} == dict.fromkeys(physical, {0, 1, 2, 3})

    # The SQL insert path writes to the logical name, which striped runtimes never claim.
    fleet.producer("logical", "striped", mode="insert", rate=0, count=1).wait(30)
    detected = change(awa_db, "striped", 4)
    assert (detected["stripes"], detected["changed"]) == (2, False)
    assert any("runtimes with 2 stripes never claim jobs from 'striped' itself" in warning
               for warning in detected["warnings"])
    mismatch = refused(awa_db, "striped", 4, stripes=3)
    assert "stripes=3 was requested, but queue 'striped' is stored with 2 stripes" in mismatch.message


def nothing_yet(db: AwaDatabase) -> dict:  # pylint: disable=unused-argument
    return {}


def raised_to_8(db: AwaDatabase) -> dict:
    change(db, "chk", 8)
    return {}


def lanes_a_runtime_cannot_use(db: AwaDatabase) -> dict:
    """Lanes created by the superuser: Awa's default privileges give the runtime role nothing on them."""
    db.setup_least_privilege(runtime_count=1)
    change(db, "chk", 4)
    return {"runtime_roles": [db.roles["runtime1"].name]}


@pytest.mark.parametrize("prepare, shards, options", [
    (nothing_yet, 8, {}),
    (raised_to_8, 2, {}),
    (nothing_yet, 4, {"stripes": 2}),
    (lanes_a_runtime_cannot_use, 4, {}),
], ids=["raise", "lower", "striped", "grants-only"])
def test_check_mode_reports_exactly_what_the_real_run_does_and_writes_nothing(
        awa_db, prepare: Callable[[AwaDatabase], dict], shards: int, options: dict):
    options = {**options, **prepare(awa_db)}
    before = snapshot(awa_db)

    checked = change(awa_db, "chk", shards, check_mode=True, **options)
    assert snapshot(awa_db) == before, "check mode wrote"

    applied = change(awa_db, "chk", shards, **options)
    assert (checked["check_mode"], applied["check_mode"], applied["changed"]) == (True, False, True)
    assert comparable(checked) == comparable(applied)
    assert snapshot(awa_db) != before
    assert change(awa_db, "chk", shards, check_mode=True, **options)["changed"] is False


# One awa-cli release of each schema family of the 0.6 line (docs/enqueue_shards.md, "Supported
# Awa versions"): 0.6.0-0.6.1 (schema 39), 0.6.2-0.6.7 (schema 40) and 0.6.8 (schema 40 with the
# wait_free_dirty_marks patch, as 0.6.9). The programs are awa-pg of the same release.
@pytest.mark.parametrize("awa_db", ["0.6.0", "0.6.5", "0.6.8"], indirect=True)
def test_every_schema_of_the_0_6_line_is_supported(awa_db, fleet):
    """Compatibility smoke: raise, re-run and lower on an older release's schema, used by that release's programs."""
    raised = change(awa_db, "compat", 4)
    assert (raised["changed"], raised["lanes_created"]) == (True, 16)
    assert not any("untested" in warning for warning in raised["warnings"])
    assert complete_lanes(awa_db, "compat") == lanes_below(4)
    assert change(awa_db, "compat", 4)["changed"] is False

    worker = fleet.worker("w1", ["compat=4"])
    wait_for_live_runtimes(awa_db, [worker.pid], 30)
    assert awa_db.query("SELECT version FROM awa.runtime_instances") == [(awa_db.awa_version,)]
    fleet.producer("p1", "compat", count=100, **KEYED_BATCH).wait(60)
    tags = fleet.enqueued_tags("compat")
    assert set(fleet.wait_all_completed(tags, timeout=60)) >= tags
    assert completed_shards(awa_db, "compat") == {0, 1, 2, 3}

    assert change(awa_db, "compat", 1)["previous_shards"] == {"compat": 4}
    assert shard_counts(awa_db) == {"compat": 1}
    worker.restart()
    wait_for_live_runtimes(awa_db, [worker.pid], 30)
    state = info(awa_db, queue="compat", wait="drained", timeout=60)["queues"]["compat"]
    assert (state["enqueue_shards"], state["runtimes_converged"], state["drained"]) == ({"compat": 1}, 1, True)
    assert state["lanes_missing"] == []
