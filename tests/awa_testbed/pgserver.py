"""Real PostgreSQL 17 / 18 servers on free TCP ports, run as an unprivileged user, optionally with TLS."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg
from psycopg import sql

from . import lifecycle
from .binaries import pg_bin_dir
from .osuser import OsIdentity, database_os_identity, run_as_kwargs
from .tls import ServerTls
from .waiting import wait_until

SUPERUSER = "postgres"

# Tests and the demo trade durability for speed; benchmarks keep it. No
# autovacuum either: tests compare the cluster's next transaction id to prove
# a run wrote nothing, and an automatic ANALYZE would take one.
FAST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "autovacuum": "off"}
COMMON_SETTINGS = {
    "max_connections": "300",
    "shared_buffers": "128MB",
    "log_min_messages": "warning",
    "log_line_prefix": "%m [%p] %u@%d ",
    "timezone": "UTC",
}

# Superuser connects without a password (test bed only); every other role
# must authenticate, so password handling is exercised for real.
PG_HBA = """\
local all all trust
host all postgres 127.0.0.1/32 trust
host all all 127.0.0.1/32 scram-sha-256
"""

# With replication: the superuser may also stream WAL over TCP (pg_basebackup, a standby's receiver).
PG_HBA_REPLICATION = "host replication postgres 127.0.0.1/32 trust\n"

# Members of this group log in with a client certificate whose CN is the role name.
CERT_LOGIN_GROUP = "awa_cert_login"

# With TLS: every other role must use TLS, with a password or (members of
# CERT_LOGIN_GROUP) a client certificate. The superuser keeps its plain TCP
# access, for the test bed's own setup (awa migrate) only.
PG_HBA_TLS = f"""\
local all all trust
host all postgres 127.0.0.1/32 trust
hostnossl all all 127.0.0.1/32 reject
hostssl all +{CERT_LOGIN_GROUP} 127.0.0.1/32 cert
hostssl all all 127.0.0.1/32 scram-sha-256
"""


# A memory filesystem holds the files of a server that trades durability for
# speed, when it has room: Awa's schema is 1,300 files a database, and on ext4
# creating a database after another was dropped cost a second of kernel time
# (its inode allocator steps over recently freed inodes), 0.1 s on tmpfs and
# 0.04 s copying the files (AwaDatabaseFactory.create); the runtimes' TRUNCATE
# rotations make and drop files the same way.
MEMORY_FOLDER = Path("/dev/shm")
MEMORY_FOLDER_MIN_FREE = 4 << 30


def scratch_folder(durable: bool) -> Path | None:
    """Where a new server's folder goes: MEMORY_FOLDER for a fast server when it has room, else the temp folder."""
    if durable:
        return None
    try:
        stats = os.statvfs(MEMORY_FOLDER)
    except OSError:
        return None
    roomy = stats.f_bavail * stats.f_frsize >= MEMORY_FOLDER_MIN_FREE
    return MEMORY_FOLDER if roomy and os.access(MEMORY_FOLDER, os.W_OK) else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PgServer:
    """One PostgreSQL cluster in a fresh folder (scratch_folder: /dev/shm or /tmp).

    ``start(detached=False)`` runs the postmaster as our child and asks the
    kernel to stop it (SIGQUIT) if we die. ``detached=True`` uses pg_ctl so
    the server outlives this process (molecule, demo); it is registered for
    ``python -m awa_testbed reap``.

    With ``tls``, the server runs with ``ssl=on`` and the certificates given,
    and its pg_hba.conf (PG_HBA_TLS) refuses connections without TLS. With
    ``replication``, the superuser may stream its WAL (awa_testbed.replication).
    """

    def __init__(self, major: int, *, durable: bool = False, base_dir: Path | None = None,
                 tls: ServerTls | None = None, replication: bool = False) -> None:
        self.major = major
        self.durable = durable
        self.tls = tls
        self.replication = replication
        self.bin_dir = pg_bin_dir(major)
        self.identity: OsIdentity = database_os_identity()
        self.base_dir = base_dir or Path(tempfile.mkdtemp(prefix=f"awa-pg{major}-", dir=scratch_folder(durable)))
        self.data_dir = self.base_dir / "data"
        self.socket_dir = self.base_dir / "socket"
        self.log_path = self.base_dir / "server.log"
        self.host = "127.0.0.1"
        self.port: int | None = None
        self._process: subprocess.Popen | None = None
        self.detached = False
        # Settings a restart was given, on the command line after the test bed's own (which ALTER SYSTEM cannot
        # override: the command line wins).
        self.overrides: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------
    def _run_as_db_user(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(argv, check=True, capture_output=True, text=True, cwd=self.base_dir,
                              **run_as_kwargs(self.identity), **kwargs)

    def _make_dirs(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.base_dir.chmod(0o700)
        self.socket_dir.mkdir(exist_ok=True)
        if not self.identity.is_current_user:
            for path in (self.base_dir, self.socket_dir):
                os.chown(path, self.identity.uid, self.identity.gid)

    def init(self) -> None:
        self._make_dirs()
        try:
            self._run_as_db_user([
                str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER,
                "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync",
            ])
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"initdb of PostgreSQL {self.major} in {self.data_dir}, run as {self.identity.name} "
                               f"(uid {self.identity.uid}), exited {exc.returncode}: {exc.stderr.strip()}") from None
        hba = PG_HBA_TLS if self.tls else PG_HBA
        self._write_as_db_user(self.data_dir / "pg_hba.conf", hba + (PG_HBA_REPLICATION if self.replication else ""))
        if self.tls:
            # The server reads these as the database user, and refuses a key others can read.
            for name, source in (("server.crt", self.tls.cert), ("server.key", self.tls.key),
                                 ("client_ca.crt", self.tls.client_ca)):
                self._write_as_db_user(self.data_dir / name, source.read_text(encoding="utf-8"))

    def init_standby_of(self, source: "PgServer") -> None:
        """This server's data as a streaming standby of ``source`` (pg_basebackup -R; start() starts it)."""
        self._make_dirs()
        self._run_as_db_user([
            str(self.bin_dir / "pg_basebackup"), "-h", source.host, "-p", str(source.port), "-U", SUPERUSER,
            "-D", str(self.data_dir), "-R", "-X", "stream", "-c", "fast", "--no-sync",
        ])
        # pg_basebackup -R writes every option its libpq knows into primary_conninfo; PostgreSQL 18's includes
        # sslnegotiation, which the packaged 18 server's WAL receiver (linked to an older libpq) refuses. Name
        # only what the receiver needs.
        auto_conf = self.data_dir / "postgresql.auto.conf"
        kept = [line for line in auto_conf.read_text(encoding="utf-8").splitlines()
                if not line.startswith("primary_conninfo")]
        conninfo = f"host={source.host} port={source.port} user={SUPERUSER} application_name=standby"
        self._write_as_db_user(auto_conf, "\n".join(kept + [f"primary_conninfo = '{conninfo}'"]) + "\n")

    def promote(self) -> None:
        """End recovery: this standby becomes a primary (pg_ctl promote, waiting until it accepts writes)."""
        self._run_as_db_user([str(self.bin_dir / "pg_ctl"), "promote", "-D", str(self.data_dir), "-w", "-t", "60"])

    def _write_as_db_user(self, path: Path, text: str) -> None:
        """Write ``path`` (mode 0600) as the database user."""
        self._run_as_db_user(["/bin/sh", "-c", 'umask 077 && cat > "$1"', "sh", str(path)], input=text)

    def _tls_settings(self) -> dict[str, str]:
        if not self.tls:
            return {}
        return {"ssl": "on", "ssl_cert_file": "server.crt", "ssl_key_file": "server.key",
                "ssl_ca_file": "client_ca.crt"}

    def _server_options(self) -> list[str]:
        settings = {**COMMON_SETTINGS, **({} if self.durable else FAST_SETTINGS), **self._tls_settings(),
                    **self.overrides}
        options = ["-p", str(self.port), "-h", self.host, "-k", str(self.socket_dir)]
        for name, value in settings.items():
            options += ["-c", f"{name}={value}"]
        return options

    def start(self, *, detached: bool = False, attempts: int = 5) -> None:
        if not self.data_dir.exists():
            self.init()
        self.detached = detached
        last_error = ""
        for dummy in range(attempts):
            self.port = free_port()
            try:
                self._start_once()
                self._wait_ready()
                break
            except (RuntimeError, subprocess.CalledProcessError) as exc:
                last_error = getattr(exc, "stderr", None) or str(exc)
                self._kill_postmaster()
        else:
            raise RuntimeError(f"PostgreSQL {self.major} did not start: {last_error}\n{self.server_log()}")
        if self.tls:
            with self.connect() as conn:
                if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (CERT_LOGIN_GROUP,)).fetchone():
                    conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(CERT_LOGIN_GROUP)))
        if detached:
            lifecycle.register("pg", self.base_dir.name, self.describe())

    def _start_once(self) -> None:
        if self.detached:
            self._run_as_db_user([
                str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_path),
                # pg_ctl hands -o to a shell: quote each option.
                "-o", shlex.join(self._server_options()), "-w", "-t", "60", "start",
            ], stdin=subprocess.DEVNULL)
            return
        log = open(self.log_path, "ab")  # pylint: disable=consider-using-with
        if not self.identity.is_current_user:
            os.chown(self.log_path, self.identity.uid, self.identity.gid)
        self._process = subprocess.Popen(  # pylint: disable=consider-using-with
            [str(self.bin_dir / "postgres"), "-D", str(self.data_dir), *self._server_options()],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.base_dir,
            preexec_fn=lifecycle.die_with_parent(signal.SIGQUIT),  # pylint: disable=subprocess-popen-preexec-fn
            **run_as_kwargs(self.identity),
        )
        log.close()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        wait_until(self._accepts_connections, timeout, "the server to accept connections", error=RuntimeError)

    def _accepts_connections(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(f"postmaster exited with {self._process.returncode}")
        try:
            with psycopg.connect(self.dsn(), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
                return True
        except psycopg.OperationalError:
            return False

    def postmaster_pid(self) -> int | None:
        if self._process is not None and self._process.poll() is None:
            return self._process.pid
        try:
            return int((self.data_dir / "postmaster.pid").read_text(encoding="utf-8").split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _kill_postmaster(self) -> None:
        pid = self.postmaster_pid()
        if pid:
            lifecycle.terminate_pid(pid, signal.SIGQUIT, timeout=10)
        if self._process is not None:
            self._process.wait(timeout=10)
            self._process = None

    def stop(self, *, mode_signal: int = signal.SIGINT, timeout: float = 30.0) -> None:
        """Stop the server (fast shutdown by default), escalating if it hangs."""
        pid = self.postmaster_pid()
        if pid:
            lifecycle.terminate_pid(pid, mode_signal, timeout=timeout)
        if self._process is not None:
            self._process.wait(timeout=10)
            self._process = None

    def restart(self, overrides: dict[str, object] | None = None) -> None:
        """Stop and start on the same port (the data directory is kept); with ``overrides``, those settings from
        then on instead of the ones the last restart was given."""
        if overrides is not None:
            self.overrides = {name: str(value) for name, value in overrides.items()}
        self.stop()
        self._start_once()
        self._wait_ready()

    def destroy(self) -> None:
        """Stop the server and delete every file it had."""
        self.stop()
        lifecycle.unregister("pg", self.base_dir.name)
        shutil.rmtree(self.base_dir, ignore_errors=True)

    # -- access ----------------------------------------------------------
    def dsn(self, dbname: str = "postgres", user: str = SUPERUSER, password: str | None = None) -> str:
        parts = [f"host={self.host}", f"port={self.port}", f"dbname={dbname}", f"user={user}"]
        if password is not None:
            parts.append(f"password={password}")
        return " ".join(parts)

    def url(self, dbname: str = "postgres", user: str = SUPERUSER, password: str | None = None) -> str:
        """A postgres:// URL, the form awa-cli and awa-pg take."""
        from urllib.parse import quote  # pylint: disable=import-outside-toplevel
        auth = quote(user, safe="") + (f":{quote(password, safe='')}" if password is not None else "")
        return f"postgresql://{auth}@{self.host}:{self.port}/{quote(dbname, safe='')}"

    def connect(self, dbname: str = "postgres", **kwargs) -> psycopg.Connection:
        return psycopg.connect(self.dsn(dbname), autocommit=True, **kwargs)

    def version_num(self) -> int:
        with self.connect() as conn:
            return int(conn.execute("SHOW server_version_num").fetchone()[0])

    def server_log(self, tail: int = 60) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-tail:])

    def describe(self) -> dict:
        return {"major": self.major, "host": self.host, "port": self.port, "base_dir": str(self.base_dir),
                "bin_dir": str(self.bin_dir), "pid": self.postmaster_pid()}

    @classmethod
    def from_description(cls, record: dict) -> "PgServer":
        server = cls(record["major"], base_dir=Path(record["base_dir"]))
        server.port = record["port"]
        server.detached = True
        return server
