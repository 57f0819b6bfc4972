# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only queries that return plain data: the only SQL that reads (``apply`` has the SQL that writes).

Every function runs a fixed number of statements, whatever the number of
queues, stripes or lanes involved (set-based SQL, no per-lane round trips),
in the caller's transaction (``connection.transaction``). They take only
ACCESS SHARE locks (tables, lane sequences), which wait behind DDL only.
The Awa facts they rely on are in docs/awa-internals.md.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from ansible_collections.awa.operations.plugins.module_utils.connection import sql
from ansible_collections.awa.operations.plugins.module_utils.ledger import TABLE as LEDGER_TABLE
from ansible_collections.awa.operations.plugins.module_utils.ledger import RecordedChange
from ansible_collections.awa.operations.plugins.module_utils.naming import PRIORITIES, STRIPE_DELIMITER

# awa.queue_meta and the control plane always live in schema "awa"; lanes live in the
# queue-storage schema (docs/awa-internals.md §2).
LANE_PRIVILEGES = ("USAGE", "SELECT", "UPDATE")


@dataclass
class Installation:
    """What is installed, and who we are. Plain data."""

    server_version_num: int
    current_user: str
    has_awa_schema: bool
    has_enqueue_shards: bool = False
    has_queue_storage_tables: bool = False
    schema_version: int | None = None
    storage_state: str | None = None
    storage_engine: str | None = None
    queue_storage_schema: str | None = None
    missing_roles: list[str] = field(default_factory=list)
    ledger_exists: bool = False
    can_create_ledger: bool = False
    can_write_ledger: bool = False
    # Runtime roles that can use whatever the connected role creates (superuser or member of it).
    roles_with_creator_privileges: list[str] = field(default_factory=list)
    database: str = ""
    # Ledgers created by awa.operations 0.1.0 have no change_id column; only their owner can add it.
    ledger_has_change_id: bool = False
    ledger_owner: str | None = None
    can_alter_ledger: bool = False


INSTALLATION_SQL = """
SELECT current_setting('server_version_num')::int,
       current_user::text,
       to_regnamespace('awa') IS NOT NULL,
       EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = to_regclass('awa.queue_meta') AND attname = 'enqueue_shards' AND NOT attisdropped),
       to_regclass('awa.schema_version') IS NOT NULL,
       ARRAY(SELECT r FROM unnest(%(roles)s::text[]) AS r WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r)),
       -- Catalog lookups, not to_regclass: that raises without USAGE on the ledger schema.
       EXISTS (SELECT 1 FROM pg_class WHERE relnamespace = to_regnamespace(%(ledger_schema)s)
               AND relname = %(ledger_table_name)s),
       CASE WHEN to_regnamespace(%(ledger_schema)s) IS NULL THEN has_database_privilege(current_database(), 'CREATE')
            ELSE has_schema_privilege(to_regnamespace(%(ledger_schema)s), 'CREATE') END,
       COALESCE(has_schema_privilege(to_regnamespace(%(ledger_schema)s), 'USAGE')
                AND has_table_privilege((SELECT oid FROM pg_class WHERE relnamespace = to_regnamespace(%(ledger_schema)s)
                                         AND relname = %(ledger_table_name)s), 'INSERT'), false),
       ARRAY(SELECT r FROM unnest(%(roles)s::text[]) AS r JOIN pg_roles AS pr ON pr.rolname = r
             WHERE pr.rolsuper OR pg_has_role(r, current_user, 'USAGE')),
       current_database()::text,
       to_regprocedure('awa.storage_status()') IS NOT NULL
         AND to_regprocedure('awa.active_queue_storage_schema()') IS NOT NULL,
       EXISTS (SELECT 1 FROM pg_attribute WHERE attname = 'change_id' AND NOT attisdropped
               AND attrelid = (SELECT oid FROM pg_class WHERE relnamespace = to_regnamespace(%(ledger_schema)s)
                               AND relname = %(ledger_table_name)s)),
       ledger.owner, COALESCE(ledger.may_alter, false)
FROM (SELECT NULL) AS one
LEFT JOIN (SELECT pg_get_userbyid(relowner) AS owner, pg_has_role(relowner, 'USAGE') AS may_alter FROM pg_class
           WHERE relnamespace = to_regnamespace(%(ledger_schema)s) AND relname = %(ledger_table_name)s) AS ledger ON true
"""

SCHEMA_VERSION_SQL = "SELECT max(version) FROM awa.schema_version"

AWA_DETAILS_SQL = """
SELECT s.state, s.current_engine, awa.active_queue_storage_schema(),
       to_regclass(quote_ident(COALESCE(awa.active_queue_storage_schema(), 'awa')) || '.queue_enqueue_heads') IS NOT NULL
FROM awa.storage_status() AS s
"""


def fetch_database_clock(conn) -> datetime.datetime:
    """The database's clock at the start of the current transaction (the clock the change ledger uses)."""
    return conn.execute("SELECT now()").fetchone()[0]


def fetch_installation(conn, roles: list[str], ledger_schema: str, ledger_table: str) -> Installation:
    """At most three statements: what exists, then (when Awa is there) its version and engine."""
    row = conn.execute(sql.SQL(INSTALLATION_SQL), {
        "roles": list(roles),
        "ledger_table_name": ledger_table,
        "ledger_schema": sql.Identifier(ledger_schema).as_string(conn),
    }).fetchone()
    (server_version_num, current_user, has_awa_schema, has_enqueue_shards, has_version_table, missing_roles,
     ledger_exists, can_create_ledger, can_write_ledger, creator_privileged, database, has_storage_functions,
     ledger_has_change_id, ledger_owner, can_alter_ledger) = row
    found = Installation(
        server_version_num=server_version_num, current_user=current_user, has_awa_schema=has_awa_schema,
        has_enqueue_shards=has_enqueue_shards, missing_roles=list(missing_roles), ledger_exists=ledger_exists,
        can_create_ledger=can_create_ledger, can_write_ledger=can_write_ledger,
        roles_with_creator_privileges=list(creator_privileged), database=database,
        ledger_has_change_id=ledger_has_change_id, ledger_owner=ledger_owner, can_alter_ledger=can_alter_ledger)
    if has_version_table:
        found.schema_version = conn.execute(SCHEMA_VERSION_SQL).fetchone()[0]
    if has_storage_functions:
        details = conn.execute(sql.SQL(AWA_DETAILS_SQL)).fetchone()
        found.storage_state, found.storage_engine, found.queue_storage_schema = details[:3]
        found.has_queue_storage_tables = details[3]
    return found


# ---------------------------------------------------------------------------
# Which physical queues exist for a logical queue


QUEUE_NAMES_SQL = """
SELECT DISTINCT queue FROM (
    SELECT queue FROM {lanes} UNION ALL SELECT queue FROM {heads} UNION ALL SELECT queue FROM awa.queue_meta
) AS known
WHERE queue = %(queue)s OR left(queue, %(prefix_length)s) = %(prefix)s
"""


def fetch_known_queue_names(conn, schema: str, logical: str) -> list[str]:
    """Every stored queue name that is ``logical`` or starts with ``logical#``."""
    prefix = logical + STRIPE_DELIMITER
    rows = conn.execute(sql.SQL(QUEUE_NAMES_SQL).format(
        lanes=sql.Identifier(schema, "queue_lanes"), heads=sql.Identifier(schema, "queue_enqueue_heads")),
        {"queue": logical, "prefix": prefix, "prefix_length": len(prefix)}).fetchall()
    return sorted(row[0] for row in rows)


# ---------------------------------------------------------------------------
# Shard counts and lanes of physical queues


@dataclass
class LaneState:
    """One lane (queue, priority, shard) and the health of its objects."""

    queue: str
    priority: int
    shard: int
    has_lane_row: bool
    has_enqueue_head: bool
    has_claim_head: bool
    enqueue_seq: str
    claim_seq: str
    has_enqueue_seq: bool
    has_claim_seq: bool
    head_names_ok: bool
    enqueue_seq_owner: str | None
    claim_seq_owner: str | None
    # (role, privilege, sequence) the runtime roles lack.
    missing_privileges: list[tuple[str, str, str]]
    # Whether the connected role may GRANT on both sequences (owner or member of the owner).
    grantable: bool

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.queue, self.priority, self.shard)

    @property
    def complete(self) -> bool:
        return (self.has_lane_row and self.has_enqueue_head and self.has_claim_head
                and self.has_enqueue_seq and self.has_claim_seq and self.head_names_ok)

    @property
    def heads_exist(self) -> bool:
        return self.has_enqueue_head and self.has_claim_head


@dataclass
class QueueState:
    """Shard counts (queue_meta) and every relevant lane of some physical queues."""

    enqueue_shards: dict[str, int]
    lanes: list[LaneState]
    # Physical queues paused with `awa queue pause` (their workers claim nothing).
    paused: frozenset = frozenset()

    def lanes_of(self, queue: str) -> list[LaneState]:
        return [lane for lane in self.lanes if lane.queue == queue]


LANE_STATE_SQL = """
WITH schema_oid AS (
    SELECT oid FROM pg_namespace WHERE nspname = %(schema)s
), enqueue_heads AS MATERIALIZED (
    SELECT queue, priority, enqueue_shard, seq_name FROM {enqueue_heads} WHERE queue = ANY(%(queues)s)
), claim_heads AS MATERIALIZED (
    SELECT queue, priority, enqueue_shard, seq_name FROM {claim_heads} WHERE queue = ANY(%(queues)s)
), lanes AS (
    SELECT q.queue, p::smallint AS priority, s::smallint AS enqueue_shard
    FROM unnest(%(queues)s::text[], %(shards)s::int[]) AS q(queue, shards), unnest(%(priorities)s::int[]) AS p,
         generate_series(0, q.shards - 1) AS s
    UNION SELECT queue, priority, enqueue_shard FROM enqueue_heads
    UNION SELECT queue, priority, enqueue_shard FROM claim_heads
), named AS MATERIALIZED (
    -- Awa's own name function, called once per lane and sequence.
    SELECT l.*,
           {name_fn}('queue_enqueue_seq', l.queue, l.priority, l.enqueue_shard) AS enqueue_seq,
           {name_fn}('queue_claim_seq', l.queue, l.priority, l.enqueue_shard) AS claim_seq
    FROM lanes AS l
), resolved AS (
    SELECT n.*,
           (ql.queue IS NOT NULL) AS has_lane_row,
           (eh.queue IS NOT NULL) AS has_enqueue_head,
           (ch.queue IS NOT NULL) AS has_claim_head,
           (eh.seq_name IS NOT DISTINCT FROM n.enqueue_seq OR eh.queue IS NULL)
             AND (ch.seq_name IS NOT DISTINCT FROM n.claim_seq OR ch.queue IS NULL) AS head_names_ok,
           es.oid AS enqueue_oid, cs.oid AS claim_oid, es.relowner AS enqueue_owner, cs.relowner AS claim_owner
    FROM named AS n
    LEFT JOIN (SELECT queue, priority FROM {lane_rows} WHERE queue = ANY(%(queues)s)) AS ql
           ON ql.queue = n.queue AND ql.priority = n.priority
    LEFT JOIN enqueue_heads AS eh
           ON eh.queue = n.queue AND eh.priority = n.priority AND eh.enqueue_shard = n.enqueue_shard
    LEFT JOIN claim_heads AS ch
           ON ch.queue = n.queue AND ch.priority = n.priority AND ch.enqueue_shard = n.enqueue_shard
    -- One index lookup per sequence (OFFSET 0 keeps it a lookup): never a scan of every sequence in the schema.
    LEFT JOIN LATERAL (SELECT c.oid, c.relowner FROM pg_class AS c
                       WHERE c.relname = n.enqueue_seq AND c.relnamespace = (SELECT oid FROM schema_oid)
                       OFFSET 0) AS es ON true
    LEFT JOIN LATERAL (SELECT c.oid, c.relowner FROM pg_class AS c
                       WHERE c.relname = n.claim_seq AND c.relnamespace = (SELECT oid FROM schema_oid)
                       OFFSET 0) AS cs ON true
)
SELECT queue, priority, enqueue_shard, has_lane_row, has_enqueue_head, has_claim_head,
       enqueue_seq, claim_seq, enqueue_oid IS NOT NULL, claim_oid IS NOT NULL, head_names_ok,
       pg_get_userbyid(enqueue_owner), pg_get_userbyid(claim_owner),
       ARRAY(SELECT ARRAY[r, priv, seq.name]
             FROM unnest(%(roles)s::text[]) AS r, unnest(%(privileges)s::text[]) AS priv,
                  (VALUES (enqueue_oid, enqueue_seq), (claim_oid, claim_seq)) AS seq(oid, name)
             WHERE seq.oid IS NOT NULL AND NOT has_sequence_privilege(r, seq.oid, priv)
             ORDER BY r, seq.name, priv),
       (enqueue_oid IS NULL OR pg_has_role(enqueue_owner, 'USAGE'))
         AND (claim_oid IS NULL OR pg_has_role(claim_owner, 'USAGE'))
FROM resolved
ORDER BY queue, priority, enqueue_shard
"""

META_SQL = """
SELECT q, m.enqueue_shards, COALESCE(m.paused, false)
FROM unnest(%(queues)s::text[]) AS q LEFT JOIN awa.queue_meta AS m ON m.queue = q
"""


def fetch_queue_state(conn, schema: str, queues: list[str], roles: list[str],
                      shards: int | None = None) -> QueueState:
    """queue_meta rows and lanes of ``queues``: lanes 1..4 x [0, S) plus every existing lane.

    S is ``shards`` when given (a planned count), else each queue's current
    count. Two statements, whatever the number of queues and lanes.
    """
    meta = conn.execute(META_SQL, {"queues": queues}).fetchall()
    # No row means 1 (Awa's readers COALESCE it).
    current = {queue: (value or 1) for queue, value, dummy in meta}
    rows = conn.execute(sql.SQL(LANE_STATE_SQL).format(
        enqueue_heads=sql.Identifier(schema, "queue_enqueue_heads"),
        claim_heads=sql.Identifier(schema, "queue_claim_heads"),
        lane_rows=sql.Identifier(schema, "queue_lanes"),
        name_fn=sql.Identifier(schema, "queue_lane_sequence_name"),
    ), {"queues": list(queues), "shards": [shards or current[queue] for queue in queues],
        "priorities": list(PRIORITIES), "schema": schema, "roles": list(roles),
        "privileges": list(LANE_PRIVILEGES)}).fetchall()
    return QueueState(
        enqueue_shards=current,
        paused=frozenset(queue for queue, dummy, paused in meta if paused),
        lanes=[LaneState(*row[:13], missing_privileges=[tuple(triple) for triple in row[13]], grantable=row[14])
               for row in rows],
    )


# ---------------------------------------------------------------------------
# Every queue, for reports over all of them


ALL_QUEUE_NAMES_SQL = """
SELECT DISTINCT queue FROM (
    SELECT queue FROM {heads} UNION ALL SELECT queue FROM awa.queue_meta
) AS known ORDER BY queue
"""


def fetch_all_queue_names(conn, schema: str) -> list[str]:
    """Every queue name with lanes or a queue_meta row (physical names, q#n included)."""
    rows = conn.execute(sql.SQL(ALL_QUEUE_NAMES_SQL).format(heads=sql.Identifier(schema, "queue_enqueue_heads")))
    return [row[0] for row in rows.fetchall()]


# ---------------------------------------------------------------------------
# Ready depth and lag per lane (docs/awa-internals.md §9: the exact count Awa
# uses, never the stale next_seq - claim_seq columns)


@dataclass(frozen=True)
class LaneDepth:
    queue: str
    priority: int
    shard: int
    readable: bool
    seq_lag: int | None
    ready_depth: int | None
    oldest_ready_age_seconds: float | None


# Whether this role may read both sequences of the lane joined as h (enqueue head) and c (claim head): seqs.readable.
LANE_READABLE_JOINS = """
CROSS JOIN LATERAL (
    SELECT to_regclass(quote_ident(%(schema)s) || '.' || quote_ident(h.seq_name)) AS enqueue_oid,
           to_regclass(quote_ident(%(schema)s) || '.' || quote_ident(c.seq_name)) AS claim_oid
) AS oids
CROSS JOIN LATERAL (
    SELECT oids.enqueue_oid IS NOT NULL AND oids.claim_oid IS NOT NULL
           AND has_sequence_privilege(oids.enqueue_oid, 'SELECT')
           AND has_sequence_privilege(oids.claim_oid, 'SELECT') AS readable
) AS seqs
"""

LANE_DEPTH_SQL = """
SELECT h.queue, h.priority, h.enqueue_shard, seqs.readable,
       cursor.enqueue_next - cursor.claim_next,
       CASE WHEN NOT seqs.readable THEN NULL
            WHEN cursor.enqueue_next <= cursor.claim_next THEN 0
            ELSE ready.depth END,
       CASE WHEN seqs.readable AND cursor.enqueue_next > cursor.claim_next
            THEN greatest(0, extract(epoch FROM now() - ready.oldest_run_at))::float8 END
FROM {enqueue_heads} AS h
JOIN {claim_heads} AS c USING (queue, priority, enqueue_shard)
""" + LANE_READABLE_JOINS + """LEFT JOIN LATERAL (
    SELECT {next_value}(h.seq_name) AS enqueue_next, {next_value}(c.seq_name) AS claim_next
    WHERE seqs.readable
) AS cursor ON true
LEFT JOIN LATERAL (
    -- Only lanes whose enqueue cursor is ahead of the claim cursor can hold ready rows.
    SELECT count(*) AS depth, min(r.run_at) AS oldest_run_at
    FROM {ready_entries} AS r
    WHERE r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
      AND r.lane_seq >= cursor.claim_next
      AND NOT EXISTS (SELECT 1 FROM {ready_tombstones} AS t
                      WHERE t.queue = r.queue AND t.priority = r.priority AND t.enqueue_shard = r.enqueue_shard
                        AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot
                        AND t.ready_generation = r.ready_generation)
) AS ready ON seqs.readable AND cursor.enqueue_next > cursor.claim_next
WHERE h.queue = ANY(%(queues)s)
ORDER BY h.queue, h.priority, h.enqueue_shard
"""


def fetch_lane_depths(conn, schema: str, queues: list[str]) -> list[LaneDepth]:
    """Exact ready depth, sequence lag and oldest ready age of every lane of ``queues``.

    Lanes whose sequences the connected role cannot read are reported with
    ``readable=False`` and no numbers instead of failing the whole read.
    """
    rows = conn.execute(sql.SQL(LANE_DEPTH_SQL).format(
        enqueue_heads=sql.Identifier(schema, "queue_enqueue_heads"),
        claim_heads=sql.Identifier(schema, "queue_claim_heads"),
        ready_entries=sql.Identifier(schema, "ready_entries"),
        ready_tombstones=sql.Identifier(schema, "ready_tombstones"),
        next_value=sql.Identifier(schema, "sequence_next_value"),
    ), {"schema": schema, "queues": list(queues)}).fetchall()
    return [LaneDepth(*row) for row in rows]


# ---------------------------------------------------------------------------
# Runtimes


# Awa's own liveness rule for runtime rows (docs/awa-internals.md §5), by the database clock.
LIVE_RUNTIME_PREDICATE = """NOT ri.shutting_down
  AND ri.last_seen_at + make_interval(secs => GREATEST(((GREATEST(ri.snapshot_interval_ms, 1000) / 1000) * 3)::int, 30))
      >= now()"""


@dataclass(frozen=True)
class Runtime:
    """One ``awa.runtime_instances`` row, with liveness judged by the database clock."""

    instance_id: str
    hostname: str | None
    pid: int
    version: str
    started_at: datetime.datetime
    last_seen_at: datetime.datetime
    live: bool
    shutting_down: bool
    healthy: bool
    leader: bool
    seconds_since_seen: float
    seconds_since_start: float
    # physical queue -> shard count, when the snapshot reports one (no released Awa does yet).
    reported_shards: dict = field(default_factory=dict)


RUNTIMES_SQL = """
SELECT ri.instance_id::text, ri.hostname, ri.pid, ri.version, ri.started_at, ri.last_seen_at,
       {live} AS live, ri.shutting_down, ri.healthy, ri.leader,
       extract(epoch FROM now() - ri.last_seen_at)::float8,
       extract(epoch FROM now() - ri.started_at)::float8,
       ri.queues
FROM awa.runtime_instances AS ri
ORDER BY ri.started_at, ri.instance_id
"""


def reported_shard_counts(queues_snapshot: object) -> dict[str, int]:
    """Shard counts a runtime snapshot reports per queue, if its Awa version publishes them.

    Awa 0.6.9 snapshots carry none. A later version may add ``enqueue_shards``
    to a queue entry or to its ``config``; either is read.
    """
    reported = {}
    for entry in queues_snapshot if isinstance(queues_snapshot, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("queue"), str):
            continue
        config = entry.get("config") if isinstance(entry.get("config"), dict) else {}
        value = entry.get("enqueue_shards", config.get("enqueue_shards"))
        if isinstance(value, int) and not isinstance(value, bool):
            reported[entry["queue"]] = value
    return reported


def fetch_runtimes(conn) -> list[Runtime]:
    """Every runtime snapshot row, live or not."""
    rows = conn.execute(sql.SQL(RUNTIMES_SQL).format(live=sql.SQL(LIVE_RUNTIME_PREDICATE))).fetchall()
    return [Runtime(*row[:12], reported_shards=reported_shard_counts(row[12])) for row in rows]


# ---------------------------------------------------------------------------
# The change ledger


LATEST_CHANGES_SQL = """
SELECT DISTINCT ON (pq) c.id, pq, c.changed_at, (c.from_shards ->> pq)::int, c.to_shards,
       c.live_runtime_ids::text[], c.changed_by, c.reason
FROM {table} AS c, unnest(c.physical_queues) AS pq
WHERE c.physical_queues && %(queues)s::text[] AND pq = ANY(%(queues)s)
  AND (c.from_shards ->> pq)::int IS DISTINCT FROM c.to_shards
ORDER BY pq, c.id DESC
"""


def fetch_latest_changes(conn, ledger_schema: str, physical_queues: list[str]) -> dict[str, RecordedChange]:
    """physical queue -> its latest recorded shard-count switch (queues never switched are absent)."""
    rows = conn.execute(sql.SQL(LATEST_CHANGES_SQL).format(table=sql.Identifier(ledger_schema, LEDGER_TABLE)),
                        {"queues": physical_queues}).fetchall()
    return {row[1]: RecordedChange(row[0], row[1], row[2], row[3], row[4], frozenset(row[5]), row[6], row[7])
            for row in rows}


# A ledger row by the change id the client gave it, or by the transaction that wrote it. The table and the
# column are looked up first: a failover target (or a lost first change) may have neither.
LEDGER_COLUMN_SQL = """
SELECT EXISTS (SELECT 1 FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
               JOIN pg_namespace AS n ON n.oid = c.relnamespace
               WHERE n.nspname = %(schema)s AND c.relname = %(table)s AND a.attname = %(column)s AND NOT a.attisdropped)
"""
RECORDED_CHANGE_SQL = "SELECT id, changed_at, cardinality(live_runtime_ids) FROM {table} WHERE {column} = CAST(%(value)s AS {type})"
LEDGER_LOOKUP_TYPES = {"change_id": "uuid", "transaction_id": "xid8"}


def fetch_recorded_change(conn, ledger_schema: str, column: str, value: str) -> tuple | None:
    """(id, changed_at, live runtimes) of the ledger row whose ``column`` (change_id or transaction_id) is ``value``."""
    if not conn.execute(LEDGER_COLUMN_SQL, {"schema": ledger_schema, "table": LEDGER_TABLE, "column": column}).fetchone()[0]:
        return None
    return conn.execute(sql.SQL(RECORDED_CHANGE_SQL).format(
        table=sql.Identifier(ledger_schema, LEDGER_TABLE), column=sql.Identifier(column),
        type=sql.SQL(LEDGER_LOOKUP_TYPES[column])), {"value": value}).fetchone()


# ---------------------------------------------------------------------------
# The transaction itself, and other sessions


@dataclass(frozen=True)
class TransactionIdentity:
    """A transaction id and the server history it belongs to (a promoted standby starts a new timeline)."""

    transaction_id: str
    system_identifier: str
    timeline: str | None  # None on a standby


# The timeline is the first part of the current WAL file name (pg_walfile_name refuses to run on a standby).
SERVER_HISTORY_SQL = """(SELECT system_identifier FROM pg_control_system())::text,
       CASE WHEN pg_is_in_recovery() THEN NULL ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END"""
TRANSACTION_IDENTITY_SQL = "SELECT pg_current_xact_id()::text, " + SERVER_HISTORY_SQL
# pg_xact_status raises for an id this server has not assigned yet: that is asked first (NULL then).
TRANSACTION_STATUS_SQL = "SELECT " + SERVER_HISTORY_SQL + """,
       CASE WHEN CAST(%(xid)s AS xid8) < pg_snapshot_xmax(pg_current_snapshot())
            THEN pg_xact_status(CAST(%(xid)s AS xid8)) END"""


def fetch_transaction_identity(conn) -> TransactionIdentity:
    """The current transaction's id (assigning one) and the server history it runs on."""
    return TransactionIdentity(*conn.execute(TRANSACTION_IDENTITY_SQL).fetchone())


def fetch_transaction_status(conn, identity: TransactionIdentity) -> str | None:
    """pg_xact_status of ``identity``'s transaction ('committed', 'aborted', 'in progress'), read on this server.

    None when this server cannot tell: it runs another history (another
    system, another timeline after a failover, a standby), has not assigned
    that id, or no longer keeps its status.
    """
    system_identifier, timeline, status = conn.execute(
        TRANSACTION_STATUS_SQL, {"xid": identity.transaction_id}).fetchone()
    same_history = (system_identifier, timeline) == (identity.system_identifier, identity.timeline)
    return status if same_history and timeline is not None else None


ASSIGNED_TRANSACTION_ID_SQL = "SELECT pg_current_xact_id_if_assigned()"


def fetch_assigned_transaction_id(conn) -> int | None:
    """The current transaction's id, or None while it has written nothing (reading assigns none)."""
    value = conn.execute(ASSIGNED_TRANSACTION_ID_SQL).fetchone()[0]
    return None if value is None else int(value)


# Sessions that can hold up our statements: writers of awa.queue_meta, holders of advisory
# locks (our per-queue lock, Awa's lane locks), and DDL (locks that conflict with reads or
# writes) on relations of the Awa and ledger schemas, for example a running `awa migrate`.
LOCK_HOLDERS_SQL = """
SELECT a.pid, a.usename, a.application_name, a.state,
       round(extract(epoch FROM now() - a.xact_start))::int,
       left(regexp_replace(coalesce(a.query, ''), '\\s+', ' ', 'g'), 120)
FROM pg_stat_activity AS a
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL
  AND EXISTS (
      SELECT 1 FROM pg_locks AS l LEFT JOIN pg_class AS c ON l.locktype = 'relation' AND c.oid = l.relation
      WHERE l.pid = a.pid AND l.granted
        AND (l.locktype = 'advisory'
             OR (c.oid = to_regclass('awa.queue_meta') AND l.mode <> 'AccessShareLock')
             OR (c.relnamespace IN (SELECT oid FROM pg_namespace WHERE nspname = ANY(%(schemas)s::text[]))
                 AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock'))))
ORDER BY a.xact_start
LIMIT 5
"""


def describe_lock_holders(conn, schemas: list[str]) -> str:
    """Who holds locks that can hold up our statements on ``schemas`` (for a lock-timeout message)."""
    rows = conn.execute(LOCK_HOLDERS_SQL, {"schemas": list(schemas)}).fetchall()
    if not rows:
        return "No session holding such a lock is visible any more."
    holders = "; ".join(
        f"pid {pid} (user {user}, application {app or '-'}, {state}, transaction open {age}s: {query!r})"
        for pid, user, app, state, age, query in rows)
    return (f"Sessions that may hold it (writers of awa.queue_meta, advisory locks, DDL in schemas "
            f"{', '.join(schemas)}): {holders}.")
