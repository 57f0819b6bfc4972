"""Worker runtimes and producers as separate, individually restartable OS processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from . import lifecycle
from .waiting import wait_until

TESTS_DIR = Path(__file__).resolve().parent.parent


def program_env(awa_pg: Path | None = None) -> dict[str, str]:
    """Environment for test-bed programs: our package (and ``awa_pg``, an older awa-pg, first) importable,
    no colour codes."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (awa_pg, TESTS_DIR, path) if p),
            "NO_COLOR": "1", "RUST_LOG": os.environ.get("RUST_LOG", "warn")}


class ManagedProcess:
    """One test-bed program (``python -m awa_testbed.<module>``) with a log file.

    Each start is a new OS process with a new pid; the log keeps the output of
    every incarnation so a failing test can show it.
    """

    def __init__(self, name: str, module: str, args: list[str], log_dir: Path | None = None,
                 awa_pg: Path | None = None) -> None:
        self.name = name
        self.module = module
        self.awa_pg = awa_pg
        self.argv = [sys.executable, "-m", f"awa_testbed.{module}", "--name", name, *args]
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="awa-testbed-logs-"))
        self.log_path = self.log_dir / f"{name}.log"
        self.ready_file = self.log_dir / f"{name}.ready"
        self._process: subprocess.Popen | None = None
        self.pids: list[int] = []

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, wait_ready: float = 30.0) -> "ManagedProcess":
        if self.running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.ready_file.unlink(missing_ok=True)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(  # pylint: disable=consider-using-with
                [*self.argv, "--ready-file", str(self.ready_file)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=program_env(self.awa_pg),
                preexec_fn=lifecycle.die_with_parent(signal.SIGTERM),  # pylint: disable=subprocess-popen-preexec-fn
            )
        self.pids.append(self._process.pid)
        if wait_ready:
            self.wait_ready(wait_ready)
        return self

    def wait_ready(self, timeout: float) -> None:
        wait_until(self._ready, timeout, lambda: f"{self.name} to be ready:\n{self.output()}", interval=0.05,
                   error=RuntimeError)

    def _ready(self) -> bool:
        if self.ready_file.exists():
            return True
        if not self.running():
            raise RuntimeError(f"{self.name} exited with {self._process.returncode}:\n{self.output()}")
        return False

    def stop(self, timeout: float = 20.0) -> int | None:
        """Graceful stop (SIGTERM), SIGKILL after ``timeout``; returns the exit code."""
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        return self._process.returncode

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to say goodbye."""
        if self.running():
            self._process.kill()
            self._process.wait(10)

    def restart(self) -> "ManagedProcess":
        self.stop()
        return self.start()

    def wait(self, timeout: float) -> int:
        return self._process.wait(timeout)

    def output(self, tail: int = 80) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-tail:])


def worker(name: str, url: str, queues: list[str], *, stripes: int = 1, handler_ms: int = 0,
           record_dsn: str | None = None, log_dir: Path | None = None, extra: list[str] | None = None,
           awa_pg: Path | None = None) -> ManagedProcess:
    args = ["--url", url, "--stripes", str(stripes), "--handler-ms", str(handler_ms)]
    for queue in queues:
        args += ["--queue", queue]
    if record_dsn:
        args += ["--record-dsn", record_dsn]
    return ManagedProcess(name, "worker", args + list(extra or []), log_dir, awa_pg)


def producer(name: str, url: str, queue: str, *, mode: str = "insert", rate: float = 50.0, batch: int = 1,
             count: int = 0, keyed: bool = False, scheduled_every: int = 0, stripes: int = 1,
             concurrency: int = 1, burst: int = 1, connections: int = 10, record_dsn: str | None = None,
             summary: Path | None = None, log_dir: Path | None = None, gate: Path | None = None,
             record_enqueued: bool = True, max_attempts: int = 25, awa_pg: Path | None = None) -> ManagedProcess:
    args = ["--url", url, "--queue", queue, "--mode", mode, "--rate", str(rate), "--batch", str(batch),
            "--count", str(count), "--scheduled-every", str(scheduled_every), "--stripes", str(stripes),
            "--concurrency", str(concurrency), "--burst", str(burst), "--connections", str(connections),
            "--max-attempts", str(max_attempts)]
    if keyed:
        args.append("--keyed")
    if record_dsn:
        args += ["--record-dsn", record_dsn]
    if summary:
        args += ["--summary", str(summary)]
    if gate:
        args += ["--gate", str(gate)]
    if not record_enqueued:
        args.append("--no-record-enqueued")
    return ManagedProcess(name, "producer", args, log_dir, awa_pg)
