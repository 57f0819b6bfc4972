"""Across a failover, on PostgreSQL 17 and 18: a primary and an asynchronous streaming standby of it.

The connection names the standby first and the primary second
(``login_host: 127.0.0.1,127.0.0.1`` with both ports), as an operator names
every server of a cluster. The change lands on the primary. A wait - the
module's own, and the action plugin's, which also runs the role's waits -
rides out the primary's loss and the standby's promotion and finishes on the
new primary. The change-window playbook's wait does too, and when the change
never reached the standby (its WAL receiver stopped before it), the run says
so with the count found there, instead of waiting.

One pair per major serves the whole module: a failover swaps the roles, and
the old primary's place is rebuilt as a standby of the new one before the
next test. Tests use distinct queues of one Awa database.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from awa_testbed.awadb import AwaDatabase, AwaDatabaseFactory
from awa_testbed.binaries import SUPPORTED_MAJORS
from awa_testbed.collection import collections_path
from awa_testbed.fleet import Fleet
from awa_testbed.replication import StreamingPair
from awa_testbed.waiting import poll
from enqueue_shards_support import ansible_adhoc, ansible_env, change, info, shard_counts, wait_until

from ansible_collections.awa.operations.plugins.module_utils.db.connection import connect, open_connection
from ansible_collections.awa.operations.plugins.module_utils.errors import ServerUnreachable
from ansible_collections.awa.operations.plugins.module_utils.info.wait import wait_for_shards_info

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "tests" / "functional" / "inventories" / "local.yml"
PLAYBOOK = REPO / "playbooks" / "set_enqueue_shards.yml"


@dataclass
class Bed:
    """The pair and the Awa database on it."""

    pair: StreamingPair
    dbname: str

    def db(self) -> AwaDatabase:
        """The database on the current primary."""
        return AwaDatabase(self.pair.primary, self.dbname, "0.6.9")

    def login(self) -> dict:
        """Connection options naming the standby first, then the primary."""
        return self.pair.login_args(self.dbname, self.pair.standby, self.pair.primary)


@pytest.fixture(scope="module", params=SUPPORTED_MAJORS, ids=lambda major: f"pg{major}")
def pair_bed(request) -> Iterator[Bed]:
    pair = StreamingPair(request.param).start()
    try:
        # The migrated database itself (no copy of it): every base backup of the pair is smaller by one database.
        yield Bed(pair, AwaDatabaseFactory(pair.primary).template())
    finally:
        pair.destroy()


@pytest.fixture
def bed(pair_bed) -> Bed:
    """The pair with a standby caught up with the primary (the one a previous test's failover consumed rebuilt)."""
    pair_bed.pair.rejoin()
    return pair_bed


@pytest.fixture
def fleets() -> Iterator[list[Fleet]]:
    """Fleets of Awa programs started by the test, one per server they talk to, stopped at its end."""
    started: list[Fleet] = []
    yield started
    for fleet in started:
        fleet.cleanup()


def backlog_beyond_one_shard(bed: Bed, fleets: list[Fleet], queue: str) -> None:
    """``queue`` at 4 shards with 200 keyed jobs spread over them, no worker, and the standby caught up."""
    db = bed.db()
    change(db, queue, 4)
    fleet = Fleet(db)
    fleets.append(fleet)
    fleet.producer("p", queue, mode="enqueue_many_copy", keyed=True, batch=50, count=200, rate=0).wait(60)
    bed.pair.wait_caught_up()


def drain_on_the_new_primary(bed: Bed, fleets: list[Fleet], queue: str) -> None:
    fleet = Fleet(bed.db())
    fleets.append(fleet)
    fleet.worker("w", [f"{queue}=8"])


def test_the_change_lands_on_the_primary_and_reads_keep_to_the_primary_unless_told(bed):
    process, result = ansible_adhoc({**bed.login(), "queue": "orders", "shards": 4, "new_queue": True})

    assert process.returncode == 0, process.stdout
    assert result["changed"] is True
    assert shard_counts(bed.db())["orders"] == 4
    bed.pair.wait_caught_up()
    standby = AwaDatabase(bed.pair.standby, bed.dbname, "0.6.9")
    assert shard_counts(standby)["orders"] == 4  # replayed, not written there
    standby_only = bed.pair.login_args(bed.dbname, bed.pair.standby)
    with pytest.raises(ServerUnreachable) as refused:
        info(bed.db(), login=standby_only, queue="orders")
    assert "server is in hot standby mode. No server of login_host is a primary (target_session_attrs primary)" \
        in refused.value.message
    assert "to read a standby on purpose, set target_session_attrs: any" in refused.value.message
    read = info(bed.db(), login={**standby_only, "target_session_attrs": "any"}, queue="orders")
    assert read["server"] == f"127.0.0.1:{bed.pair.standby.port}"
    assert read["queues"]["orders"]["enqueue_shards"] == {"orders": 4}


def module_process(args: dict, workdir: Path) -> subprocess.Popen:
    """awa_enqueue_shards_info run as Ansible runs it on the target, without the action plugin: its own wait."""
    (workdir / "args.json").write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}), encoding="utf-8")
    return subprocess.Popen(  # pylint: disable=consider-using-with
        [sys.executable, "-m", "ansible_collections.awa.operations.plugins.modules.awa_enqueue_shards_info",
         str(workdir / "args.json")], cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**ansible_env(), "PYTHONPATH": str(collections_path())})


def warning_texts(result: dict) -> list[str]:
    """A module's warnings as text (ansible-core 2.19 and later send each as {event: {msg: TEXT}, ...})."""
    return [warning["event"]["msg"] if isinstance(warning, dict) else warning for warning in result.get("warnings", [])]


def reading_sessions(bed: Bed) -> int:
    """Sessions of awa.operations on the primary's Awa database."""
    return bed.db().scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'awa.operations' "
                           "AND datname = current_database()")


def test_the_module_wait_reconnects_to_the_promoted_standby_and_reports_there(bed, fleets, tmp_path):
    backlog_beyond_one_shard(bed, fleets, "own")
    lowered = change(bed.db(), "own", 1)
    bed.pair.wait_caught_up()
    old_primary, new_primary = bed.pair.primary, bed.pair.standby
    # health: read after the wait, so on the connection the wait reconnected to (the first one is gone).
    process = module_process({**bed.login(), "queue": "own", "wait": "drained", "wait_timeout": 300,
                              "wait_sleep": 0.5, "committed": {"own": lowered}, "health": True}, tmp_path)
    try:
        wait_until(lambda: reading_sessions(bed), 120, "the module's wait to connect")
    except AssertionError:
        process.kill()
        raise

    bed.pair.failover()
    drain_on_the_new_primary(bed, fleets, "own")
    stdout, stderr = process.communicate(timeout=300)

    assert process.returncode == 0, (process.returncode, stdout, stderr)
    result = json.loads(stdout)
    assert result["drained"] is True and result["queues"]["own"]["depth_beyond_count"] == 0
    assert result["server"] == f"127.0.0.1:{new_primary.port}" != f"127.0.0.1:{old_primary.port}"
    since = result["health"]["queues"]["own"]["since"]
    assert datetime.datetime.fromisoformat(since) == datetime.datetime.fromisoformat(lowered["ledger"]["changed_at"])
    [warning] = [text for text in warning_texts(result) if "connection to the database was lost" in text]
    assert "the wait reconnected after 1 attempt(s)" in warning


def test_a_wait_whose_session_ended_between_two_reads_says_it_reconnected(awa_db, fleet):
    """The loss met outside a read: psycopg found the session gone (as the rollback ending a read's transaction
    does) before the next poll. The wait must count it like a read that failed - not open a new connection quietly."""
    change(awa_db, "between", 4)
    polls: list[int] = []

    def end_the_session_after_the_first_poll(read: dict, elapsed: float) -> None:  # pylint: disable=unused-argument
        polls.append(len(polls) + 1)
        if len(polls) > 1:
            return
        with awa_db.connect() as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
                          "'awa.operations' AND datname = current_database()")
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")  # psycopg meets the ended session here, between two reads
        assert conn.closed
        fleet.worker("w", ["between=4"])  # the runtime the wait waits for, started now

    login = awa_db.login_args()
    with open_connection(login) as conn:
        read = wait_for_shards_info(conn, "restarted", 120, 0.2, on_poll=end_the_session_after_the_first_poll,
                                    reconnect=lambda: connect(login), queue="between", expected_new_runtimes=1)

    assert read["waited"] is True and len(read["new_runtimes"]) == 1 and polls[0] == 1 and len(polls) >= 2
    [warning] = [text for text in read["warnings"] if "connection to the database was lost" in text]
    assert "(the server ended the session after the last read)" in warning
    assert "the wait reconnected after 1 attempt(s)" in warning


def playbook(bed: Bed, queue: str, shards: int, workdir: Path) -> subprocess.Popen:
    """The change-window playbook (pickup refresh: no producer services) through the standby-then-primary list."""
    extra = {"enqueue_shards_queues": [{"queue": queue, "shards": shards}], "enqueue_shards_connection": bed.login(),
             "enqueue_shards_pickup": "refresh", "enqueue_shards_wait_sleep": 0.5,
             "enqueue_shards_drain_timeout": 300}
    (workdir / "vars.json").write_text(json.dumps(extra), encoding="utf-8")
    return subprocess.Popen(  # pylint: disable=consider-using-with
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(INVENTORY), str(PLAYBOOK),
         "-e", f"@{workdir / 'vars.json'}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**ansible_env(), "PYTHONUNBUFFERED": "1"})


class Output(threading.Thread):
    """A process's output, read as it comes; the process is killed if the test ends before it."""

    def __init__(self, process: subprocess.Popen) -> None:
        super().__init__(daemon=True)
        self.process = process
        self.lines: list[str] = []
        self.start()

    def run(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, words: str, timeout: float = 300) -> None:
        """Until ``words`` appear (the play reached that point); the output so far when they do not."""
        poll(self.text, lambda text: words in text or self.process.poll() is not None, timeout)
        if words not in self.text():
            self.join(10)
            raise AssertionError(f"{words!r} never appeared:\n{self.text()}")

    def finish(self, timeout: float = 300) -> str:
        self.process.wait(timeout)
        self.join(10)
        return self.text()


@pytest.fixture
def outputs() -> Iterator[list[Output]]:
    """Processes the test starts; killed at its end if still running."""
    started: list[Output] = []
    yield started
    for output in started:
        if output.process.poll() is None:
            output.process.kill()
            output.process.wait(10)


def ad_hoc_info(args: dict) -> subprocess.Popen:
    """``ansible localhost -m awa.operations.awa_enqueue_shards_info``: the action plugin's wait, as in a play."""
    return subprocess.Popen(  # pylint: disable=consider-using-with
        [str(Path(sys.executable).parent / "ansible"), "localhost", "-m", "awa.operations.awa_enqueue_shards_info",
         "-a", json.dumps(args)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**ansible_env(), "PYTHONUNBUFFERED": "1"})


def ad_hoc_result(text: str) -> dict:
    """The result the default callback prints last: ``localhost | STATUS => {json}``."""
    marker = text.rfind("localhost | ")
    assert marker >= 0, text
    return json.JSONDecoder().raw_decode(text, text.index("{", marker))[0]


def test_the_action_plugin_wait_rides_out_a_moment_without_primary_and_finishes_on_the_new_one(bed, fleets, outputs):
    backlog_beyond_one_shard(bed, fleets, "plugin")
    lowered = change(bed.db(), "plugin", 1)
    bed.pair.wait_caught_up()
    old_primary = bed.pair.primary
    output = Output(ad_hoc_info({**bed.login(), "queue": "plugin", "wait": "drained", "wait_timeout": 300,
                                 "wait_sleep": 0.5, "committed": {"plugin": lowered}}))
    outputs.append(output)
    output.wait_for("waiting until drained")

    bed.pair.stop_primary()
    # A poll finds no primary (the old one is down, the standby not promoted yet): the wait goes on.
    output.wait_for("): reconnecting in 5s, attempt 1 of 24")
    bed.pair.promote_standby()
    drain_on_the_new_primary(bed, fleets, "plugin")
    text = output.finish()

    result = ad_hoc_result(text)
    assert output.process.returncode == 0, text
    assert result["drained"] is True and result["server"] == f"127.0.0.1:{bed.pair.primary.port}"
    assert old_primary.port != bed.pair.primary.port
    assert f"the wait reconnected after 1 attempt(s) and read 127.0.0.1:{bed.pair.primary.port} from then on" in text
    # The worker started on the new primary is its one live runtime, started after the change.
    assert "done: plugin: 1/1 runtimes on 1 shards, 0 ready beyond the count" in text, text


def test_the_role_wait_reconnects_and_reports_a_change_the_promoted_standby_never_received(bed, fleets, outputs,
                                                                                           tmp_path):
    backlog_beyond_one_shard(bed, fleets, "lost")
    bed.pair.stop_streaming()
    output = Output(playbook(bed, "lost", 1, tmp_path))
    outputs.append(output)
    output.wait_for("waiting until drained")
    assert shard_counts(bed.db())["lost"] == 1  # through standby,primary: on the primary, and only there

    bed.pair.stop_primary()
    # A poll finds no primary (the old one is down, the standby not promoted yet): the wait goes on.
    output.wait_for("): reconnecting in 5s, attempt 1 of 24")
    bed.pair.promote_standby()
    text = output.finish()

    assert output.process.returncode != 0, text
    assert "Timed out" not in text, "it waited out the drain timeout"
    assert shard_counts(bed.db())["lost"] == 4  # what the new primary holds
    assert ("lost: the change committed enqueue_shards 1 (ledger change #" in text
            and f"but 127.0.0.1:{bed.pair.primary.port} holds enqueue_shards 4 and its latest recorded change is "
            in text and "the change is not on this server" in text), text
    assert "Re-run the change against the new primary (awa.operations.awa_enqueue_shards with queue lost and " \
        "shards 1, or the playbook awa.operations.set_enqueue_shards), then the wait." in text
