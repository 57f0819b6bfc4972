"""A set of worker runtimes and producers started for one test, stopped together.

The programs use the awa-pg of the release whose ``awa migrate`` made the
database: the installed 0.6.9, or an older release hack/bootstrap.sh unpacked.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from . import processes
from .awadb import AwaDatabase
from .binaries import awa_pg_path
from .processes import ManagedProcess
from .terminal_tally import TerminalTally, read_tally
from .waiting import poll


class Fleet:
    """Starts real Awa programs against one database and tears them all down."""

    def __init__(self, db: AwaDatabase, log_dir: Path | None = None) -> None:
        self.db = db
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="awa-fleet-"))
        self.members: dict[str, ManagedProcess] = {}
        self.companions: list = []  # things with a stop() that run beside the programs, stopped before them

    def attach(self, companion):
        """Stop ``companion`` (anything with a ``stop()``) with the programs, before them."""
        self.companions.append(companion)
        return companion

    def _add(self, process: ManagedProcess, start: bool) -> ManagedProcess:
        if process.name in self.members:
            raise ValueError(f"{process.name} already exists in this fleet")
        self.members[process.name] = process
        return process.start() if start else process

    def worker(self, name: str, queues: list[str], *, role: str | None = None, start: bool = True,
               **kwargs) -> ManagedProcess:
        """A worker runtime serving ``queues`` (``"q"`` or ``"q=workers"``), as ``role`` if given."""
        return self._add(processes.worker(name, self.db.url(role), queues, record_dsn=self.db.dsn(),
                                          log_dir=self.log_dir, awa_pg=self._awa_pg(), **kwargs), start)

    def producer(self, name: str, queue: str, *, role: str | None = None, start: bool = True,
                 **kwargs) -> ManagedProcess:
        return self._add(processes.producer(name, self.db.url(role), queue, record_dsn=self.db.dsn(),
                                            log_dir=self.log_dir, awa_pg=self._awa_pg(), **kwargs), start)

    def _awa_pg(self) -> Path | None:
        """Programs are of the Awa release whose ``awa migrate`` made the database."""
        return awa_pg_path(self.db.awa_version)

    def stop_all(self) -> None:
        try:
            while self.companions:
                self.companions.pop().stop()
        finally:  # a companion that fails to stop must not leave the programs running
            # Producers first, so workers can finish what was enqueued.
            for process in sorted(self.members.values(), key=lambda p: p.module == "worker"):
                process.stop()

    def cleanup(self) -> None:
        """Stop everything and delete the log folder."""
        self.stop_all()
        shutil.rmtree(self.log_dir, ignore_errors=True)

    def logs(self) -> str:
        return "\n".join(f"----- {name} (pids {p.pids}) -----\n{p.output()}" for name, p in self.members.items())

    # -- what the programs recorded ---------------------------------------
    def enqueued_tags(self, queue: str | None = None) -> set[str]:
        rows = self.db.query("SELECT tag FROM testbed.enqueued WHERE %(q)s::text IS NULL OR queue = %(q)s",
                             {"q": queue})
        return {row[0] for row in rows}

    def producer_errors(self) -> list[tuple[str, str, str]]:
        """Calls that failed for good (a deadlock the producer retried is not one of them)."""
        return self.db.query(
            "SELECT producer, error_type, message FROM testbed.producer_errors WHERE NOT retried ORDER BY id")

    def retried_deadlocks(self) -> dict[str, int]:
        """producer -> how many of its calls PostgreSQL aborted to break a deadlock and it sent again."""
        return dict(self.db.query(
            "SELECT producer, count(*) FROM testbed.producer_errors WHERE retried GROUP BY 1 ORDER BY 1"))

    def completed_job_counts(self) -> dict[str, int]:
        """tag -> how many times a worker ran it to completion (exactly-once means all 1).

        Read from the workers' own records: queue storage prunes completed rows
        from ``awa.ready_entries`` when it rotates its ring (about every second),
        so ``awa.jobs`` forgets completed jobs almost at once.
        """
        rows = self.db.query("SELECT tag, count(*) FROM testbed.completions WHERE tag IS NOT NULL GROUP BY 1")
        return dict(rows)

    def awa_tally(self, queue: str) -> TerminalTally:
        """Finished jobs of ``queue`` (all its physical queues) by Awa's own exact count (terminal_tally.py).

        Queue storage prunes finished rows within seconds and keeps only
        counts of them, so Awa's tally is the only record of them in Awa.
        """
        return read_tally(self.db.dsn(), queue)

    def awa_tally_when_finished(self, queue: str, jobs: int, timeout: float = 60.0) -> TerminalTally:
        """Awa's tally of ``queue`` once it counts ``jobs`` finished jobs, or as it stands after ``timeout``.

        A worker's handler records its job (``testbed.completions``) before the
        runtime commits the completion, so Awa's tally may trail the records
        for a moment; it must then reach ``jobs`` exactly.
        """
        return poll(lambda: self.awa_tally(queue), lambda tally: tally.terminal >= jobs, timeout, interval=0.25)[1]

    def wait_all_completed(self, tags: set[str], timeout: float = 60.0) -> dict[str, int]:
        """Poll until every tag has a completed job; returns the final counts."""
        satisfied, counts = poll(self.completed_job_counts, lambda counts: tags <= counts.keys(), timeout,
                                 interval=0.25)
        if satisfied:
            return counts
        missing = sorted(tags - counts.keys())
        raise AssertionError(f"{len(missing)} of {len(tags)} jobs not completed after {timeout}s, "
                             f"e.g. {missing[:5]}\n{self.logs()}")
