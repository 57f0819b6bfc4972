"""1. The cost of one change: apply transaction, queue_meta row lock, round trips.

Method. ``change_queues`` (the code behind the module) runs on a
``TimedConnection`` that records the client-side start and end of every
statement and of the commit. From those events:

* transaction: first statement sent (its implicit BEGIN included) until the
  COMMIT returns; the plan is made inside this transaction, so it includes
  the reads;
* queue_meta row lock held: from the start of the upsert statement until the
  COMMIT returns (an upper bound: the lock is taken during the statement and
  released at commit, server side);
* round trips and statements: counted from libpq's protocol trace of the
  whole call (every ReadyForQuery the server sends ends one round trip).

Two comparisons: "by hand", the verified provisioning SQL of docs/awa-internals.md §3
and the upsert in one transaction (Awa's own lane creation and nothing else:
the floor for a safe change), and the raw documented upsert, one autocommit
statement (its transaction, row lock and round trip are that statement).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg

from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.change.result import QueueChangeRun
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import physical_queues
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request

from . import environment, stats, tables
from .environment import BenchServer
from .tracing import COMMIT_LABEL, UPSERT_LABEL, Event, TimedConnection, protocol_trace

WRITE_LABELS = frozenset({"lane locks", "insert enqueue heads", "insert claim heads", "insert lane rows",
                          "repair lanes", "grants", "create ledger"})
RAW_UPSERT_SQL = """INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES (%s, %s)
ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards"""
# docs/awa-internals.md section 3, "Verified provisioning SQL": what a careful operator runs by hand
# (here for every physical queue at once), then the upsert, in one transaction.
LANES_SQL = ("unnest(%(queues)s::text[]) AS q, generate_series(1, 4) AS p, "
             "generate_series(0, %(shards)s - 1) AS s")
BY_HAND_SQL = (
    "SELECT count(pg_advisory_xact_lock(hashtextextended(format('awa:%%s:%%s:%%s', q, p, s), 0))) "
    f"FROM (SELECT q, p, s FROM {LANES_SQL} ORDER BY q, p, s) AS lanes",
    "INSERT INTO awa.queue_lanes (queue, priority) SELECT q, p FROM unnest(%(queues)s::text[]) AS q, "
    "generate_series(1, 4) AS p ON CONFLICT (queue, priority) DO NOTHING",
    f"INSERT INTO awa.queue_enqueue_heads (queue, priority, enqueue_shard) SELECT q, p, s FROM {LANES_SQL} "
    "ON CONFLICT DO NOTHING",
    f"INSERT INTO awa.queue_claim_heads (queue, priority, enqueue_shard) SELECT q, p, s FROM {LANES_SQL} "
    "ON CONFLICT DO NOTHING",
    f"SELECT count(awa.ensure_lane_sequences(q, p::smallint, s::smallint)) FROM {LANES_SQL}",
    "INSERT INTO awa.queue_meta (queue, enqueue_shards) SELECT q, %(shards)s FROM unnest(%(queues)s::text[]) AS q "
    "ON CONFLICT (queue) DO UPDATE SET enqueue_shards = EXCLUDED.enqueue_shards",
)


@dataclass(frozen=True)
class Scenario:
    name: str
    shards: int
    stripes: int

    @property
    def lanes(self) -> int:
        return 4 * self.shards * self.stripes


SCENARIOS = (Scenario("S 1 -> 8", 8, 1), Scenario("S 1 -> 64", 64, 1), Scenario("S 1 -> 64, 4 stripes", 64, 4))


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def phases(events: list[Event]) -> dict:
    """Milliseconds per phase of one real run, from its statement events."""
    statements = [event for event in events if event.label != "ROLLBACK"]
    first_write = next((i for i, event in enumerate(statements) if event.label in WRITE_LABELS), len(statements))
    upsert = next(event for event in statements if event.label == UPSERT_LABEL)
    commit = next(event for event in statements if event.label == COMMIT_LABEL)

    def total(selected) -> float:
        return _ms(sum(event.seconds for event in selected))

    writes = statements[first_write:]
    return {
        "transaction_ms": _ms(commit.end - statements[0].start),
        "lock_held_ms": _ms(commit.end - upsert.start),
        "plan_reads_ms": total(statements[:first_write]),
        "provision_ms": total(e for e in writes if e.label in WRITE_LABELS),
        "verify_reads_ms": total(e for e in writes if e.label.startswith("read ")),
        "ledger_row_ms": total(e for e in writes if e.label == "ledger row"),
        "upsert_ms": total([upsert]),
        "commit_ms": total([commit]),
        "by_statement_ms": {label: total(e for e in statements if e.label == label)
                            for label in dict.fromkeys(event.label for event in statements)},
    }


def measure_change(conn: TimedConnection, queue: str, shards: int, stripes: int, *, check_mode: bool = False) -> dict:
    """One run of the change through module_utils, with its phases and wire counts."""
    conn.take_events()
    with protocol_trace(conn) as wire:
        result: QueueChangeRun = change_queues(conn, validate_request(queue, shards, stripes, new_queue=True),
                                               check_mode=check_mode)
    events = conn.take_events()
    measured = {"changed": result["changed"], "lanes_created": result["lanes_created"],
                "run_ms": _ms(result["duration"]), "round_trips": wire.round_trips, "statements": wire.statements}
    if result["changed"] and not check_mode:
        measured.update(phases(events))
    return measured


def measure_raw_upsert(conn: psycopg.Connection, queue: str, shards: int) -> dict:
    """The documented one-statement upsert, autocommit."""
    conn.autocommit = True
    with protocol_trace(conn) as wire:
        started = time.perf_counter()
        conn.execute(RAW_UPSERT_SQL, (queue, shards))
        elapsed = time.perf_counter() - started
    return {"transaction_ms": _ms(elapsed), "lock_held_ms": _ms(elapsed), "round_trips": wire.round_trips,
            "statements": wire.statements}


def measure_by_hand(conn: TimedConnection, queue: str, shards: int, stripes: int) -> dict:
    """The documented provisioning SQL and the upsert, in one transaction (no plan, no verify, no ledger)."""
    queues = physical_queues(queue, stripes)
    conn.take_events()
    with protocol_trace(conn) as wire:
        for statement in BY_HAND_SQL:
            conn.execute(statement, {"queues": queues, "shards": shards})
        conn.commit()
    return {**phases(conn.take_events()), "round_trips": wire.round_trips, "statements": wire.statements}


def run_scenario(conn: TimedConnection, scenario: Scenario, iterations: int, prefix: str) -> dict:
    """``iterations`` changes on fresh queues, by the module and by hand taking turns (so both see the same
    checkpoint and cache state); then a re-run (no change) and a check-mode run of the module."""
    runs, by_hand = [], []
    for i in range(iterations):
        runs.append(measure_change(conn, f"{prefix}_{i}", scenario.shards, scenario.stripes))
        by_hand.append(measure_by_hand(conn, f"{prefix}_hand_{i}", scenario.shards, scenario.stripes))
    last = f"{prefix}_{iterations - 1}"
    return {
        "scenario": scenario.name, "shards": scenario.shards, "stripes": scenario.stripes, "lanes": scenario.lanes,
        "runs": runs, "by_hand": by_hand,
        "rerun_unchanged": measure_change(conn, last, scenario.shards, scenario.stripes),
        "check_mode_fresh_queue": measure_change(conn, f"{prefix}_check", scenario.shards, scenario.stripes,
                                                 check_mode=True),
    }


def run(bench: BenchServer, iterations: int) -> dict:
    db = bench.fresh_database()
    try:
        with environment.connect(db, TimedConnection) as conn:
            measure_change(conn, "cost_warmup", 4, 1)  # ledger creation, catalog caches
            scenarios = [run_scenario(conn, scenario, iterations, f"cost_{index}")
                         for index, scenario in enumerate(SCENARIOS)]
        with environment.connect(db) as raw_conn:
            raw = [measure_raw_upsert(raw_conn, f"raw_{i}", 64) for i in range(iterations)]
    finally:
        db.drop()
    return {"scenarios": scenarios, "raw_upsert": raw}


def _median_of(runs: list[dict], key: str) -> float | None:
    return stats.median([run[key] for run in runs if key in run])


def _row(name: str, lanes: int, runs: list[dict]) -> list:
    return [name, lanes, _median_of(runs, "transaction_ms"), _median_of(runs, "plan_reads_ms"),
            _median_of(runs, "provision_ms"), _median_of(runs, "verify_reads_ms"), _median_of(runs, "commit_ms"),
            _median_of(runs, "lock_held_ms"), max(run["transaction_ms"] for run in runs), runs[0]["round_trips"]]


def table(major: int, result: dict) -> str:
    rows = []
    for scenario in result["scenarios"]:
        rows.append(_row(f"module: {scenario['scenario']}", scenario["lanes"], scenario["runs"])
                    + [scenario["rerun_unchanged"]["round_trips"], scenario["check_mode_fresh_queue"]["round_trips"]])
        rows.append(_row(f"by hand (docs/awa-internals.md §3 SQL): {scenario['scenario']}", scenario["lanes"],
                         scenario["by_hand"]) + [None, None])
    rows.append(_row("raw upsert (1 statement, no lanes)", 0, result["raw_upsert"]) + [None, None])
    iterations = len(result["scenarios"][0]["runs"])
    return tables.render(
        f"Change cost, PostgreSQL {major} (median of {iterations} runs on fresh queues, ms)",
        ["change", "lanes", "transaction", "plan reads", "provision", "verify", "commit", "queue_meta lock",
         "max transaction", "round trips", "rerun RT", "check RT"],
        rows,
        "transaction = first statement to COMMIT returned; queue_meta lock = upsert start to COMMIT returned; "
        "round trips (RT) = protocol round trips of a changing run, then of a re-run with nothing to change and of "
        "a check-mode run. By hand = the verified provisioning SQL of docs/awa-internals.md §3 and the upsert in one "
        "transaction: Awa's own lane creation, no plan, verify or ledger.")
