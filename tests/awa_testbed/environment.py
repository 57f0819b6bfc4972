"""A whole Awa installation that outlives the command that built it.

``up`` starts PostgreSQL (detached), creates a least-privilege Awa database
(owner, migrator, runtime role as in Awa's docs/security.md), and runs N
Awa applications (a worker runtime that also enqueues) under supervisord.
It writes ``state.json`` (connection options and restart commands for
playbooks) into the state folder. ``down`` removes it all.
Molecule's prepare/destroy and the demo use it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .awadb import DEFAULT_AWA_VERSION, AwaDatabase, AwaDatabaseFactory
from .pgserver import PgServer
from .supervisor import Program, Supervisor
from .waiting import poll, wait_until

APP_PREFIX = "awa-app-"


def fault_file(state_dir: Path, program: str) -> Path:
    """The file whose content (hang, crash) breaks ``program`` at its next start (awa_testbed.worker)."""
    return state_dir / f"fault-{program}"


def set_fault(state_dir: Path, program: str, fault: str) -> None:
    """Write (or, for none, remove) the fault file ``program`` reads when it starts."""
    path = fault_file(state_dir, program)
    if fault == "none":
        path.unlink(missing_ok=True)
    else:
        path.write_text(fault, encoding="utf-8")


def app_program(name: str, runtime_url: str, record_dsn: str, queue: str, env_file: Path, produce_rate: float,
                handler_ms: int = 0, *, label: str | None = None, runtime: bool = True) -> Program:
    """Awa application NAME: a worker runtime of ``queue`` that also enqueues ``produce_rate`` jobs a second into it
    (``runtime=False``: that only enqueues), loading ``env_file`` when it starts and broken as NAME's fault file
    beside that file says; ``label`` (default NAME) names it in the test bed's tables."""
    argv = [sys.executable, "-m", "awa_testbed.worker", "--name", label or name, "--queue", f"{queue}=4",
            "--env-file", str(env_file), "--record-dsn", f"'{record_dsn}'", "--handler-ms", str(handler_ms),
            "--fault-file", str(fault_file(env_file.parent, name))]
    if produce_rate:
        argv += ["--produce", queue, "--produce-rate", str(produce_rate)]
    if not runtime:
        argv.append("--no-runtime")
    return Program(name, argv, {"AWA_DATABASE_URL": runtime_url})


# A runtime counts as live when it published a snapshot in the last 30 s and is not shutting down.
LIVE_RUNTIMES = ("SELECT hostname, pid FROM awa.runtime_instances WHERE NOT shutting_down"
                 " AND last_seen_at > now() - interval '30 seconds' AND (healthy OR NOT %s)")


def live_runtimes(db: AwaDatabase, *, healthy: bool = False) -> list[tuple[str | None, int]]:
    """(hostname, pid) of every live runtime (``healthy``: whose snapshot also says it is healthy)."""
    return db.query(LIVE_RUNTIMES, (healthy,))


def wait_for_live_runtimes(db: AwaDatabase, pids: list[int], timeout: float = 60.0, *, healthy: bool = False) -> None:
    """Until a runtime of each pid published a snapshot in the last 30 s and is not shutting down (``healthy``: and
    its snapshot says it is healthy, as the reads that count new runtimes require)."""
    def live() -> set[int]:
        return {pid for dummy, pid in live_runtimes(db, healthy=healthy)}

    satisfied, seen = poll(live, lambda seen: set(pids) <= seen, timeout, interval=0.2)
    if not satisfied:
        raise RuntimeError(f"runtimes {sorted(set(pids) - seen)} did not publish a snapshot within {timeout}s")


def wait_for_first_jobs(db: AwaDatabase, producers: int, timeout: float = 60.0) -> None:
    """Until every application has enqueued: its first write creates the lane lazily, which changes the catalog."""
    wait_until(lambda: db.scalar("SELECT count(DISTINCT producer) FROM testbed.enqueued") >= producers, timeout,
               f"the {producers} applications to enqueue", interval=0.2, error=RuntimeError)


def up(state_dir: Path, major: int = 18, apps: int = 2, queue: str = "demo", produce_rate: float = 5.0,
       database: str = "awa_demo", handler_ms: int = 0) -> dict:
    state_dir.mkdir(parents=True, exist_ok=True)
    state_dir.chmod(0o700)
    server = PgServer(major)
    server.start(detached=True)
    db = AwaDatabaseFactory(server).create(name=database)
    # As the runbook sets it up: the migrator is a member of the runtime role, so it can read and re-grant
    # the lanes the applications create lazily before any change.
    db.setup_least_privilege(runtime_count=1, migrator_in_runtime_roles=True)

    env_file = state_dir / "awa-app.env"
    supervisor = Supervisor(state_dir)
    programs = [app_program(f"{APP_PREFIX}{i + 1}", db.url("runtime1"), db.dsn(), queue, env_file, produce_rate,
                            handler_ms) for i in range(apps)]
    # apps=0: only the database (the applications run elsewhere, e.g. on the fleet's hosts).
    if programs:
        supervisor.write_config(programs)
        supervisor.start()
        pids = [supervisor.program_pid(p.name) for p in programs]
        wait_for_live_runtimes(db, [pid for pid in pids if pid])
        if produce_rate:
            wait_for_first_jobs(db, apps)

    migrator = db.roles["migrator"]
    state = {
        "major": major,
        "server": server.describe(),
        "database": db.name,
        "queue": queue,
        "login": {**db.login_args("migrator")},
        "superuser_dsn": db.dsn(),
        "runtime_url": db.url("runtime1"),
        "runtime_roles": [db.roles["runtime1"].name],
        "migrator": migrator.name,
        "env_file": str(env_file),
        "supervisorctl": supervisor.ctl,
        "programs": [p.name for p in programs],
        "state_dir": str(state_dir),
    }
    save_state(state_dir, state)
    return state


def save_state(state_dir: Path, state: dict) -> None:
    (state_dir / "state.json").write_text(json.dumps(state, indent=2), encoding="utf-8")


def load_state(state_dir: Path) -> dict:
    return json.loads((state_dir / "state.json").read_text(encoding="utf-8"))


def database(state: dict) -> AwaDatabase:
    """The bed's database, as ``load_state`` describes it (its roles are in ``state``, not in this object)."""
    return AwaDatabase(PgServer.from_description(state["server"]), state["database"], DEFAULT_AWA_VERSION)


def down(state_dir: Path) -> None:
    state_file = state_dir / "state.json"
    if state_file.exists():
        state = load_state(state_dir)
        Supervisor(state_dir).shutdown()
        PgServer.from_description(state["server"]).destroy()
    else:
        # A half-finished ``up``: stop whatever got started.
        Supervisor(state_dir).shutdown()
    shutil.rmtree(state_dir, ignore_errors=True)


@contextlib.contextmanager
def temporary(**options) -> Iterator[Path]:
    """``up`` in a fresh state folder under /tmp for the block (``options`` as ``up`` takes them), then ``down``."""
    state_dir = Path(tempfile.mkdtemp(prefix="awa-testbed-"))
    try:
        up(state_dir, **options)
        yield state_dir
    finally:
        down(state_dir)
        shutil.rmtree(state_dir, ignore_errors=True)
