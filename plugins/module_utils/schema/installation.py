# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is installed, and who we are: the first read of every run, and whether we can act on it.

The schema package holds the reads that more than one step makes (a read
only one step makes lives with that step: info/health.py,
advice/load_window.py). Every function of the package runs a fixed number
of statements, whatever the number of queues, stripes or lanes involved
(set-based SQL, no per-lane round trips), in the caller's transaction
(``db.connection.transaction``). They take only ACCESS SHARE locks (tables,
lane sequences), which wait behind DDL only. ``change.writes`` has the SQL
that writes. The Awa facts they rely on are in docs/awa-internals.md.

``check_installation`` takes what ``fetch_installation`` found and either
refuses (``PreconditionFailed``, saying what to do) or returns what it
resolved: the change and the read both start with it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection, one_row, sql
from ansible_collections.awa.operations.plugins.module_utils.errors import PreconditionFailed


@dataclass
class Installation:
    """What is installed, and who we are. Plain data, its first fields in INSTALLATION_SQL's column order."""

    server_version_num: int
    current_user: str
    has_awa_schema: bool
    has_enqueue_shards: bool = False
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
    has_queue_storage_tables: bool = False
    schema_version: int | None = None
    storage_state: str | None = None
    storage_engine: str | None = None
    queue_storage_schema: str | None = None


# The ledger's columns read its pg_class row (joined as ledger): catalog lookups, not to_regclass, which raises
# without USAGE on the ledger schema. The last two columns say which of the next statements to run.
INSTALLATION_SQL = """
SELECT current_setting('server_version_num')::int,
       current_user::text,
       to_regnamespace('awa') IS NOT NULL,
       EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = to_regclass('awa.queue_meta') AND attname = 'enqueue_shards' AND NOT attisdropped),
       ARRAY(SELECT r FROM unnest(%(roles)s::text[]) AS r WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r)),
       ledger.oid IS NOT NULL,
       CASE WHEN to_regnamespace(%(ledger_schema)s) IS NULL THEN has_database_privilege(current_database(), 'CREATE')
            ELSE has_schema_privilege(to_regnamespace(%(ledger_schema)s), 'CREATE') END,
       COALESCE(has_schema_privilege(to_regnamespace(%(ledger_schema)s), 'USAGE')
                AND has_table_privilege(ledger.oid, 'INSERT'), false),
       ARRAY(SELECT r FROM unnest(%(roles)s::text[]) AS r JOIN pg_roles AS pr ON pr.rolname = r
             WHERE pr.rolsuper OR pg_has_role(r, current_user, 'USAGE')),
       current_database()::text,
       EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = ledger.oid AND attname = 'change_id' AND NOT attisdropped),
       ledger.owner, COALESCE(ledger.may_alter, false),
       to_regclass('awa.schema_version') IS NOT NULL,
       to_regprocedure('awa.storage_status()') IS NOT NULL
         AND to_regprocedure('awa.active_queue_storage_schema()') IS NOT NULL
FROM (SELECT NULL) AS one
LEFT JOIN (SELECT oid, pg_get_userbyid(relowner) AS owner, pg_has_role(relowner, 'USAGE') AS may_alter
           FROM pg_class WHERE relnamespace = to_regnamespace(%(ledger_schema)s) AND relname = %(ledger_table_name)s) AS ledger ON true
"""

SCHEMA_VERSION_SQL = "SELECT max(version) FROM awa.schema_version"

AWA_DETAILS_SQL = """
SELECT s.state, s.current_engine, awa.active_queue_storage_schema(),
       to_regclass(quote_ident(COALESCE(awa.active_queue_storage_schema(), 'awa')) || '.queue_enqueue_heads') IS NOT NULL
FROM awa.storage_status() AS s
"""


def fetch_database_clock(conn: Connection) -> datetime.datetime:
    """The database's clock at the start of the current transaction (the clock the change ledger uses)."""
    clock: datetime.datetime = one_row(conn.execute("SELECT now()"))[0]
    return clock


def fetch_installation(conn: Connection, roles: list[str], ledger_schema: str, ledger_table: str) -> Installation:
    """At most three statements: what exists, then (when Awa is there) its version and engine."""
    *fields, has_version_table, has_storage_functions = one_row(conn.execute(sql.SQL(INSTALLATION_SQL), {
        "roles": list(roles), "ledger_table_name": ledger_table,
        "ledger_schema": sql.Identifier(ledger_schema).as_string(conn)}))
    found = Installation(*fields)
    if has_version_table:
        found.schema_version = one_row(conn.execute(SCHEMA_VERSION_SQL))[0]
    if has_storage_functions:
        (found.storage_state, found.storage_engine, found.queue_storage_schema,
         found.has_queue_storage_tables) = one_row(conn.execute(sql.SQL(AWA_DETAILS_SQL)))
    return found


STORAGE_SCHEMA_SQL = "SELECT awa.active_queue_storage_schema()"


def fetch_queue_storage_schema(conn: Connection) -> str | None:
    """The schema of the active queue storage (None while queue storage is not the active engine)."""
    schema: str | None = one_row(conn.execute(STORAGE_SCHEMA_SQL))[0]
    return schema


# Awa schema versions (max(awa.schema_version.version)) of the releases this collection
# is tested with (docs/awa-internals.md §10): 39 = awa 0.6.0 and 0.6.1, 40 = 0.6.2 .. 0.6.9.
TESTED_SCHEMA_VERSIONS = (39, 40)
MIN_SERVER_VERSION_NUM = 170000


def check_installation(found: Installation, runtime_roles: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """Refuse an installation we cannot safely change (or whose queue-storage engine is not active); return the
    schema of the active queue-storage engine and the warnings otherwise."""
    where = f"database {found.database!r}"
    if not found.has_awa_schema:
        raise PreconditionFailed(
            f"{where} has no Awa schema 'awa'. Check login_db, or install Awa there with `awa migrate` "
            "(awa-cli 0.6.8 or newer).")
    if not found.has_enqueue_shards or not found.has_queue_storage_tables:
        version = found.schema_version if found.schema_version is not None else "unknown"
        raise PreconditionFailed(
            f"The Awa schema in {where} (schema version {version}) has no enqueue shards "
            "(awa.queue_meta.enqueue_shards and the queue-storage lane tables arrived with Awa 0.6.0). "
            "Upgrade Awa to 0.6.8 or 0.6.9 and run `awa migrate`, then retry.")
    if found.storage_state != "active" or found.storage_engine != "queue_storage" or not found.queue_storage_schema:
        raise PreconditionFailed(
            f"The queue-storage engine is not active in database {found.database!r} (state={found.storage_state}, "
            f"engine={found.storage_engine}); enqueue_shards only applies to queue storage. "
            "On a fresh database run `SELECT awa.storage_auto_finalize_if_fresh('awa')` or start a worker; "
            "on a database with canonical jobs use `awa storage prepare --engine queue_storage`, "
            "`awa storage enter-mixed-transition` and `awa storage finalize`.")
    missing = [role for role in runtime_roles if role in found.missing_roles]
    if missing:
        raise PreconditionFailed(
            f"runtime_roles do not exist in {where}'s cluster: {', '.join(missing)}. "
            "Create them (CREATE ROLE ... LOGIN) or correct the names.")
    untested = {f"Awa schema version {found.schema_version} is untested with this collection (tested: "
                f"{', '.join(map(str, TESTED_SCHEMA_VERSIONS))}, i.e. awa 0.6.x).":
                    found.schema_version not in TESTED_SCHEMA_VERSIONS,
                f"PostgreSQL {found.server_version_num // 10000} is untested; supported: 17 and 18.":
                    found.server_version_num < MIN_SERVER_VERSION_NUM}
    return found.queue_storage_schema, [warning for warning, applies in untested.items() if applies]
