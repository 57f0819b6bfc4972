"""The shard-choice benchmark's own logic (benchmarks/shard_choice*.py, benchmarks/wait_sampler.py).

Two kinds of test. On PostgreSQL 17 and 18: a backend blocked by a real Awa
lane lock is attributed to that lane by the wait sampler (the lock keys are
computed in SQL, so only a real wait proves them). Without a database: the
arithmetic that turns recorded samples, producer calls and sequence reads
into the reported numbers and tables. No timing is asserted anywhere.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

from pathlib import Path

import awa
import pytest

from ansible_collections.awa.operations.plugins.module_utils.advice import gains
from ansible_collections.awa.operations.plugins.module_utils.advice import load_window

from awa_testbed import queue_facts
from awa_testbed.jobs import KIND, TestJob

from benchmarks import shard_choice_report as report
from benchmarks.shard_gains import gains_table
from benchmarks.__main__ import build_parser, main, with_matrix_options, FULL
from benchmarks.shard_choice import Matrix, shard_order, wait_drained
from benchmarks.wait_sampler import BackendSample, WaitTally, classify, fetch_lane_keys

from enqueue_shards_support import change, wait_until

ROLES = {"awa-bench-producer": "producer", "awa-bench-worker": "worker"}


def blocked_samples(db, queue: str, deadline: float = 20.0) -> list[BackendSample]:
    """Sample until a producer backend waits on a lock; its classified samples.

    One sample reads pg_stat_activity and pg_locks at two instants: a backend can show its lock request queued while
    its state still says the moment before it sent the statement ("idle in transaction"). Such a sample is not yet
    the wait, so sampling goes on until the backend's own wait event says it too.
    """
    with db.connect() as conn:
        lane_keys = fetch_lane_keys(conn, queue)
        return wait_until(
            lambda: _when_a_producer_waits([classify(row, ROLES, lane_keys) for row in load_window.fetch_activity_sample(conn)]),
            deadline, "a producer backend to wait on a lock", interval=0.05)


def _when_a_producer_waits(backends: list[BackendSample]) -> list[BackendSample] | None:
    """The sample, if a producer backend in it waits on a lock by its own wait event too."""
    if any(backend.role == "producer" and backend.lock and backend.wait.startswith("Lock:") for backend in backends):
        return backends
    return None


def test_a_producer_waiting_for_a_lanes_reservation_lock_is_attributed_to_that_lane(awa_db):
    change(awa_db, "lanes", 2)
    with awa_db.connect() as holder, ThreadPoolExecutor(max_workers=1) as pool:
        # Awa's own reservation of lane (priority 2, shard 1), held until this transaction ends.
        holder.execute("BEGIN")
        holder.execute("SELECT awa.reserve_enqueue_seq('lanes', 2::smallint, 1::smallint, 1)")

        def reserve_same_lane() -> int:
            with awa_db.connect(application_name="awa-bench-producer") as producer:
                return producer.execute("SELECT awa.reserve_enqueue_seq('lanes', 2::smallint, 1::smallint, 1)"
                                        ).fetchone()[0]

        waiting = pool.submit(reserve_same_lane)
        backends = blocked_samples(awa_db, "lanes")
        holder.execute("COMMIT")
        assert waiting.result(timeout=30) == 2
    assert BackendSample("producer", "Lock:advisory", "lane reservation", (2, 1)) in backends
    tally = WaitTally()
    tally.add(backends)
    assert tally.lane_waits == {"2/1": 1} and tally.lane_waiters_per_sample == {1: 1}


def test_enqueue_many_copy_takes_the_lane_insert_lock_the_sampler_names(awa_db):
    """The copy path's insert-lock key comes from reading Awa's Rust source; a real call proves it."""
    change(awa_db, "copylane", 1)
    with awa_db.connect() as holder, ThreadPoolExecutor(max_workers=1) as pool:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(hashtextextended('awa:copylane:2:0', 0))")
        client = awa.Client(f"{awa_db.url()}?application_name=awa-bench-producer")
        waiting = pool.submit(client.enqueue_many_copy, [TestJob(tag="t1")], kind=KIND, queue="copylane")
        backends = blocked_samples(awa_db, "copylane")
        holder.execute("COMMIT")
        assert waiting.result(timeout=30) == 1
    assert BackendSample("producer", "Lock:advisory", "lane insert", (2, 0)) in backends


def enqueued_into(db, queue: str) -> int:
    return queue_facts.enqueued(db.dsn(), queue)


def test_a_gated_producer_enqueues_only_while_the_gate_is_open_into_the_queue_it_names(awa_db, fleet, tmp_path):
    """The test bed additions the suite relies on: --gate, --no-record-enqueued, the worker's --latency-summary."""
    for queue in ("gate_a", "gate_b"):
        change(awa_db, queue, 1)
    gate, latencies = tmp_path / "gate", tmp_path / "worker.json"
    worker = fleet.worker("w", ["gate_a=8", "gate_b=8"], extra=["--latency-summary", str(latencies)])
    producer = fleet.producer("p", "gate_default", rate=0, connections=1, gate=gate, record_enqueued=False,
                              summary=tmp_path / "producer.json")
    # The gate is closed: the producer found it so before its first call, and enqueued nothing.
    wait_until(lambda: "waits for the gate" in producer.output(), 30, "the producer to find the gate closed")
    assert [enqueued_into(awa_db, queue) for queue in ("gate_default", "gate_a", "gate_b")] == [0, 0, 0]

    (tmp_path / "gate.next").write_text("gate_b", encoding="utf-8")
    (tmp_path / "gate.next").replace(gate)
    wait_until(lambda: enqueued_into(awa_db, "gate_b") >= 20, 30, "20 jobs enqueued through the open gate")
    gate.unlink()
    with awa_db.connect() as conn:
        assert wait_drained(conn, "gate_b", 30)["drained"]
    producer.stop()
    worker.stop()

    produced = json.loads((tmp_path / "producer.json").read_text(encoding="utf-8"))
    ran = json.loads(latencies.read_text(encoding="utf-8"))
    assert produced["enqueued"] >= 20 and produced["errors"] == {}
    assert [enqueued_into(awa_db, queue) for queue in ("gate_default", "gate_a", "gate_b")] == [
        0, 0, produced["enqueued"]]
    assert len(ran["created_at"]) == len(ran["handled_at"]) == produced["enqueued"]
    assert all(handled >= created for created, handled in zip(ran["created_at"], ran["handled_at"]))
    assert awa_db.scalar("SELECT count(*) FROM testbed.enqueued") == 0
    assert awa_db.scalar("SELECT count(*) FROM testbed.completions") == 0


# ---------------------------------------------------------------------------
# Pure logic: recorded rows and numbers in, reported numbers out

LANE_KEYS = {(11, 22): ("lane reservation", (2, 0)), (33, 44): ("lane insert", (2, 1))}


@pytest.mark.parametrize(("row", "expected"), [
    (("active", "Lock", "advisory", "advisory", 5, 11, 22, None, "awa-bench-producer"),
     BackendSample("producer", "Lock:advisory", "lane reservation", (2, 0))),
    (("active", "Lock", "advisory", "advisory", 5, 33, 44, None, "awa-bench-producer"),
     BackendSample("producer", "Lock:advisory", "lane insert", (2, 1))),
    (("active", "Lock", "advisory", "advisory", 5, 99, 1, None, "awa-bench-producer"),
     BackendSample("producer", "Lock:advisory", "advisory")),
    # PreCommit_Notify's lock: the shared object pg_database (1262) / 0, in no database.
    (("active", "Lock", "object", "object", 0, 1262, 0, None, "awa-bench-producer"),
     BackendSample("producer", "Lock:object", "notify")),
    (("active", None, None, None, None, None, None, None, "awa-bench-worker"), BackendSample("worker", "CPU")),
    (("active", "IO", "WalSync", None, None, None, None, None, "awa-bench-worker"),
     BackendSample("worker", "IO:WalSync")),
    (("idle in transaction", "Client", "ClientRead", None, None, None, None, None, ""),
     BackendSample("other", "idle in transaction")),
    (("idle", "Client", "ClientRead", None, None, None, None, None, "awa-bench-producer"),
     BackendSample("producer", "idle")),
])
def test_a_sampled_backend_is_classified_by_its_state_wait_and_lock(row, expected):
    assert classify(row, ROLES, LANE_KEYS) == expected


def test_the_tally_counts_waiters_per_sample_and_per_lane():
    tally = WaitTally()
    lane = BackendSample("producer", "Lock:advisory", "lane reservation", (2, 0))
    notify = BackendSample("producer", "Lock:object", "notify")
    tally.add([lane, lane, BackendSample("producer", "CPU")])
    tally.add([notify, BackendSample("worker", "idle")])
    recorded = tally.as_dict()
    assert recorded["samples"] == 2
    assert recorded["waits"] == {"producer": {"Lock:advisory": 2, "CPU": 1, "Lock:object": 1}, "worker": {"idle": 1}}
    assert recorded["lane_waits"] == {"2/0": 2}
    assert recorded["lane_waiters_per_sample"] == {"0": 1, "2": 1}
    assert recorded["notify_waiters_per_sample"] == {"0": 1, "1": 1}
    assert report.mean_per_sample(recorded["lane_waiters_per_sample"]) == 1.0


def test_jobs_per_shard_come_from_the_sequence_reads_before_and_after_a_window():
    before = {"2/0": (101, 90), "2/1": (51, 51), "2/2": (7, 7)}
    after = {"2/0": (161, 150), "2/1": (71, 60), "2/2": (7, 7), "3/1": (5, 1)}
    lanes = report.lane_deltas(before, after)
    assert lanes == {"2/0": {"enqueued": 60, "claimed": 60}, "2/1": {"enqueued": 20, "claimed": 9},
                     "3/1": {"enqueued": 4, "claimed": 0}}
    assert report.shard_counts(lanes) == {0: 60, 1: 24}
    assert report.shard_counts(lanes, "claimed") == {0: 60, 1: 9}


def test_a_window_counts_the_calls_that_started_inside_it_and_batch_jobs_per_ok_call():
    # (finish time, latency ms, ok). Out: started at 9.8 s, 9.998 s (finished inside) and 11.4 s.
    # In: started at 10.496 s (failed), 10.997 s, 10.96 s (finished after the window) and 10.195 s.
    producer_a = [(10.1, 300.0, True), (10.0, 2.0, True), (10.5, 4.0, False), (11.0, 3.0, True), (11.01, 50.0, True)]
    producer_b = [(10.2, 5.0, True), (11.5, 100.0, True)]
    measured = report.enqueue_stats([producer_a, producer_b], 20, 10.0, 11.0)
    assert (measured["calls"], measured["errors"], measured["jobs"]) == (4, 1, 60)
    assert measured["jobs_per_s"] == 60.0
    assert measured["latency_ms"] == {"p50": 5.0, "p99": 50.0, "max": 50.0}


def test_end_to_end_latency_is_of_the_jobs_created_in_the_window_however_late_they_ran():
    created = [9.5, 10.0, 10.4, 10.9, 11.5]
    handled = [10.1, 10.02, 10.5, 12.9, 11.6]
    measured = report.completion_stats(created, handled, 10.0, 11.0)
    assert measured["created_in_window"] == 3
    assert measured["e2e_ms"]["max"] == pytest.approx(2000.0)
    assert measured["completed_per_s"] == 3.0


def window(path: str, producers: int, shards: int, repeat: int, jobs_per_s: float, **extra) -> dict:
    """A recorded window as the suite writes it (only the fields the summaries read)."""
    recorded = {
        "path": path, "producers": producers, "shards": shards, "repeat": repeat, "seconds": 2.0,
        "producer_pids": [4, 6, 9],
        "enqueue": {"jobs_per_s": jobs_per_s, "calls_per_s": jobs_per_s, "errors": 0,
                    "latency_ms": {"p50": 1.0, "p99": 4.0, "max": 5.0}},
        "completion": {"completed_per_s": jobs_per_s, "created_in_window": 10,
                       "e2e_ms": {"p50": 3.0, "p99": 9.0, "max": 9.5}},
        "lanes": {"2/0": {"enqueued": 30, "claimed": 30}, "2/1": {"enqueued": 10, "claimed": 10}},
        "backlog_end": {}, "drain": {"seconds": 0.1, "drained": True, "left": 0},
        "waits": {"samples": 4, "interval_ms": 25.0, "waits": {"producer": {"Lock:advisory": 3, "CPU": 1}},
                  "lane_waiters_per_sample": {"0": 2, "2": 2}, "notify_waiters_per_sample": {"0": 4}},
        "functions": {"claim_ready_runtime": {"calls": 8, "total_ms": 16.0, "self_ms": 12.0}},
        "wal_syncs": 100,
    }
    recorded.update(extra)
    return recorded


def recorded_windows() -> list[dict]:
    return [window("insert", 2, 1, 0, 100.0), window("insert", 2, 4, 0, 300.0),
            window("insert", 2, 1, 1, 200.0), window("insert", 2, 4, 1, 300.0),
            window("insert", 2, 1, 2, 150.0), window("insert", 2, 4, 2, 225.0)]


def test_a_cells_gain_pairs_each_repeat_with_the_lowest_shard_count_of_the_same_producers():
    cells = report.summarize_cells(recorded_windows())
    four = cells[("insert", 2, 4)]
    assert four["jobs_per_s"] == {"n": 3, "median": 300.0, "min": 225.0, "max": 300.0}
    # Paired: 300/100, 300/200, 225/150 (unpaired medians would say 300/150 = 2.0).
    assert four["gain"] == {"n": 3, "median": 1.5, "min": 1.5, "max": 3.0}
    assert cells[("insert", 2, 1)]["gain"]["median"] == 1.0
    assert four["shards_hit"] == [2, 2, 2] and four["largest_shard_share"] == 0.75
    assert four["pid_shards"] == [3, 3, 3]  # pids 4, 6, 9 mod 4
    assert four["lane_lock_waiters"] == 1.0 and four["notify_lock_waiters"] == 0.0
    assert four["producer_waits"] == {"Lock:advisory": 0.75, "CPU": 0.25}
    assert (four["claim_ms"], four["jobs_per_claim"]) == (2.0, 5.0)


def test_the_markdown_matrix_shows_median_throughput_and_paired_gain_per_shard_count():
    result = {"matrix": asdict(Matrix(producers=(2,), shards=(1, 4), paths=("insert",))),
              "windows": recorded_windows(),
              "definitions": [{"claim": "c", "function": "awa.f", "pattern": "p", "match": None}]}
    text = report.tables_markdown(17, result)
    assert "| insert | 2         | 150 | 300 x1.50 [1.50-3.00] |" in text
    assert "Shard choice, PostgreSQL 17, insert: producers" in text
    assert "| c     | awa.f    | NOT FOUND" in text


def test_each_shard_count_comes_first_in_one_repeat():
    orders = [shard_order((1, 2, 4, 8), repeat) for repeat in range(4)]
    assert orders[0] == [1, 2, 4, 8] and orders[1] == [2, 4, 8, 1]
    assert [order[0] for order in orders] == [1, 2, 4, 8]


def test_command_line_matrix_options_replace_the_profiles_and_bad_values_are_refused(capsys):
    args = build_parser().parse_args(["--suites", "shard_choice", "--producers", "1", "16", "--shards", "8"])
    matrix = with_matrix_options(FULL, args).shard_matrix
    assert (matrix.producers, matrix.shards, matrix.repeats) == ((1, 16), (8,), FULL.shard_matrix.repeats)
    assert Matrix(shards=(0, 65), repeats=0, window_seconds=0).problems() == [
        "shard counts must be 1..64 (awa.queue_meta allows no other), got [0, 65]",
        "repeats must be at least 1, got 0", "the window must be longer than 0 seconds, got 0"]
    with pytest.raises(SystemExit):
        main(["--suites", "shard_choice", "--shards", "65"])
    assert "shard counts must be 1..64" in capsys.readouterr().err


def test_the_info_modules_advice_decides_by_the_recorded_run():
    """The shipped gains table is benchmarks/shard_gains.py's function of the run docs/performance.md records."""
    source = gains.MEASURED["source"]
    run = json.loads((Path(__file__).parents[2] / source).read_text(encoding="utf-8"))
    assert sorted(run["results"]) == ["17", "18"]
    assert gains_table(run, source) == gains.MEASURED
