"""A change of many queues beside the floor's SQL, in process on one durable server.

Two ways to raise N new queues from 1 to 4 shards with the runtime role's
grants, on the same database, taking turns so both see the same checkpoint
and cache state:

* the module: ``change_and_read`` with the list of queues, as
  awa_enqueue_shards runs its ``queues`` option - each queue in its own
  guarded transaction (its lock, provisioning, the verification, its ledger
  row, the switch, its commit), then the read of every queue after the change
  (the module's ``observed``);
* the floor: the same change of every queue in one transaction with no plan,
  verification or ledger - the fleet benchmark's floor SQL (Awa's lane
  provisioning, the grants on the new lanes' sequences, the counts), run
  through psycopg instead of psql.

The target (issue 43): the module within 1.3x of the floor at 100 and 400 queues.
"""

from __future__ import annotations

import time

from awa_testbed.awadb import AwaDatabase

from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_and_read
from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection

from . import stats, tables
from .change_cost import BY_HAND_SQL
from .environment import BenchServer

QUEUE_COUNTS = (100, 400)
SHARDS = 4
RATIO_LIMIT = 1.3
# The runtime role the grants are for; the module and the floor connect as the migrator, as the fleet's do.
RUNTIME, MIGRATOR = "runtime1", "migrator"
GRANT_SQL = (
    "SELECT format('GRANT USAGE, SELECT, UPDATE ON SEQUENCE %%s TO %%I', "
    "string_agg(format('awa.%%I', seq_name), ', '), %(role)s::text) "
    "FROM (SELECT seq_name FROM awa.queue_enqueue_heads WHERE queue = ANY(%(queues)s) "
    "UNION SELECT seq_name FROM awa.queue_claim_heads WHERE queue = ANY(%(queues)s)) AS lanes")


def floor(db: AwaDatabase, queues: list[str]) -> float:
    """The floor's transaction (benchmarks/fleet.py floor_sql, through psycopg): seconds from connect to commit."""
    params = {"queues": queues, "shards": SHARDS, "role": db.roles[RUNTIME].name}
    started = time.perf_counter()
    with open_connection(db.login_args(MIGRATOR)) as conn:
        for statement in BY_HAND_SQL[:-1]:
            conn.execute(statement, params)
        conn.execute(conn.execute(GRANT_SQL, params).fetchone()[0])
        conn.execute(BY_HAND_SQL[-1], params)
        conn.commit()
    return time.perf_counter() - started


def module(db: AwaDatabase, queues: list[str]) -> float:
    """The module's list run (change, then the read of every queue): seconds from connect to the read's end."""
    login = db.login_args(MIGRATOR)
    requests = [validate_request(queue, SHARDS, runtime_roles=[db.roles[RUNTIME].name], new_queue=True)
                for queue in queues]
    started = time.perf_counter()
    with open_connection(login) as conn:
        result, dummy = change_and_read(conn, requests, diff=False, reconnect=lambda: connect(login),
                                        check_mode=False, lock_timeout=5.0, ledger_schema="awa_operations",
                                        reason="benchmark")
    assert result["changed"] and len(result["queues"]) == len(queues), result
    return time.perf_counter() - started


def run(bench: BenchServer, queue_counts: tuple[int, ...] = QUEUE_COUNTS, repeats: int = 5) -> dict:
    db = bench.fresh_database()
    db.setup_least_privilege(runtime_count=1)
    try:
        module(db, ["warmup"])  # the ledger's creation and the catalog caches: not measured
        cells = []
        for count in queue_counts:
            runs: dict[str, list[float]] = {"module": [], "floor": []}
            for repeat in range(repeats):
                # Taking turns, each first every other time: neither always follows the other's checkpoint.
                order = ("module", "floor") if repeat % 2 == 0 else ("floor", "module")
                for kind in order:
                    queues = [f"{kind[0]}{count}_{repeat}_{index:04d}" for index in range(count)]
                    # Each run starts from a checkpoint: the one before it leaves no dirty buffers for it to pay for.
                    with db.connect() as admin:
                        admin.execute("CHECKPOINT")
                    runs[kind].append(round((module if kind == "module" else floor)(db, queues), 3))
            cells.append({"queues": count, **runs})
    finally:
        db.drop()
    return {"shards": SHARDS, "repeats": repeats, "cells": cells}


def pair_ratios(cell: dict) -> list[float]:
    """module / floor of each repeat: the two ran side by side, so a slow spell of the machine (its disk's flushes
    vary by 2x from minute to minute here) weighs on both."""
    return [round(module_s / floor_s, 2) for module_s, floor_s in zip(cell["module"], cell["floor"])]


def table(major: int, result: dict) -> str:
    rows = []
    for cell in result["cells"]:
        module_s, floor_s = stats.median(cell["module"]), stats.median(cell["floor"])
        ratio = stats.median(pair_ratios(cell))
        rows.append([cell["queues"], module_s, floor_s, ratio, ", ".join(map(str, pair_ratios(cell))), RATIO_LIMIT,
                     ratio <= RATIO_LIMIT,
                     round(module_s / cell["queues"] * 1000, 1), round(floor_s / cell["queues"] * 1000, 1)])
    return tables.render(
        f"A change of many queues, PostgreSQL {major}: the module beside the floor's SQL (seconds and ratio, median "
        f"of {result['repeats']} repeats side by side, 1 -> {result['shards']} shards)",
        ["queues", "module s", "floor s", "module / floor", "each repeat", "target", "met", "module ms a queue",
         "floor ms a queue"], rows,
        "module = change_and_read with the queues as a list (awa_enqueue_shards' queues option: a transaction per "
        "queue, then the read of every queue); floor = the same lanes, grants and counts in one transaction with no "
        "plan, verification or ledger (the fleet benchmark's floor SQL). Both connect as the migrator.")
