# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The change ledger: one row per applied change, written in the change's own transaction - its table, its row,
how a change writes it and how it is read.

It is the audit trail (who, when, from, to) and the basis of the convergence
check: it records which runtime instances were running when the count
switched. The change writes it (``check_ledger`` plans how, the statements
below make it; ``change.writes`` runs them) and the read judges convergence
by it (``fetch_latest_changes``); a COMMIT whose connection was lost is looked
up in it (``fetch_recorded_change``). So it sits in the schema package, below both.
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from typing import Any, TypedDict

from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection, Statement, one_row, sql
from ansible_collections.awa.operations.plugins.module_utils.errors import PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.schema.installation import Installation
from ansible_collections.awa.operations.plugins.module_utils.schema.runtimes import LIVE_RUNTIME_PREDICATE


TABLE = "enqueue_shards_changes"
# The id the client gives each change (a UUID), so that a run whose COMMIT lost its connection can find its row.
# Ledgers created by awa.operations 0.1.0 lack the column until their owner adds it (with this unique index).
CHANGE_ID_COLUMN = "change_id"
CHANGE_ID_INDEX = f"{TABLE}_change_id_key"
# The transaction-local setting the ledger row reads its change id from (set with the queue lock), so that the
# statements a real run reports are the ones check mode predicts, whatever id the run was given.
CHANGE_ID_SETTING = "awa_operations.change_id"
# Serializes the first creation of the ledger by concurrent runs.
LEDGER_CREATE_LOCK_KEY = "awa.operations:ledger"


def lookup_query(schema: str, change_id: str) -> str:
    """The statement an operator runs to find a change by its id, for messages (never run: the id is a UUID we
    made, the schema name is quoted when it needs to be)."""
    shown = schema if re.fullmatch(r"[a-z_][a-z0-9_]*", schema) else '"' + schema.replace('"', '""') + '"'
    return f"SELECT id, changed_at, to_shards FROM {shown}.{TABLE} WHERE change_id = '{change_id}'"


class LedgerRow(TypedDict):
    """The change ledger's row written for a change (recorded_row)."""

    schema: str
    table: str
    id: int
    changed_at: str
    live_runtimes: int
    # None for a row of a 0.1.0 ledger the run may not alter (no change_id column).
    change_id: str | None


def recorded_row(schema: str, row: tuple[Any, ...], change_id: str | None) -> LedgerRow:
    """The ``ledger`` of a result: the row (id, changed_at, live runtimes) written for a change."""
    ledger_id, changed_at, live = row
    return {"schema": schema, "table": TABLE, "id": ledger_id, "changed_at": changed_at.isoformat(),
            "live_runtimes": live, "change_id": change_id}


@dataclass(frozen=True)
class RecordedChange:
    """The latest recorded switch of one physical queue's shard count."""

    id: int
    physical_queue: str
    changed_at: datetime.datetime  # database clock
    from_shards: int
    to_shards: int
    live_runtime_ids: frozenset[str]
    changed_by: str
    reason: str | None


@dataclass(frozen=True)
class LedgerPlan:
    """How a change writes its ledger row."""

    create: bool  # the ledger does not exist yet: create it
    add_change_id: bool  # a ledger of awa.operations 0.1.0, run by its owner: add the change_id column
    records_change_id: bool  # the row carries the change id (else a lost commit is looked up by transaction id)
    warnings: list[str]


def check_ledger(installation: Installation, ledger_schema: str, ledger_table: str) -> LedgerPlan:
    """Refuse a change whose ledger row could not be written (before writing anything); else say how to write it.

    A ledger created by awa.operations 0.1.0 lacks the change_id column. Its
    owner (or a member of the owning role) adds it in the change's own
    transaction; any other role cannot, so its rows carry no change id and it
    is told what the owner should run.
    """
    name = f"{ledger_schema}.{ledger_table}"
    who = installation.current_user
    if installation.ledger_exists and not installation.can_write_ledger:
        raise PreconditionFailed(
            f"The change ledger {name} exists but {who!r} cannot INSERT into it. "
            f"GRANT USAGE ON SCHEMA {ledger_schema} TO {who}; GRANT INSERT, SELECT ON {name} TO {who}; "
            "or set ledger: false to change without a record "
            "(convergence can then not be judged). Nothing was changed.")
    if not installation.ledger_exists and not installation.can_create_ledger:
        raise PreconditionFailed(
            f"The change ledger {name} does not exist and {who!r} may not create it. Either let an "
            f"administrator run this module once, or GRANT CREATE ON DATABASE {installation.database} TO {who} "
            f"(or CREATE ON SCHEMA {ledger_schema} if it exists); or set ledger: false to change without a "
            "record (convergence can then not be judged). Nothing was changed.")
    if not installation.ledger_exists or installation.ledger_has_change_id or installation.can_alter_ledger:
        return LedgerPlan(create=not installation.ledger_exists, records_change_id=True, warnings=[],
                          add_change_id=installation.ledger_exists and not installation.ledger_has_change_id)
    owner = installation.ledger_owner
    return LedgerPlan(create=False, add_change_id=False, records_change_id=False, warnings=[
        f"The change ledger {name} predates change ids (awa.operations 0.1.0) and {who!r} cannot add the column: "
        f"only its owner {owner!r} can. This change's row carries no change id, so a commit whose connection is "
        "lost is looked up by its transaction id, which is lost with a failover. Run the module once as "
        f"{owner!r} (it adds the column), or as {owner!r}: ALTER TABLE {name} ADD COLUMN change_id uuid; "
        f"CREATE UNIQUE INDEX {CHANGE_ID_INDEX} ON {name} (change_id);"])


LEDGER_DDL = """
SELECT pg_advisory_xact_lock(hashtextextended({lock_key}, 0));
-- CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema
-- exists; a role given only CREATE on a prepared schema must skip it.
SELECT set_config('awa_operations.ledger_schema', {schema_name}, true);
DO $ledger$
BEGIN
  IF to_regnamespace(quote_ident(current_setting('awa_operations.ledger_schema'))) IS NULL THEN
    EXECUTE format('CREATE SCHEMA %I', current_setting('awa_operations.ledger_schema'));
  END IF;
END
$ledger$;
CREATE TABLE IF NOT EXISTS {table} (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    queue text NOT NULL,
    physical_queues text[] NOT NULL,
    stripes integer NOT NULL,
    from_shards jsonb NOT NULL,
    to_shards smallint NOT NULL,
    lanes_created integer NOT NULL,
    grants_added integer NOT NULL,
    runtime_roles text[] NOT NULL,
    live_runtime_ids uuid[] NOT NULL,
    reason text,
    changed_by text NOT NULL DEFAULT current_user,
    login_user text NOT NULL DEFAULT session_user,
    client_addr inet DEFAULT inet_client_addr(),
    application_name text DEFAULT current_setting('application_name'),
    transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
    change_id uuid
);
CREATE INDEX IF NOT EXISTS {index} ON {table} USING gin (physical_queues);
CREATE UNIQUE INDEX IF NOT EXISTS {change_id_index} ON {table} (change_id);
COMMENT ON TABLE {table} IS 'awa.operations: every enqueue_shards change (awa_enqueue_shards module)';
"""

# A ledger created by awa.operations 0.1.0, run by its owner: the column and index the new DDL has. No default,
# so no rewrite; its ACCESS EXCLUSIVE lock on the ledger lasts until the change commits.
LEDGER_CHANGE_ID_DDL = """
SELECT pg_advisory_xact_lock(hashtextextended({lock_key}, 0));
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS change_id uuid;
CREATE UNIQUE INDEX IF NOT EXISTS {change_id_index} ON {table} (change_id);
"""


LEDGER_INSERT_SQL = """
INSERT INTO {table} (queue, physical_queues, stripes, from_shards, to_shards, lanes_created, grants_added,
                     runtime_roles, live_runtime_ids, reason{change_id_column})
SELECT CAST(%(queue)s AS text), %(physical_queues)s::text[], CAST(%(stripes)s AS int),
       CAST(%(previous_shards)s AS jsonb), CAST(%(shards)s AS smallint), CAST(%(lanes_created)s AS int),
       CAST(%(grants_added)s AS int), %(runtime_roles)s::text[],
       ARRAY(SELECT ri.instance_id FROM awa.runtime_instances AS ri WHERE {live} ORDER BY ri.instance_id),
       CAST(%(reason)s AS text){change_id_value}
RETURNING id, changed_at, cardinality(live_runtime_ids)
"""


def ledger_statements(schema: str, plan: LedgerPlan | None,
                      row: dict[str, Any]) -> tuple[Statement | None, Statement | None]:
    """What ``plan`` runs before the ledger row - the ledger (LEDGER_DDL), its change_id column alone
    (LEDGER_CHANGE_ID_DDL, which takes the names it holds of the others), or nothing - and the row of a change
    (``row``: LEDGER_INSERT_SQL's parameters); neither without a plan (ledger: false, or nothing changes).

    The row holds the runtime instances live at that moment (Awa's own liveness rule) and, unless the plan says it
    cannot (a ledger of awa.operations 0.1.0 that we may not alter has no such column), the change id the queue lock
    set.
    """
    if plan is None:
        return None, None
    ddl = Statement(sql.SQL(LEDGER_DDL if plan.create else LEDGER_CHANGE_ID_DDL).format(
        lock_key=sql.Literal(LEDGER_CREATE_LOCK_KEY), table=sql.Identifier(schema, TABLE),
        change_id_index=sql.Identifier(CHANGE_ID_INDEX), schema_name=sql.Literal(schema),
        index=sql.Identifier(f"{TABLE}_physical_queues_idx"))) if plan.create or plan.add_change_id else None
    return ddl, Statement(sql.SQL(LEDGER_INSERT_SQL).format(
        table=sql.Identifier(schema, TABLE), live=sql.SQL(LIVE_RUNTIME_PREDICATE),
        change_id_column=sql.SQL(", {}").format(sql.Identifier(CHANGE_ID_COLUMN)) if plan.records_change_id
        else sql.SQL(""), change_id_value=sql.SQL(", CAST(current_setting({}) AS uuid)").format(
            sql.Literal(CHANGE_ID_SETTING)) if plan.records_change_id else sql.SQL("")),
        {**row, "previous_shards": json.dumps(row["previous_shards"])})


LATEST_CHANGES_SQL = """
SELECT DISTINCT ON (pq) c.id, pq, c.changed_at, (c.from_shards ->> pq)::int, c.to_shards,
       c.live_runtime_ids::text[], c.changed_by, c.reason
FROM {table} AS c, unnest(c.physical_queues) AS pq
WHERE c.physical_queues && %(queues)s::text[] AND pq = ANY(%(queues)s)
  AND (c.from_shards ->> pq)::int IS DISTINCT FROM c.to_shards
ORDER BY pq, c.id DESC
"""


def fetch_latest_changes(conn: Connection, ledger_schema: str, physical_queues: list[str]) -> dict[str, RecordedChange]:
    """physical queue -> its latest recorded shard-count switch (queues never switched are absent)."""
    rows = conn.execute(sql.SQL(LATEST_CHANGES_SQL).format(table=sql.Identifier(ledger_schema, TABLE)),
                        {"queues": physical_queues}).fetchall()
    return {row[1]: RecordedChange(*(*row[:5], frozenset(row[5]), *row[6:])) for row in rows}


# A ledger row by the change id the client gave it, or by the transaction that wrote it. The table and the
# column are looked up first: a failover target (or a lost first change) may have neither.
LEDGER_COLUMN_SQL = """
SELECT EXISTS (SELECT 1 FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
               JOIN pg_namespace AS n ON n.oid = c.relnamespace
               WHERE n.nspname = %(schema)s AND c.relname = %(table)s AND a.attname = %(column)s AND NOT a.attisdropped)
"""
RECORDED_CHANGE_SQL = "SELECT id, changed_at, cardinality(live_runtime_ids) FROM {table} WHERE {column} = CAST(%(value)s AS {type})"
LEDGER_LOOKUP_TYPES = {"change_id": "uuid", "transaction_id": "xid8"}


def fetch_recorded_change(conn: Connection, ledger_schema: str, column: str, value: str) -> LedgerRow | None:
    """The ledger row whose ``column`` (change_id or transaction_id) is ``value``, as a result says it
    (recorded_row: its change id when it was found by it)."""
    if not one_row(conn.execute(LEDGER_COLUMN_SQL, {"schema": ledger_schema, "table": TABLE,
                                                    "column": column}))[0]:
        return None
    row = conn.execute(sql.SQL(RECORDED_CHANGE_SQL).format(
        table=sql.Identifier(ledger_schema, TABLE), column=sql.Identifier(column),
        type=sql.SQL(LEDGER_LOOKUP_TYPES[column])), {"value": value}).fetchone()
    return None if row is None else recorded_row(ledger_schema, row, value if column == CHANGE_ID_COLUMN else None)
