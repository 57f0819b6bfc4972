"""Fixtures: real PostgreSQL 17 and 18, fresh Awa databases, real Awa programs.

Every test that takes ``awa_db`` (or ``pg``) runs once per PostgreSQL major.
Servers start lazily, once per session, and stop at the end of the session
(or when the session is interrupted or killed: see awa_testbed.lifecycle).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from awa_testbed import environment, file_order, worker
from awa_testbed.awadb import DEFAULT_AWA_VERSION, AwaDatabase, AwaDatabaseFactory
from awa_testbed.collection import make_importable
from awa_testbed.binaries import SUPPORTED_MAJORS
from awa_testbed.fleet import Fleet
from awa_testbed.pgbouncer import PgBouncer
from awa_testbed.pgserver import PgServer


def _raise_keyboard_interrupt(signum, frame):  # pylint: disable=unused-argument
    raise KeyboardInterrupt(f"signal {signum}")


# SIGTERM (CI timeouts, kill) should unwind like Ctrl-C so finalizers stop servers.
signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)

# Tests import ansible_collections.awa.operations and run ansible against this checkout.
make_importable()

# The worker runtimes the tests start rotate their queue storage every 2 s (leases) and 5 s (ready queue) instead
# of Awa's 250 ms and 1 s (awa_testbed.worker): an idle test bed took 0.25 of a core, 0.11 with these, and the
# three workers' beds were most of what kept the 2 cores busy. The molecule fleet's unit sets the same; the demo
# runs Awa's own intervals.
os.environ.setdefault(worker.ROTATE_VARIABLE, "2000,5000")


class Servers:
    """One lazily started server (and template factory) per PostgreSQL major."""

    def __init__(self) -> None:
        self._servers: dict[int, PgServer] = {}
        self._factories: dict[int, AwaDatabaseFactory] = {}

    def factory(self, major: int) -> AwaDatabaseFactory:
        if major not in self._factories:
            server = PgServer(major)
            self._servers[major] = server
            server.start()
            self._factories[major] = AwaDatabaseFactory(server)
        return self._factories[major]

    def stop_all(self) -> None:
        for server in self._servers.values():
            server.destroy()


@pytest.fixture(scope="session")
def servers():
    registry = Servers()
    yield registry
    registry.stop_all()


class Poolers:
    """One lazily started PgBouncer (transaction pooling, small pools) per PostgreSQL major, in front of its server."""

    def __init__(self, servers: Servers) -> None:
        self._servers = servers
        self._poolers: dict[int, PgBouncer] = {}

    def pooler(self, major: int) -> PgBouncer:
        if major not in self._poolers:
            pooler = PgBouncer(self._servers.factory(major).server)
            pooler.start()
            self._poolers[major] = pooler
        return self._poolers[major]

    def stop_all(self) -> None:
        for pooler in self._poolers.values():
            pooler.destroy()


@pytest.fixture(scope="session")
def poolers(servers):
    registry = Poolers(servers)
    yield registry
    registry.stop_all()


@pytest.fixture(params=SUPPORTED_MAJORS, ids=lambda major: f"pg{major}")
def pg_major(request) -> int:
    return request.param


@pytest.fixture
def db_factory(servers, pg_major) -> AwaDatabaseFactory:
    return servers.factory(pg_major)


@pytest.fixture
def pg(db_factory) -> PgServer:
    return db_factory.server


@pytest.fixture
def awa_db(request, db_factory):
    """A fresh database with the real Awa 0.6.9 schema, queue storage active.

    Another released version: ``@pytest.mark.parametrize("awa_db", ["0.6.8"], indirect=True)``.
    """
    database = db_factory.create(awa_version=getattr(request, "param", DEFAULT_AWA_VERSION))
    yield database
    database.drop()


@pytest.fixture
def pgbouncer(poolers, pg_major) -> PgBouncer:
    """PgBouncer in front of this test's PostgreSQL server (``awa_db``'s): transaction pooling, pools of
    DEFAULT_POOL_SIZE server connections per database and user; ``allow(awa_db)`` lets the database's roles in."""
    return poolers.pooler(pg_major)


@pytest.fixture(scope="module")
def testbed() -> Iterator[Path]:
    """The demo's test bed, one per test module: PostgreSQL 18, a least-privilege Awa database, and two Awa
    applications (worker runtime and producer) of queue demo under supervisord; its state folder. Each enqueues a
    job a second (the demo: 5): jobs flow through every step, and an idle bed takes 13% of the 2 cores, not 18%."""
    with environment.temporary(major=18, apps=2, queue="demo", produce_rate=1.0) as state_dir:
        yield state_dir


@pytest.fixture(scope="module", params=SUPPORTED_MAJORS, ids=lambda major: f"pg{major}")
def fleet_bed(request) -> Iterator[tuple[Path, AwaDatabase]]:
    """The demo's test bed with four applications, one per test module and PostgreSQL major: its state folder and
    its database. The rollout tests serve its programs to the role as several producer hosts of this machine
    (rollout_support.hosts_inventory)."""
    from rollout_support import demo_bed  # pylint: disable=import-outside-toplevel  # imports the collection
    with demo_bed(request.param, apps=4) as state:
        yield state


@pytest.fixture(scope="module")
def testbed_db(testbed) -> AwaDatabase:
    """The test bed's database, for reading what the change window did."""
    state = environment.load_state(testbed)
    return AwaDatabase(PgServer.from_description(state["server"]), state["database"], DEFAULT_AWA_VERSION)


@pytest.fixture
def fleet(awa_db):
    """Real worker runtimes and producers for this test; their logs are shown when it fails."""
    programs = Fleet(awa_db)
    yield programs
    programs.cleanup()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--no-skips", action="store_true",
                     help="fail a test that would be skipped, with the skip's reason (hack/test.sh: every selected "
                          "test runs there)")
    parser.addoption("--pg", action="append", type=int, choices=SUPPORTED_MAJORS, metavar="MAJOR",
                     help="run only the tests on this PostgreSQL major (repeatable; default: every major). "
                          "hack/test.sh quick uses --pg 18")
    parser.addoption("--floor-python", metavar="PYTHON", type=Path,
                     help="the tests marked floor run on PostgreSQL 17 with the ansible-core of this Python's venv "
                          "(hack/test.sh: the oldest core of the matrix, meta/runtime.yml's requires_ansible); on 18 "
                          "with the one that runs pytest")
    parser.addoption("--record-file-seconds", metavar="PATH", type=Path,
                     help="write each test file's seconds (setup, call and teardown of its tests) to PATH as JSON; "
                          "the files run costliest first by tests/functional/file_seconds.json (awa_testbed.file_order)")


@pytest.fixture(autouse=True)
def floor_core(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked floor, on PostgreSQL 17, runs ansible and ansible-playbook of --floor-python's venv: each core
    and each major runs the change window, for the cost of one run of each test, in one pool of workers."""
    # Imported here: it imports the collection, which make_importable() above puts on the path.
    from enqueue_shards_support import ANSIBLE_PYTHON_VARIABLE  # pylint: disable=import-outside-toplevel

    floor_python = request.config.getoption("--floor-python")
    callspec = getattr(request.node, "callspec", None)
    if floor_python and request.node.get_closest_marker("floor") and callspec and "pg17" in callspec.id.split("-"):
        monkeypatch.setenv(ANSIBLE_PYTHON_VARIABLE, str(floor_python))


# Each test file's seconds in a recent run of the whole step, recorded with --record-file-seconds (CONTRIBUTING.md).
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The costliest files first (awa_testbed.file_order); --pg: only the tests of that major."""
    items[:] = file_order.costliest_files_first(items, file_order.load(FILE_SECONDS))
    wanted = config.getoption("--pg")
    if not wanted:
        return
    other_ids = {f"pg{major}" for major in SUPPORTED_MAJORS if major not in wanted}
    kept, deselected = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_other = callspec is not None and not other_ids.isdisjoint(callspec.id.split("-"))
        (deselected if on_other else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


class NoSkips:
    """--no-skips: a skipped test is reported as failed, with the reason it gave."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):  # pylint: disable=unused-argument
        report = (yield).get_result()
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            report.outcome = "failed"
            report.longrepr = f"{reason}\n(--no-skips: the test command runs every selected test, so a skip fails)"


class FileSeconds:
    """--record-file-seconds: every report's seconds, written by file at the end (by xdist's controller only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reports: list[tuple[str, float]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reports.append((report.nodeid, report.duration))

    def pytest_sessionfinish(self) -> None:
        file_order.save(self.path, file_order.seconds_by_file(self.reports))


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--no-skips"):
        config.pluginmanager.register(NoSkips(), "awa-no-skips")
    recording = config.getoption("--record-file-seconds")
    if recording and not hasattr(config, "workerinput"):
        config.pluginmanager.register(FileSeconds(recording), "awa-file-seconds")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
    """Attach the programs' output and the server log to a failing test's report."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    programs = getattr(item, "funcargs", {}).get("fleet")
    if programs is not None:
        report.sections.append(("awa programs", programs.logs()))
    arguments = getattr(item, "funcargs", {})
    database = arguments.get("awa_db") or arguments.get("testbed_db")
    if database is not None:
        report.sections.append((f"PostgreSQL {database.server.major} log", database.server.server_log()))
    pooler = getattr(item, "funcargs", {}).get("pgbouncer")
    if pooler is not None:
        report.sections.append(("PgBouncer log", pooler.log()))
