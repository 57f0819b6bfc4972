"""Databases with the real Awa schema, fresh for every test.

``awa migrate`` (awa-cli) runs once per server and Awa version into a template
database; each test then gets ``CREATE DATABASE ... TEMPLATE`` (fast). A fresh
0.6.9 database stays on the canonical engine after migrate (docs/awa-internals.md §1),
so the "active" templates also run ``awa.storage_auto_finalize_if_fresh``.
"""

from __future__ import annotations

import itertools
import os
import secrets
import subprocess
import threading
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from .binaries import awa_cli
from .pgserver import PgServer

DEFAULT_AWA_VERSION = "0.6.9"

# Bookkeeping for the test programs (producers record what they enqueued,
# workers what they ran). PUBLIC may write so least-privilege runtimes can too.
TESTBED_SCHEMA = """
CREATE SCHEMA testbed;
CREATE TABLE testbed.enqueued (
    tag text PRIMARY KEY, producer text NOT NULL, queue text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE testbed.completions (
    id bigserial PRIMARY KEY, tag text, job_id bigint NOT NULL, queue text NOT NULL, enqueue_shard smallint,
    worker text NOT NULL, pid integer NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE testbed.producer_errors (
    id bigserial PRIMARY KEY, producer text NOT NULL, error_type text NOT NULL, message text NOT NULL,
    retried boolean NOT NULL DEFAULT false, at timestamptz NOT NULL DEFAULT clock_timestamp());
GRANT USAGE ON SCHEMA testbed TO PUBLIC;
GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA testbed TO PUBLIC;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA testbed TO PUBLIC;
"""

_counter = itertools.count()


@dataclass
class AwaDatabase:
    """One database on ``server`` holding the Awa schema."""

    server: PgServer
    name: str
    awa_version: str
    roles: dict[str, "DbRole"] = field(default_factory=dict)

    def dsn(self, role: str | None = None) -> str:
        if role is None:
            return self.server.dsn(self.name)
        account = self.roles[role]
        return self.server.dsn(self.name, account.name, account.password)

    def url(self, role: str | None = None) -> str:
        if role is None:
            return self.server.url(self.name)
        account = self.roles[role]
        return self.server.url(self.name, account.name, account.password)

    def connect(self, role: str | None = None, **kwargs) -> psycopg.Connection:
        return psycopg.connect(self.dsn(role), autocommit=True, **kwargs)

    def query(self, statement: str | sql.Composable, params: tuple | dict | None = None) -> list[tuple]:
        """Run one statement as superuser and return all rows (empty for commands)."""
        with self.connect() as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []

    def scalar(self, statement: str | sql.Composable, params: tuple | dict | None = None):
        rows = self.query(statement, params)
        return rows[0][0] if rows else None

    def login_args(self, role: str | None = None) -> dict:
        """The awa.operations connection options for this database."""
        args = {"login_host": self.server.host, "login_port": self.server.port, "login_db": self.name}
        if role is None:
            args["login_user"] = "postgres"
        else:
            args.update(login_user=self.roles[role].name, login_password=self.roles[role].password)
        return args

    def setup_least_privilege(self, runtime_count: int = 2, awa_0_6_9_schema_create: bool = True,
                              migrator_in_runtime_roles: bool = False) -> None:
        """Roles as in Awa's docs/security.md: owner, migrator, runtime(s).

        Ownership of every object moves to the owner role (security.md §3) and
        the runtimes get exactly the documented grants (§4). Awa 0.6.9 also
        needs CREATE on the schema for its lane triggers (docs/awa-internals.md §7); that
        extra grant is made only when ``awa_0_6_9_schema_create`` is true.
        ``migrator_in_runtime_roles`` makes the migrator a member of each
        runtime role, as the runbook tells operators: it can then read and
        re-grant the lanes a runtime created lazily as its own role.
        """
        prefix = self.name
        owner = DbRole(f"{prefix}_owner", None)
        migrator = DbRole(f"{prefix}_migrator", secrets.token_urlsafe(12))
        runtimes = [DbRole(f"{prefix}_runtime{i + 1}", secrets.token_urlsafe(12)) for i in range(runtime_count)]
        with self.connect() as conn:
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(owner.name)))
            for account in (migrator, *runtimes):
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(account.name), sql.Literal(account.password)))
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(owner.name), sql.Identifier(migrator.name)))
            conn.execute(sql.SQL("GRANT CONNECT, TEMP ON DATABASE {} TO {}").format(
                sql.Identifier(self.name), sql.SQL(", ").join(sql.Identifier(r.name) for r in (migrator, *runtimes))))
            conn.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(self.name), sql.Identifier(owner.name)))
            conn.execute(sql.SQL(OWNERSHIP_TRANSFER).format(owner=sql.Literal(owner.name)))
            for runtime in runtimes:
                conn.execute(sql.SQL(RUNTIME_GRANTS).format(
                    runtime=sql.Identifier(runtime.name), owner=sql.Identifier(owner.name),
                    migrator=sql.Identifier(migrator.name)))
                if awa_0_6_9_schema_create:
                    conn.execute(sql.SQL("GRANT CREATE ON SCHEMA awa TO {}").format(sql.Identifier(runtime.name)))
                if migrator_in_runtime_roles:
                    conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(runtime.name),
                                                                  sql.Identifier(migrator.name)))
        self.roles["owner"] = owner
        self.roles["migrator"] = migrator
        for index, runtime in enumerate(runtimes):
            self.roles[f"runtime{index + 1}"] = runtime

    def drop(self) -> None:
        with self.server.connect() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name)))
            for account in self.roles.values():
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(account.name)))


@dataclass(frozen=True)
class DbRole:
    name: str
    password: str | None


# security.md §3, as one statement.
OWNERSHIP_TRANSFER = """
DO $transfer$
DECLARE r record;
BEGIN
  EXECUTE format('ALTER SCHEMA awa OWNER TO %I', {owner});
  FOR r IN SELECT c.relkind, c.oid::regclass AS obj FROM pg_class c
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'awa' AND c.relkind IN ('r', 'p', 'v', 'm', 'S') LOOP
    IF r.relkind = 'S' THEN
      EXECUTE format('ALTER SEQUENCE %s OWNER TO %I', r.obj, {owner});
    ELSE
      EXECUTE format('ALTER TABLE %s OWNER TO %I', r.obj, {owner});
    END IF;
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS func FROM pg_proc p
           JOIN pg_namespace n ON p.pronamespace = n.oid WHERE n.nspname = 'awa' LOOP
    EXECUTE format('ALTER FUNCTION %s OWNER TO %I', r.func, {owner});
  END LOOP;
  FOR r IN SELECT format('%I.%I', n.nspname, t.typname) AS typ FROM pg_type t
           JOIN pg_namespace n ON n.oid = t.typnamespace
           WHERE n.nspname = 'awa' AND t.typtype IN ('d', 'e') LOOP
    EXECUTE format('ALTER TYPE %s OWNER TO %I', r.typ, {owner});
  END LOOP;
END
$transfer$;
"""

# security.md §4, for one runtime role.
RUNTIME_GRANTS = """
GRANT USAGE ON SCHEMA awa TO {runtime};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA awa TO {runtime};
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA awa TO {runtime};
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA awa TO {runtime};
REVOKE EXECUTE ON FUNCTION awa.install_queue_storage_substrate(TEXT, INT, INT, INT, BOOLEAN) FROM {runtime};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA awa
  GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON TABLES TO {runtime};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA awa GRANT USAGE, SELECT ON SEQUENCES TO {runtime};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA awa GRANT EXECUTE ON FUNCTIONS TO {runtime};
ALTER DEFAULT PRIVILEGES FOR ROLE {migrator} IN SCHEMA awa
  GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON TABLES TO {runtime};
ALTER DEFAULT PRIVILEGES FOR ROLE {migrator} IN SCHEMA awa GRANT USAGE, SELECT ON SEQUENCES TO {runtime};
ALTER DEFAULT PRIVILEGES FOR ROLE {migrator} IN SCHEMA awa GRANT EXECUTE ON FUNCTIONS TO {runtime};
"""


class AwaDatabaseFactory:
    """Creates fresh Awa databases on one server from cached templates."""

    def __init__(self, server: PgServer) -> None:
        self.server = server
        self._templates: dict[tuple[str, bool], str] = {}
        self._lock = threading.Lock()

    def migrate(self, dbname: str, awa_version: str = DEFAULT_AWA_VERSION) -> str:
        """Run the real ``awa migrate`` of ``awa_version``; returns its output."""
        result = subprocess.run(
            [str(awa_cli(awa_version)), "--database-url", self.server.url(dbname), "migrate"],
            capture_output=True, text=True, check=False, env={**os.environ, "NO_COLOR": "1", "RUST_LOG": "warn"},
        )
        if result.returncode != 0:
            raise RuntimeError(f"awa migrate ({awa_version}) failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout + result.stderr

    def template(self, awa_version: str = DEFAULT_AWA_VERSION, activate: bool = True) -> str:
        key = (awa_version, activate)
        with self._lock:
            if key not in self._templates:
                name = f"awa_tpl_{awa_version.replace('.', '_')}_{'active' if activate else 'canonical'}"
                with self.server.connect() as conn:
                    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                self.migrate(name, awa_version)
                with self.server.connect(name) as conn:
                    if activate:
                        activated = conn.execute("SELECT awa.storage_auto_finalize_if_fresh('awa')").fetchone()[0]
                        if not activated:
                            raise RuntimeError("awa.storage_auto_finalize_if_fresh refused on a fresh database")
                    conn.execute(TESTBED_SCHEMA)
                self._templates[key] = name
            return self._templates[key]

    def create(self, awa_version: str = DEFAULT_AWA_VERSION, activate: bool = True,
               name: str | None = None) -> AwaDatabase:
        template = self.template(awa_version, activate)
        name = name or f"t{os.getpid()}_{next(_counter)}"
        # A fast server copies the template's files: the default (WAL_LOG) writes the whole database to the WAL
        # too, 20 MB a test kept until the next checkpoint - memory, where its files are (pgserver.scratch_folder).
        strategy = sql.SQL("") if self.server.durable else sql.SQL(" STRATEGY FILE_COPY")
        with self.server.connect() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}{}").format(
                sql.Identifier(name), sql.Identifier(template), strategy))
        return AwaDatabase(self.server, name, awa_version)

    def empty(self, name: str | None = None) -> AwaDatabase:
        """A database without any Awa schema (for refusal tests)."""
        name = name or f"t{os.getpid()}_{next(_counter)}"
        with self.server.connect() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return AwaDatabase(self.server, name, "none")
