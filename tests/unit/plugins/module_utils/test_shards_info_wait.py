# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a wait says: the progress line of each poll, and the message of a timeout; where it leaves its caller."""

from __future__ import annotations

from types import SimpleNamespace

from ansible_collections.awa.operations.plugins.module_utils import failover, shards_info_wait
from ansible_collections.awa.operations.plugins.module_utils.connection import Reopening
from ansible_collections.awa.operations.plugins.module_utils.errors import Disconnected


def test_a_timeout_names_every_straggler_and_what_to_do():
    straggler = {"instance_id": "i-1", "hostname": None, "pid": 42, "seconds_since_start": 90.0,
                 "reason": "it was already running when the count changed (change #3)"}
    info = {"queues": {"orders": {"converged": False, "runtimes_converged": 1, "runtimes_live": 2,
                                  "stragglers": [straggler], "drained": False, "depth_beyond_count": 5}}}
    message = shards_info_wait.timeout_message("drained", info, 61.2)
    assert message.startswith("Timed out after 61s waiting until drained. orders: 1 of 2 live runtimes")
    assert "pid 42 on host (unreported) (instance i-1, up 90s)" in message
    assert "To finish: restart the runtimes named" in message


def test_a_drain_timeout_on_a_paused_queue_says_to_resume_it():
    info = {"queues": {"orders": {"converged": True, "runtimes_converged": 2, "runtimes_live": 2, "stragglers": [],
                                  "drained": False, "depth_beyond_count": 150, "paused": True,
                                  "enqueue_shards": {"orders": 2}}}}
    message = shards_info_wait.timeout_message("drained", info, 30.0)
    assert "orders: 150 ready jobs remain on shards at or above the count, and the queue is paused" in message
    assert message.endswith("To finish: resume the queue (awa queue resume orders) when the pause is over.")
    assert shards_info_wait.progress_line(info) == (
        "orders: 2/2 runtimes on 2 shards, 150 ready beyond the count (paused: nothing drains until it is resumed)")


class FakeConnection:
    """Only what the wait touches of a connection: the server it reached, and whether it is closed."""

    def __init__(self, host: str) -> None:
        self.info = SimpleNamespace(host=host, port=5432)
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Failover:  # pylint: disable=too-few-public-methods
    """A primary whose session ends at the first read, and the promoted server a reconnect reaches."""

    def __init__(self, monkeypatch) -> None:
        self.primary, self.promoted = FakeConnection("primary"), FakeConnection("promoted")
        self.opened: list[FakeConnection] = []
        monkeypatch.setattr(shards_info_wait, "read_shards_info", self.read_shards_info)
        monkeypatch.setattr(failover, "RECONNECT_INTERVAL", 0.0)

    def read_shards_info(self, conn, **_read_args):
        if conn is self.primary:
            raise Disconnected("the server ended the session (a failover)")
        return {"converged": True, "queues": {}, "warnings": []}

    def reopen(self) -> FakeConnection:
        self.opened.append(self.promoted)
        return self.promoted


def assert_reconnected(info) -> None:
    assert info["server"] == "promoted:5432"
    assert "reconnected" in " ".join(info["warnings"]).lower(), info["warnings"]


def test_a_wait_that_reconnected_leaves_its_caller_on_the_connection_it_ended_on(monkeypatch):
    bed = Failover(monkeypatch)
    session = Reopening(bed.primary, bed.reopen)

    info = shards_info_wait.wait_in_session(session, "converged", 30, 0.0)

    assert_reconnected(info)
    assert bed.primary.closed
    # What the module reads next (health, advice) goes to the same connection: none is opened for it.
    assert session.current() is bed.promoted and not bed.promoted.closed and bed.opened == [bed.promoted]
    session.close()
    assert bed.promoted.closed


def test_a_wait_given_a_way_to_reconnect_closes_the_connection_it_opened(monkeypatch):
    """The Python API of the guide: ``wait_for_shards_info(conn, ..., reconnect=...)`` leaves nothing open."""
    bed = Failover(monkeypatch)

    info = shards_info_wait.wait_for_shards_info(bed.primary, "converged", 30, 0.0, reconnect=bed.reopen)

    assert_reconnected(info)
    assert bed.opened == [bed.promoted] and bed.promoted.closed
