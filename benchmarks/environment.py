"""The machine and the servers a benchmark run measures on.

Every server is a real PostgreSQL (17 or 18, from the test bed's PyPI wheels)
started with ``durable=True``: fsync, synchronous_commit and full_page_writes
stay on, so commits cost what they cost in production on this disk.
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from awa_testbed.awadb import AwaDatabase, AwaDatabaseFactory
from awa_testbed.binaries import pg_version_string
from awa_testbed.pgserver import PgServer

# The settings that shape the numbers, read back from each server.
REPORTED_SETTINGS = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_level",
                     "wal_sync_method", "shared_buffers", "wal_buffers", "max_wal_size", "checkpoint_timeout",
                     "max_connections")


@dataclass
class BenchServer:
    """One durable server and the factory of fresh Awa databases on it."""

    major: int
    server: PgServer
    factory: AwaDatabaseFactory

    def fresh_database(self) -> AwaDatabase:
        return self.factory.create()

    def settings(self) -> dict[str, str]:
        with self.server.connect() as conn:
            rows = conn.execute("SELECT name, current_setting(name) FROM unnest(%s::text[]) AS name",
                                (list(REPORTED_SETTINGS),)).fetchall()
        return {**dict(rows), "package": pg_version_string(self.major)}


@contextlib.contextmanager
def durable_server(major: int) -> Iterator[BenchServer]:
    """A started durable server for the block; stopped and deleted afterwards."""
    server = PgServer(major, durable=True)
    server.start()
    try:
        yield BenchServer(major, server, AwaDatabaseFactory(server))
    finally:
        server.destroy()


@contextlib.contextmanager
def restarted_with(bench: BenchServer, settings: dict[str, object]) -> Iterator[None]:
    """The server restarted with ``settings`` for the block (on its command line, where the test bed's own
    settings are: ALTER SYSTEM would not override those), then restarted with its own again."""
    bench.server.restart(settings)
    try:
        yield
    finally:
        bench.server.restart({})


def connect(db: AwaDatabase, connection_class: type = psycopg.Connection) -> psycopg.Connection:
    """A superuser connection to ``db`` as the module opens one (autocommit off)."""
    return connection_class.connect(db.dsn(), application_name="awa.operations-benchmark")


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _disk(path: str) -> str:
    """Device, filesystem type and size of the file system that holds ``path``."""
    result = subprocess.run(["df", "-hT", path], capture_output=True, text=True, check=False)
    lines = result.stdout.splitlines()
    if result.returncode != 0 or len(lines) < 2:
        return "unknown"
    device, fstype, size = lines[1].split()[:3]
    return f"{device} {fstype} {size}"


def machine() -> dict:
    """What the numbers were measured on."""
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "disk_tmp": _disk("/tmp"),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_average_at_start": load_average(),
    }
