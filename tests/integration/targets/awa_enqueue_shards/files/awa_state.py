"""Print, as JSON, everything awa_enqueue_shards may change for one logical queue.

The integration target compares these readings to prove that a check-mode run
left the database untouched and that a real run did what it reported. It
connects with libpq's environment (PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD).

    python awa_state.py QUEUE RUNTIME_ROLE
"""

from __future__ import annotations

import json
import sys

import psycopg

# Per physical queue of QUEUE (QUEUE itself and QUEUE#n): the count producers read,
# the complete lanes (both head rows and both sequences) and the lane sequences
# the runtime role cannot fully use.
QUEUES_SQL = """
WITH physical AS (
    SELECT queue FROM awa.queue_enqueue_heads
    WHERE queue = %(queue)s OR left(queue, length(%(queue)s) + 1) = %(queue)s || '#'
    UNION
    SELECT queue FROM awa.queue_meta
    WHERE queue = %(queue)s OR left(queue, length(%(queue)s) + 1) = %(queue)s || '#'
), lanes AS (
    SELECT h.queue, es.oid AS enqueue_oid, cs.oid AS claim_oid
    FROM awa.queue_enqueue_heads AS h
    JOIN awa.queue_claim_heads AS c USING (queue, priority, enqueue_shard)
    LEFT JOIN pg_class AS es ON es.relname = h.seq_name AND es.relnamespace = 'awa'::regnamespace
    LEFT JOIN pg_class AS cs ON cs.relname = c.seq_name AND cs.relnamespace = 'awa'::regnamespace
)
SELECT p.queue,
       (SELECT m.enqueue_shards FROM awa.queue_meta AS m WHERE m.queue = p.queue),
       (SELECT count(*) FROM lanes AS l
        WHERE l.queue = p.queue AND l.enqueue_oid IS NOT NULL AND l.claim_oid IS NOT NULL),
       (SELECT count(*) FROM lanes AS l, LATERAL (VALUES (l.enqueue_oid), (l.claim_oid)) AS s(oid)
        WHERE l.queue = p.queue AND s.oid IS NOT NULL
          AND NOT has_sequence_privilege(%(role)s, s.oid, 'USAGE, SELECT, UPDATE'))
FROM physical AS p
ORDER BY 1
"""
LEDGER = "awa_operations.enqueue_shards_changes"


def read_state(conn: psycopg.Connection, queue: str, role: str) -> dict:
    queues = {
        name: {"enqueue_shards": shards, "complete_lanes": lanes, "sequences_missing_grants": missing}
        for name, shards, lanes, missing in conn.execute(QUEUES_SQL, {"queue": queue, "role": role})
    }
    ledger_rows = 0
    if conn.execute("SELECT to_regclass(%s)", (LEDGER,)).fetchone()[0] is not None:
        ledger_rows = conn.execute(f"SELECT count(*) FROM {LEDGER} WHERE queue = %s", (queue,)).fetchone()[0]
    return {"queues": queues, "ledger_rows": ledger_rows}


def main() -> int:
    queue, role = sys.argv[1:3]
    with psycopg.connect("", application_name="awa_state") as conn:
        print(json.dumps(read_state(conn, queue, role), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
