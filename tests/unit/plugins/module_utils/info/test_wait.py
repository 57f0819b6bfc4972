# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one wait, driven by a fake clock and scripted reads (no real sleeping): the loop and its deadline, the
reconnect policy (a change's connection opened again, a wait across a failover), what ``committed`` accepts and how
a count the server read does not hold is reported, the progress line of each poll, the message of a timeout, and
where the module's wait leaves its caller."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.awa.operations.plugins.module_utils.info import wait
from ansible_collections.awa.operations.plugins.module_utils.info.wait import (
    PREDICATES,
    ReadSession as Reopening,
    missing_changes,
    poll_until,
    reconnect_with_retries,
    validate_committed,
)
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    ConnectionFailed,
    Disconnected,
    InvalidRequest,
    WaitInterrupted,
    WaitTimeout,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


# -- the loop and its deadline -----------------------------------------------------------------------------------

class Lost(Exception):
    """A poll that lost its connection, as the caller tells it (a Disconnected, or a module run that says so)."""


def polls(*reads):
    """A fetch that returns (or raises) each of ``reads`` in turn (the last one repeats), counting its calls."""
    remaining = list(reads)

    def fetch():
        fetch.calls += 1
        item = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        if isinstance(item, BaseException):
            raise item
        return dict(item)
    fetch.calls = 0
    return fetch


def read(converged: bool, **extra) -> dict:
    return {"converged": converged, "drained": False, "new_runtimes": [], "expected_new_runtimes": 0,
            "queues": {}, "warnings": ["from the read"], "server": "db1:5432", **extra}


def reconnecting(monkeypatch, attempts: int = 3, interval: float = 5.0) -> None:
    monkeypatch.setattr(wait, "FAILOVER_DELAYS", (interval,) * attempts)


def lost_poll(exc: BaseException) -> bool:
    return isinstance(exc, Lost)


def test_it_polls_until_the_predicate_holds_and_says_how_long_and_how_often():
    clock, polled = FakeClock(), []
    info = poll_until(polls(read(False), read(False), read(True)), "converged", 60, 5, clock=clock, pause=clock.sleep,
                      on_poll=lambda info, elapsed: polled.append(elapsed))
    assert (info["converged"], info["waited"], info["polls"], info["duration"]) == (True, True, 3, 10)
    assert info["warnings"] == ["from the read"] and clock.sleeps == [5, 5] and polled == [0, 5, 10]


def test_at_the_deadline_it_raises_with_the_last_read_and_never_sleeps_past_it():
    clock = FakeClock()
    with pytest.raises(WaitTimeout) as timed_out:
        poll_until(polls(read(False)), "converged", 5, 2, clock=clock, pause=clock.sleep)
    assert timed_out.value.message.startswith("Timed out after 5s waiting until converged.")
    result = timed_out.value.result
    assert (result["converged"], result["waited"], result["polls"], result["duration"]) == (False, True, 4, 5)
    assert clock.sleeps == [2, 2, 1]


def test_a_zero_timeout_looks_once():
    clock, fetch = FakeClock(), polls(read(False))
    with pytest.raises(WaitTimeout):
        poll_until(fetch, "drained", 0, 2, clock=clock, pause=clock.sleep)
    assert fetch.calls == 1 and clock.sleeps == []


def test_without_a_wait_it_reads_once():
    fetch = polls(read(False))
    info = poll_until(fetch, "none", 60, 5)
    assert fetch.calls == 1 and (info["waited"], info["polls"], info["duration"]) == (False, 1, 0.0)


def test_drained_implies_converged():
    assert not PREDICATES["drained"]({"converged": False, "drained": True})
    assert not PREDICATES["drained"]({"converged": True, "drained": False})
    assert PREDICATES["drained"]({"converged": True, "drained": True})


# -- the reconnect policy: a change's connection, a wait across a failover -----------------------------------------

class Unreachable:
    """A reconnect that fails every time, and the sleeps between attempts."""

    def __init__(self) -> None:
        self.calls = 0
        self.slept: list[float] = []

    def __call__(self):
        self.calls += 1
        raise ConnectionFailed(f"could not connect to database 'app' on db1:5432 as 'awa_migrator': refused #{self.calls}")


def test_reconnecting_for_the_next_queue_of_a_list_retries_then_names_the_attempts():
    reconnect = Unreachable()
    with pytest.raises(ConnectionFailed, match=r"refused #6 \(6 attempts within 15\.5 s\)$"):
        reconnect_with_retries(reconnect, sleep=reconnect.slept.append)
    assert reconnect.slept == [0.5, 1.0, 2.0, 4.0, 8.0]
    sentinel = object()
    failures = iter([ConnectionFailed("refused"), None])

    def flaky():
        failure = next(failures)
        if failure:
            raise failure
        return sentinel
    assert reconnect_with_retries(flaky, sleep=lambda seconds: None) is sentinel


def test_a_lost_poll_is_retried_at_the_reconnect_interval_and_the_result_says_the_wait_reconnected(monkeypatch):
    reconnecting(monkeypatch)
    clock, announced = FakeClock(), []
    info = poll_until(polls(read(False), Lost("server closed the connection"), Lost("refused"),
                            read(True, server="db2:5432")), "converged", 60, 2, lost=lost_poll, clock=clock,
                      pause=clock.sleep, on_attempt=lambda error, attempt, delay: announced.append((error, attempt, delay)))
    assert info["polls"] == 2 and clock.sleeps == [2, 5, 5]
    assert announced == [("server closed the connection", 1, 5), ("refused", 2, 5)]
    assert info["warnings"] == ["from the read",
                                "The connection to the database was lost 2s into the wait (server closed the connection); "
                                "the wait reconnected after 2 attempt(s) and read db2:5432 from then on (the primary "
                                "now, if it was a failover). The state reported was read there."]


def test_the_first_poll_may_lose_its_connection_too_and_a_longer_wait_sleep_spaces_the_attempts(monkeypatch):
    reconnecting(monkeypatch)
    clock = FakeClock()
    info = poll_until(polls(Lost("admin shutdown"), read(True)), "converged", 60, 8, lost=lost_poll, clock=clock,
                      pause=clock.sleep)
    assert clock.sleeps == [8]
    assert info["warnings"][1].startswith("The connection to the database was lost 0s into the wait (admin shutdown); "
                                          "the wait reconnected after 1 attempt(s)")


def test_after_its_attempts_the_wait_gives_up_with_the_first_and_the_last_error_the_last_read_and_what_to_do(
        monkeypatch):
    reconnecting(monkeypatch, attempts=3)
    clock = FakeClock()
    with pytest.raises(WaitInterrupted) as interrupted:
        poll_until(polls(read(False), Lost("terminating connection due to administrator command"), Lost("refused")),
                   "converged", 600, 2, lost=lost_poll, clock=clock, pause=clock.sleep)
    assert clock.sleeps == [2, 5, 5, 5], "three reconnection attempts, then no more"
    message = interrupted.value.message
    assert message.startswith("The connection to the database was lost 2s into the wait until converged "
                              "(terminating connection due to administrator command), and all 3 reconnection attempts "
                              "failed (the last at 17s: refused). Nothing was changed: the wait only reads.")
    assert "run the wait again (in the role: the entry point wait, or --tags enqueue_shards_wait)" in message
    result = interrupted.value.result
    assert (result["converged"], result["waited"], result["polls"], result["duration"]) == (False, True, 1, 17)


def test_reconnecting_never_runs_past_the_deadline(monkeypatch):
    reconnecting(monkeypatch, attempts=24)
    clock = FakeClock()
    with pytest.raises(WaitInterrupted) as interrupted:
        poll_until(polls(read(False), Lost("refused")), "converged", 8, 2, lost=lost_poll, clock=clock,
                   pause=clock.sleep)
    assert clock.sleeps == [2, 5, 1]
    assert "(refused), and the wait's deadline came after 2 reconnection attempt(s) (the last at 8s: refused)" in \
        interrupted.value.message


def test_a_failure_that_is_not_a_lost_connection_ends_the_wait_as_it_is(monkeypatch):
    reconnecting(monkeypatch)
    clock = FakeClock()
    with pytest.raises(ValueError):
        poll_until(polls(read(False), ValueError("lock timeout")), "converged", 60, 2, lost=lost_poll, clock=clock,
                   pause=clock.sleep)
    with pytest.raises(Lost):
        poll_until(polls(read(False), Lost("refused")), "converged", 60, 1, clock=clock, pause=clock.sleep)
    assert clock.sleeps == [2, 1]


# -- committed: a change the server read does not hold --------------------------------------------------------------

SERVER = "db2.example.com:5432"
# What awa_enqueue_shards returns per queue (with queues), trimmed to a few keys.
CHANGE_RESULT = {"changed": True, "check_mode": False, "queue": "orders", "shards": 8, "previous_shards": {"orders": 4},
                 "ledger": {"schema": "awa_operations", "table": "enqueue_shards_changes", "id": 12,
                            "changed_at": "2026-12-01T10:00:00+00:00", "live_runtimes": []}}


def change_row(change_id: int, from_shards: int, to_shards: int) -> dict:
    return {"id": change_id, "changed_at": "2026-12-01T09:00:00+00:00", "from_shards": from_shards,
            "to_shards": to_shards, "changed_by": "awa_migrator", "reason": None}


def counts_read(counts: dict[str, int], *changes: dict, queue: str = "orders") -> dict:
    """A read's result, reduced to what the check looks at."""
    return {"queues": {queue: {"enqueue_shards": counts,
                               "last_change": dict(zip(counts, changes))}}}


def test_the_change_result_is_accepted_as_is_and_check_mode_results_are_left_out():
    assert validate_committed({"orders": CHANGE_RESULT, "events": {"shards": 2},
                               "dry": dict(CHANGE_RESULT, check_mode=True)}) == {
        "orders": (8, 12), "events": (2, None)}
    assert validate_committed(None) == {} and validate_committed({}) == {}


@pytest.mark.parametrize("value", [
    [{"queue": "orders", "shards": 8}],
    {"orders": 8},
    {"orders": {"shards": "8"}},
    {"orders": {"shards": True}},
    {"orders": {"shards": 8, "ledger": {"id": "12"}}},
    {"orders": {"shards": 8, "ledger": {"id": False}}},
], ids=["list", "bare-count", "text-count", "bool-count", "text-id", "bool-id"])
def test_anything_else_is_refused_with_the_shape_it_takes(value):
    with pytest.raises(InvalidRequest) as refused:
        validate_committed(value)
    assert refused.value.message.startswith(
        "committed must map each queue to what the change committed, as awa_enqueue_shards returns it in queues "
        "(for example {orders: {shards: 8, ledger: {id: 12}}})")


def test_a_count_the_server_holds_is_no_problem_and_queues_not_read_are_not_judged():
    committed = validate_committed({"orders": CHANGE_RESULT, "elsewhere": {"shards": 3}})
    assert missing_changes(committed, counts_read({"orders": 8}, change_row(12, 4, 8)), SERVER) == []


def test_a_change_the_server_never_received_is_named_with_the_count_found_and_what_to_re_run():
    committed = validate_committed({"orders": CHANGE_RESULT})
    [problem] = missing_changes(committed, counts_read({"orders": 4}, change_row(9, 1, 4)), SERVER)
    assert problem == (
        "orders: the change committed enqueue_shards 8 (ledger change #12), but db2.example.com:5432 holds "
        "enqueue_shards 4 and its latest recorded change is change #9 (1 -> 4, by awa_migrator at "
        "2026-12-01T09:00:00+00:00): the change is not on this server. This happens after a failover to a standby "
        "that had not received it (asynchronous replication): the commit was lost with the old primary. Nothing "
        "will converge on 8 here. Re-run the change against the new primary (awa.operations.awa_enqueue_shards with "
        "queue orders and shards 8, or the playbook awa.operations.set_enqueue_shards), then the wait.")


def test_without_a_recorded_change_or_a_ledger_row_it_still_names_the_count():
    [problem] = missing_changes({"orders": (8, None)}, counts_read({"orders#0": 4, "orders#1": 8}), SERVER)
    assert problem.startswith("orders: the change committed enqueue_shards 8, but db2.example.com:5432 holds "
                              "enqueue_shards orders#0: 4, orders#1: 8 and it has no recorded change: the change is "
                              "not on this server.")


def test_a_later_change_is_named_as_such_not_as_a_lost_one():
    [problem] = missing_changes(validate_committed({"orders": CHANGE_RESULT}),
                                counts_read({"orders": 2}, change_row(44, 8, 2)), SERVER)
    assert problem == (
        "orders: the change committed enqueue_shards 8 (ledger change #12), but db2.example.com:5432 now holds "
        "enqueue_shards 2: it was changed again since, by change #44 (8 -> 2, by awa_migrator at "
        "2026-12-01T09:00:00+00:00). Nothing will converge on 8 here; if enqueue_shards 2 is not what you want, run "
        "the change again.")


# -- what a wait says ----------------------------------------------------------------------------------------------

def test_a_timeout_names_every_straggler_and_what_to_do():
    straggler = {"instance_id": "i-1", "hostname": None, "pid": 42, "seconds_since_start": 90.0,
                 "reason": "it was already running when the count changed (change #3)"}
    info = {"queues": {"orders": {"converged": False, "runtimes_converged": 1, "runtimes_live": 2,
                                  "stragglers": [straggler], "drained": False, "depth_beyond_count": 5}}}
    message = wait.timeout_message("drained", info, 61.2)
    assert message.startswith("Timed out after 61s waiting until drained. orders: 1 of 2 live runtimes")
    assert "pid 42 on host (unreported) (instance i-1, up 90s)" in message
    assert "To finish: restart the runtimes named" in message


def test_a_drain_timeout_on_a_paused_queue_says_to_resume_it():
    info = {"queues": {"orders": {"converged": True, "runtimes_converged": 2, "runtimes_live": 2, "stragglers": [],
                                  "drained": False, "depth_beyond_count": 150, "paused": True,
                                  "enqueue_shards": {"orders": 2}}}}
    message = wait.timeout_message("drained", info, 30.0)
    assert "orders: 150 ready jobs remain on shards at or above the count, and the queue is paused" in message
    assert message.endswith("To finish: resume the queue (awa queue resume orders) when the pause is over.")
    assert wait.progress_line(info) == (
        "orders: 2/2 runtimes on 2 shards, 150 ready beyond the count (paused: nothing drains until it is resumed)")


def test_queues_that_stand_alike_are_one_part_of_the_progress_line_and_of_the_timeout():
    on_count = {"converged": True, "runtimes_converged": 12, "runtimes_live": 12, "stragglers": [], "drained": True,
                "depth_beyond_count": 0, "paused": False, "enqueue_shards": {"q": 4}}
    straggler = {"instance_id": "i-1", "hostname": "web-3", "pid": 42, "seconds_since_start": 90.0,
                 "reason": "it was already running when the count changed"}
    waiting = dict(on_count, converged=False, runtimes_converged=11, stragglers=[straggler], drained=False)
    queues = {f"q{index:03d}": on_count for index in range(100)}
    queues.update({"mail": waiting, "orders": waiting, "events": dict(waiting, depth_beyond_count=7)})
    info = {"queues": queues}
    assert wait.progress_line(info) == (
        "100 queues (q000..q099): 12/12 runtimes on 4 shards, 0 ready beyond the count; "
        "2 queues (mail, orders): 11/12 runtimes on 4 shards, 0 ready beyond the count; "
        "events: 11/12 runtimes on 4 shards, 7 ready beyond the count")
    message = wait.timeout_message("converged", info, 300.0)
    assert message.startswith(
        "Timed out after 300s waiting until converged. 3 queues (mail, orders, events): 11 of 12 live runtimes on the "
        "current count; not yet: pid 42 on host web-3 (instance i-1, up 90s): it was already running when the count "
        "changed. To finish: restart the runtimes named")


def test_past_ten_different_standings_the_progress_line_names_the_other_queues_only():
    def draining(beyond: int) -> dict:
        return {"runtimes_converged": 3, "runtimes_live": 3, "enqueue_shards": {"q": 2}, "paused": False,
                "depth_beyond_count": beyond}
    info = {"queues": {f"q{index:03d}": draining(index) for index in range(100)}}
    line = wait.progress_line(info)
    assert line.startswith("q000: 3/3 runtimes on 2 shards, 0 ready beyond the count; q001: ")
    assert line.endswith("; q009: 3/3 runtimes on 2 shards, 9 ready beyond the count; 90 other queues (q010..q099)")


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
        monkeypatch.setattr(wait, "read_shards_info", self.read_shards_info)
        reconnecting(monkeypatch, 24, 0.0)

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

    info = wait.wait_in_session(session, "converged", 30, 0.0)

    assert_reconnected(info)
    assert bed.primary.closed
    # What the module reads next (health, advice) goes to the same connection: none is opened for it.
    assert session.current() is bed.promoted and not bed.promoted.closed and bed.opened == [bed.promoted]
    session.close()
    assert bed.promoted.closed


def test_a_wait_given_a_way_to_reconnect_closes_the_connection_it_opened(monkeypatch):
    """The Python API of the guide: ``wait_for_shards_info(conn, ..., reconnect=...)`` leaves nothing open."""
    bed = Failover(monkeypatch)

    info = wait.wait_for_shards_info(bed.primary, "converged", 30, 0.0, reconnect=bed.reopen)

    assert_reconnected(info)
    assert bed.opened == [bed.promoted] and bed.promoted.closed


class EndedAfterRead(Failover):  # pylint: disable=too-few-public-methods
    """A primary whose first read succeeds, and whose session psycopg then closes at the read's end (the rollback
    met the server gone) - the loss is found after the read, not by a read that fails."""

    def read_shards_info(self, conn, **_read_args):
        if conn is self.primary:
            conn.close()
            return {"converged": False, "queues": {}, "warnings": []}
        return {"converged": True, "queues": {}, "warnings": []}


def test_a_session_that_ended_after_a_read_is_a_lost_connection_the_wait_reports(monkeypatch):
    bed = EndedAfterRead(monkeypatch)

    info = wait.wait_for_shards_info(bed.primary, "converged", 30, 0.0, reconnect=bed.reopen)

    assert_reconnected(info)
    [warning] = [text for text in info["warnings"] if "reconnected" in text]
    assert "(the server ended the session after the last read)" in warning
    assert "the wait reconnected after 1 attempt(s)" in warning
    assert info["polls"] == 2 and bed.opened == [bed.promoted]


class Healthy(Failover):
    """A server that answers every read, and counts the health reads (two statements each) made with them."""

    def __init__(self, monkeypatch, converged_at: int) -> None:
        super().__init__(monkeypatch)
        self.reads, self.health_reads, self.converged_at = 0, 0, converged_at
        monkeypatch.setattr(wait, "add_health", self.add_health)

    def read_shards_info(self, conn, **_read_args):
        self.reads += 1
        return {"converged": self.reads >= self.converged_at, "queues": {}, "warnings": []}

    def add_health(self, conn, info, lock_timeout):
        self.health_reads += 1
        info["health"] = {"read_at": f"poll {self.reads}"}


def test_the_modules_wait_reads_health_with_every_poll_as_the_action_plugins_polls_do(monkeypatch):
    bed = Healthy(monkeypatch, converged_at=3)
    info = wait.wait_in_session(Reopening(bed.promoted, None), "converged", 30, 0.0, health=True)
    assert (bed.reads, bed.health_reads, info["health"]["read_at"]) == (3, 3, "poll 3")


def test_the_progress_line_of_a_read_without_lanes_leaves_the_depths_out():
    view = {"runtimes_converged": 1, "runtimes_live": 2, "enqueue_shards": {"orders": 8}, "paused": False}
    info = {"new_runtimes": [{}], "expected_new_runtimes": 2, "queues": {"orders": view}}
    assert wait.progress_line(info) == (
        "1/2 restarted runtimes live and healthy; orders: 1/2 runtimes on 8 shards")
    assert wait.progress_line(dict(info, queues={"orders": dict(view, depth_beyond_count=None)})).endswith(
        "orders: 1/2 runtimes on 8 shards, ? ready beyond the count")


def drain_read(cursors: dict[int, int], drained: bool = True) -> dict:
    """A converged read of queue orders (count 2) whose lanes beyond the count have these enqueue cursors."""
    lanes = [{"queue": "orders", "priority": 2, "shard": shard, "beyond_count": shard >= 2, "enqueue_cursor": cursor}
             for shard, cursor in {0: 50, 1: 50, **cursors}.items()]
    view = {"converged": True, "runtimes_converged": 2, "runtimes_live": 2, "stragglers": [], "drained": drained,
            "depth_beyond_count": 0 if drained else 3, "paused": False, "enqueue_shards": {"orders": 2},
            "lanes": lanes}
    return read(True, drained=drained, queues={"orders": view})


def test_a_drain_wait_is_not_drained_while_new_jobs_arrive_beyond_the_count_even_at_depth_zero():
    """Fast workers keep the depth at 0 while a producer on the old count still enqueues there."""
    clock = FakeClock()
    with pytest.raises(WaitTimeout) as timed_out:
        poll_until(polls(drain_read({2: 10, 3: 7}, drained=False), drain_read({2: 12, 3: 7}),
                         drain_read({2: 15, 3: 7})), "drained", 10, 5, clock=clock, pause=clock.sleep)
    result = timed_out.value.result
    assert result["drained"] is False and result["queues"]["orders"]["drained"] is False
    assert result["queues"]["orders"]["new_jobs_beyond_count"] == [{"queue": "orders", "shard": 2}]
    assert ("orders: new jobs keep arriving at or above the count during the wait (orders shard(s) 2): a producer "
            "that was not restarted still enqueues with the old count") in timed_out.value.message
    assert "To finish: find and restart it" in timed_out.value.message


def test_a_drain_wait_ends_once_the_old_shards_are_empty_and_nothing_new_arrives():
    clock = FakeClock()
    info = poll_until(polls(drain_read({2: 10}, drained=False), drain_read({2: 10})), "drained", 60, 5,
                      clock=clock, pause=clock.sleep)
    assert (info["drained"], info["polls"]) == (True, 2)
    assert info["queues"]["orders"]["new_jobs_beyond_count"] == []


def test_a_read_without_a_drain_wait_does_not_watch_the_cursors():
    info = poll_until(polls(drain_read({2: 10})), "none", 60, 5)
    assert "new_jobs_beyond_count" not in info["queues"]["orders"]
