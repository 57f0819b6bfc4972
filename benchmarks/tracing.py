"""What a run sends to PostgreSQL, and when: statement timings and protocol round trips.

Two independent instruments, both on the client side of one connection:

* ``TimedConnection`` is a psycopg connection that records the start and end
  of every ``execute``, ``commit`` and ``rollback`` (``time.perf_counter``)
  with a short label. The module code receives it like any connection, so
  nothing in plugins/ is patched.
* ``protocol_trace`` turns on libpq's own protocol trace for a block and
  counts what actually crossed the wire: every ``ReadyForQuery`` the server
  sends ends one round trip (implicit ``BEGIN`` and ``COMMIT`` included), and
  every ``Query``/``Execute`` message the client sends is one statement.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
from psycopg import pq, sql

# First matching pattern names a statement (checked against its text, in order).
STATEMENT_LABELS = (
    (r"^\s*SET LOCAL lock_timeout", "lock_timeout"),
    (r"pg_advisory_xact_lock\(hashtextextended\(%\(key\)s", "queue lock"),
    (r"count\(pg_advisory_xact_lock", "lane locks"),
    (r"^\s*INSERT INTO \S*queue_enqueue_heads", "insert enqueue heads"),
    (r"^\s*INSERT INTO \S*queue_claim_heads", "insert claim heads"),
    (r"^\s*INSERT INTO \S*queue_lanes", "insert lane rows"),
    (r"ensure_lane_sequences", "repair lanes"),
    (r"^\s*GRANT ", "grants"),
    (r"CREATE TABLE IF NOT EXISTS", "create ledger"),
    (r"^\s*INSERT INTO \S*enqueue_shards_changes", "ledger row"),
    (r"^\s*INSERT INTO awa\.queue_meta", "queue_meta upsert"),
    (r"current_setting\('server_version_num'\)", "read installation"),
    (r"awa\.storage_status\(\)", "read awa details"),
    (r"SELECT DISTINCT queue FROM", "read queue names"),
    (r"LEFT JOIN awa\.queue_meta AS m", "read queue_meta"),
    (r"^\s*WITH schema_oid AS", "read lane state"),
    (r"pg_current_xact_id_if_assigned", "assert no write"),
)
UPSERT_LABEL = "queue_meta upsert"
COMMIT_LABEL = "COMMIT"


def label_of(text: str) -> str:
    for pattern, label in STATEMENT_LABELS:
        if re.search(pattern, text):
            return label
    return " ".join(text.split())[:40]


def statement_text(query: object, conn: psycopg.Connection) -> str:
    if isinstance(query, sql.Composable):
        return query.as_string(conn)
    if isinstance(query, bytes):
        return query.decode()
    return str(query)


@dataclass(frozen=True)
class Event:
    """One statement, commit or rollback: label and client-side start/end (perf_counter seconds)."""

    label: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


class TimedConnection(psycopg.Connection):
    """A psycopg connection that records every execute, commit and rollback it runs."""

    events: list[Event]

    def _timed(self, label: str, call: Callable[..., object], *args, **kwargs):
        if not hasattr(self, "events"):
            self.events = []
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            self.events.append(Event(label, start, time.perf_counter()))

    def execute(self, query: object, params: object = None, **kwargs):  # pylint: disable=arguments-differ
        return self._timed(label_of(statement_text(query, self)), super().execute, query, params, **kwargs)

    def commit(self) -> None:
        self._timed(COMMIT_LABEL, super().commit)

    def rollback(self) -> None:
        self._timed("ROLLBACK", super().rollback)

    def take_events(self) -> list[Event]:
        """The events recorded since the last call."""
        taken, self.events = getattr(self, "events", []), []
        return taken


@dataclass
class ProtocolCount:
    """What one traced block sent: round trips (server ReadyForQuery) and statements."""

    round_trips: int = 0
    statements: int = 0


def count_protocol(trace_text: str) -> ProtocolCount:
    """Count libpq trace lines (``F``/``B`` direction, length, message type)."""
    count = ProtocolCount()
    for line in trace_text.splitlines():
        parts = line.split("\t")
        if len(parts) < 4:
            continue
        direction, message = parts[0], parts[2]
        if direction == "B" and message == "ReadyForQuery":
            count.round_trips += 1
        if direction == "F" and message in ("Query", "Execute"):
            count.statements += 1
    return count


@contextlib.contextmanager
def protocol_trace(conn: psycopg.Connection) -> Iterator[ProtocolCount]:
    """Count the round trips and statements of the block (filled in when it ends)."""
    count = ProtocolCount()
    descriptor, path = tempfile.mkstemp(prefix="awa-bench-trace-")
    try:
        conn.pgconn.trace(descriptor)
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield count
        finally:
            conn.pgconn.untrace()
        with open(path, encoding="utf-8", errors="replace") as trace:
            counted = count_protocol(trace.read())
        count.round_trips, count.statements = counted.round_trips, counted.statements
    finally:
        os.close(descriptor)
        os.unlink(path)
