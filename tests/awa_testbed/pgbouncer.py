"""A real PgBouncer (Debian's ``pgbouncer`` package, 1.18) in front of a test-bed PostgreSQL server.

It runs as the test bed's unprivileged OS user (tests/awa_testbed/osuser.py),
on a free loopback port, in transaction pooling with small pools
(``default_pool_size``), as managed PostgreSQL is usually reached. One
``[databases]`` entry, ``*``, forwards every database name to the server;
``pool(name, size=..., mode=...)`` adds an alias with its own pool size or
pool mode (a pool of one server connection, a statement pooler).

Authentication: SCRAM-SHA-256 with a generated ``auth_file`` holding each
role's SCRAM secret as the server stores it (``pg_authid.rolpassword``), never
a password. PgBouncer checks the client's proof against it and logs in to
PostgreSQL with the same secret (SCRAM pass-through), so the server's own
pg_hba.conf (scram-sha-256 from 127.0.0.1) still authenticates every role.
This needs no superuser in the pooler and no lookup function in each test
database, as ``auth_query`` would; a role created after start is added with
``allow(database)``, which rewrites the file and reloads PgBouncer (SIGHUP).

Started as our child, PgBouncer is asked by the kernel to stop when we die
(awa_testbed.lifecycle), so a killed test run takes it with it.

PgBouncer is installed with apt-get (as root) the first time it is needed;
``ensure_installed`` says what to do when that is not possible.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from . import lifecycle
from .awadb import AwaDatabase
from .binaries import CACHE_ROOT
from .osuser import OsIdentity, database_os_identity, run_as_kwargs
from .pgserver import PgServer, free_port
from .waiting import wait_until

PACKAGE = "pgbouncer"
# Debian installs it here; /usr/sbin is not on every user's PATH.
BINARY_CANDIDATES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
# The admin console's user (SHOW POOLS, SHOW SERVERS): a password of its own, only in the auth_file.
ADMIN_USER = "awa_pooler_admin"
DEFAULT_POOL_SIZE = 2
DEFAULT_QUERY_WAIT_TIMEOUT = 120  # PgBouncer's own default, seconds
RELOAD_LOGGED = "got SIGHUP, re-reading config"

CONFIG_TEMPLATE = """\
[databases]
{databases}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = scram-sha-256
auth_file = {base}/userlist.txt
admin_users = {admin}
pool_mode = transaction
default_pool_size = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 200
; How long a client may wait for a free server connection of its pool.
query_wait_timeout = {query_wait_timeout}
; LIFO (the default): a client gets the server connection released last, as in production.
server_round_robin = 0
logfile = {base}/pgbouncer.log
pidfile =
log_connections = 0
log_disconnections = 0
"""


class PoolerError(RuntimeError):
    """PgBouncer cannot be installed or started here; the message says what to do."""


def pgbouncer_binary() -> Path | None:
    found = shutil.which(PACKAGE)
    if found:
        return Path(found)
    return next((Path(path) for path in BINARY_CANDIDATES if os.access(path, os.X_OK)), None)


def _apt_get(*args: str) -> None:
    # Wait for dpkg's lock rather than fail when another apt-get runs on the machine.
    argv = ["apt-get", "-o", "DPkg::Lock::Timeout=300", *args]
    result = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
                            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        raise PoolerError(f"`{' '.join(argv)}` failed (exit {result.returncode}):\n{tail}")


def ensure_installed() -> Path:
    """The pgbouncer binary, installed from Debian's package with apt-get first if it is missing (needs root)."""
    binary = pgbouncer_binary()
    if binary:
        return binary
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise PoolerError("PgBouncer is not installed: the connection-pooler tests need Debian's pgbouncer package. "
                          "Install it as root (apt-get install pgbouncer), or run the tests as root on Debian or "
                          "Ubuntu, which installs it")
    # One installer at a time on this machine (pytest workers, other runs).
    with lifecycle.machine_lock(CACHE_ROOT / "pgbouncer-install.lock"):
        binary = pgbouncer_binary()
        if binary is None:
            _apt_get("update", "-qq")
            _apt_get("install", "-y", "-qq", "--no-install-recommends", PACKAGE)
            binary = pgbouncer_binary()
    if binary is None:
        raise PoolerError(f"apt-get installed {PACKAGE}, but no pgbouncer binary is in {', '.join(BINARY_CANDIDATES)}")
    return binary


def pgbouncer_version(binary: Path) -> str:
    """``PgBouncer 1.18.0``: the first line of ``pgbouncer --version``."""
    output = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True).stdout
    return output.splitlines()[0].strip()


@dataclass(frozen=True)
class PoolAlias:
    """A ``[databases]`` entry of its own: ``alias`` reaches ``dbname`` with this pool size and mode."""

    alias: str
    dbname: str
    size: int | None = None
    mode: str | None = None

    def line(self, server: PgServer) -> str:
        settings = [f"host={server.host}", f"port={server.port}", f"dbname={self.dbname}"]
        settings += [f"pool_size={self.size}"] if self.size is not None else []
        settings += [f"pool_mode={self.mode}"] if self.mode is not None else []
        return f"{self.alias} = {' '.join(settings)}"


class PgBouncer:
    """One PgBouncer process in a fresh folder under /tmp, in front of ``server``."""

    def __init__(self, server: PgServer, *, pool_size: int = DEFAULT_POOL_SIZE,
                 query_wait_timeout: int = DEFAULT_QUERY_WAIT_TIMEOUT) -> None:
        self.server = server
        self.pool_size = pool_size
        self.query_wait_timeout = query_wait_timeout
        self.binary = ensure_installed()
        self.identity: OsIdentity = database_os_identity()
        self.base_dir = Path(tempfile.mkdtemp(prefix=f"awa-pgbouncer{server.major}-"))
        self.host = "127.0.0.1"
        self.port: int | None = None
        self.admin_password = secrets.token_urlsafe(16)
        self._secrets: dict[str, str] = {}
        self._aliases: dict[str, PoolAlias] = {}
        self._process: subprocess.Popen | None = None

    # -- configuration ---------------------------------------------------
    def _write(self, name: str, text: str) -> None:
        """Write a file of the pooler's folder (0600, owned by the OS user that runs it)."""
        path = self.base_dir / name
        staging = path.with_suffix(".new")
        staging.write_text(text, encoding="utf-8")
        staging.chmod(0o600)
        if not self.identity.is_current_user:
            os.chown(staging, self.identity.uid, self.identity.gid)
        staging.replace(path)

    def _write_config(self) -> None:
        aliases = [alias.line(self.server) for alias in self._aliases.values()]
        databases = "\n".join([*aliases, f"* = host={self.server.host} port={self.server.port}"])
        self._write("pgbouncer.ini", CONFIG_TEMPLATE.format(
            databases=databases, port=self.port, base=self.base_dir, admin=ADMIN_USER, pool_size=self.pool_size,
            query_wait_timeout=self.query_wait_timeout))
        users = {ADMIN_USER: self.admin_password, **self._secrets}
        self._write("userlist.txt", "".join(f'"{name}" "{secret}"\n' for name, secret in sorted(users.items())))

    def allow(self, database: AwaDatabase) -> None:
        """Let every login role of ``database`` (those with a password) in, with its SCRAM secret."""
        names = [role.name for role in database.roles.values() if role.password is not None]
        self.allow_roles(names)

    def allow_roles(self, names: list[str]) -> None:
        """Copy the SCRAM secrets of ``names`` from the server into the auth_file and reload."""
        with self.server.connect() as conn:
            rows = conn.execute("SELECT rolname, rolpassword FROM pg_authid WHERE rolname = ANY(%s)",
                                (names,)).fetchall()
        missing = set(names) - {name for name, secret in rows if secret}
        if missing:
            raise PoolerError(f"roles without a password cannot log in through PgBouncer: {sorted(missing)}")
        self._secrets.update(dict(rows))
        self._reload()

    def pool(self, dbname: str, *, size: int | None = None, mode: str | None = None, alias: str | None = None) -> str:
        """An alias of ``dbname`` with its own pool (size, mode); returns the name clients connect to."""
        alias = alias or f"{dbname}_{mode or 'pool'}{size or ''}"
        self._aliases[alias] = PoolAlias(alias, dbname, size, mode)
        self._reload()
        return alias

    def _reload(self, timeout: float = 30.0) -> None:
        if self.port is None:
            return
        self._write_config()
        reloads = self._log_text().count(RELOAD_LOGGED)
        self._process.send_signal(signal.SIGHUP)
        # PgBouncer reloads in its one event loop, right after logging it: a console query sent later waits for it.
        wait_until(lambda: self._log_text().count(RELOAD_LOGGED) > reloads, timeout,
                   lambda: f"PgBouncer to reload its configuration\n{self.log()}", interval=0.02, error=PoolerError)
        self._wait_ready()

    # -- lifecycle -------------------------------------------------------
    def start(self, attempts: int = 5) -> None:
        self.base_dir.chmod(0o700)
        if not self.identity.is_current_user:
            os.chown(self.base_dir, self.identity.uid, self.identity.gid)
        last_error = ""
        for dummy in range(attempts):
            self.port = free_port()
            self._write_config()
            try:
                self._start_once()
                self._wait_ready()
                return
            except PoolerError as exc:
                last_error = str(exc)
                self.stop()
        raise PoolerError(f"PgBouncer did not start: {last_error}\n{self.log()}")

    def _start_once(self) -> None:
        self._process = subprocess.Popen(  # pylint: disable=consider-using-with
            [str(self.binary), str(self.base_dir / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cwd=self.base_dir,
            preexec_fn=lifecycle.die_with_parent(signal.SIGTERM),  # pylint: disable=subprocess-popen-preexec-fn
            **run_as_kwargs(self.identity),
        )

    def _wait_ready(self, timeout: float = 30.0) -> None:
        wait_until(self._console_answers, timeout, "PgBouncer's admin console", interval=0.05, error=PoolerError)

    def _console_answers(self) -> bool:
        if self._process.poll() is not None:
            raise PoolerError(f"pgbouncer exited with {self._process.returncode}")
        try:
            self.show("VERSION")
            return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        """SIGINT: PgBouncer's safe shutdown (it waits for no client); SIGKILL if it hangs."""
        if self._process is not None:
            lifecycle.terminate_pid(self._process.pid, signal.SIGINT, timeout=10)
            self._process.wait(timeout=10)
            self._process = None

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.base_dir, ignore_errors=True)

    # -- access ----------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def show(self, what: str) -> list[dict]:
        """``SHOW <what>`` on the admin console (simple query protocol, as PgBouncer requires)."""
        with psycopg.connect(host=self.host, port=self.port, dbname="pgbouncer", user=ADMIN_USER,
                             password=self.admin_password, autocommit=True, connect_timeout=2) as conn:
            cursor = psycopg.ClientCursor(conn)
            cursor.execute(sql.SQL("SHOW {}").format(sql.SQL(what)))
            names = [column.name for column in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

    def login_args(self, database: AwaDatabase, role: str, dbname: str | None = None) -> dict:
        """The awa.operations connection options of ``role`` through the pooler (to ``dbname``, an alias)."""
        account = database.roles[role]
        return {"login_host": self.host, "login_port": self.port, "login_db": dbname or database.name,
                "login_user": account.name, "login_password": account.password}

    def connect(self, database: AwaDatabase, role: str, dbname: str | None = None, **kwargs) -> psycopg.Connection:
        """A plain psycopg client of the pool, as ``role`` (psycopg's defaults otherwise)."""
        return client(self.login_args(database, role, dbname), **kwargs)

    def _log_text(self) -> str:
        try:
            return (self.base_dir / "pgbouncer.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def log(self, tail: int = 40) -> str:
        return "\n".join(self._log_text().splitlines()[-tail:])


def client(login: dict, **kwargs) -> psycopg.Connection:
    """A plain psycopg connection from awa.operations connection options (``login_*``)."""
    return psycopg.connect(host=login["login_host"], port=login["login_port"], dbname=login["login_db"],
                           user=login["login_user"], password=login["login_password"], **kwargs)


class PoolClients:
    """Other clients of one pool (the database and user of ``login``), each running short transactions in a loop
    until the block ends, so the pool's server connections go from client to client between transactions."""

    def __init__(self, login: dict, count: int = 3) -> None:
        self.login = login
        self.stop = threading.Event()
        self.server_pids: set[int] = set()
        self.transactions = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for dummy in range(count)]

    def _run(self) -> None:
        try:
            # A well-behaved client of a transaction pool: no server-side prepared statements.
            with client(self.login, prepare_threshold=None) as conn:
                while not self.stop.is_set():
                    with conn.transaction():
                        pid = conn.execute("SELECT pg_backend_pid() FROM pg_sleep(0.02)").fetchone()[0]
                    with self._lock:
                        self.server_pids.add(pid)
                        self.transactions += 1
        except psycopg.Error as exc:
            self.errors.append(str(exc))

    def __enter__(self) -> "PoolClients":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(10)
