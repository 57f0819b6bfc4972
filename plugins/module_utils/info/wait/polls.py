# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait until a change has taken effect: reads (read.py) polled until a predicate holds, and the wait's text.

    from ansible_collections.awa.operations.plugins.module_utils.info.wait.polls import wait_for_shards_info

    with open_connection(options) as conn:
        wait_for_shards_info(conn, "converged", timeout=600, sleep=5, queue="orders")  # raises WaitTimeout

``poll_until`` is the one wait: the module's (a read on its session per
poll) and the action plugin's (a run of the module per poll, from the
controller, with a progress line) differ only in how a poll reads and which
failure is a lost connection. It builds ``waited``, ``polls`` and
``duration``, the warnings of a wait that reconnected, and the messages of a
wait that timed out or gave up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ansible_collections.awa.operations.plugins.module_utils.info.wait import failover, loop
from ansible_collections.awa.operations.plugins.module_utils.info.drain_time import DrainHistory
from ansible_collections.awa.operations.plugins.module_utils.wording import LISTED, counted, named_queues, names_text
from ansible_collections.awa.operations.plugins.module_utils.db.connection import server_address
from ansible_collections.awa.operations.plugins.module_utils.db.options import DEFAULT_LOCK_TIMEOUT
from ansible_collections.awa.operations.plugins.module_utils.info.wait.session import ReadSession
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    ChangeNotFound,
    ConnectionLost,
    Disconnected,
    InvalidRequest,
    WaitInterrupted,
    WaitTimeout,
)
from ansible_collections.awa.operations.plugins.module_utils.info.views import describe_runtime
from ansible_collections.awa.operations.plugins.module_utils.info.options import WAIT_CHOICES
from ansible_collections.awa.operations.plugins.module_utils.info.read import read_shards_info
from ansible_collections.awa.operations.plugins.module_utils.info.health import add_health
from ansible_collections.awa.operations.plugins.module_utils.info.result import PolledRead, ShardRef, ShardsInfo, StateRead

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection


def by_status(statuses: list[tuple[str, str]], limit: int | None = None) -> list[str]:
    """``name: status`` for each (queue, status), said once for the queues that share a status (``100 queues
    (q000..q099): status``), in the order the statuses first appear. Past ``limit`` different statuses, the other
    queues are only named."""
    grouped: dict[str, list[str]] = {}
    for name, status in statuses:
        grouped.setdefault(status, []).append(name)
    groups = list(grouped.items())
    parts = [f"{named_queues(queues)}: {status}" for status, queues in groups[:limit]]
    others = [name for dummy, queues in groups[len(parts):] for name in queues]
    return parts + ([f"{counted(len(others), 'other queue')} ({names_text(others)})"] if others else [])


def progress_line(info: StateRead) -> str:
    """One line per poll: where each queue stands, the queues that stand alike together. Past LISTED different
    standings the other queues are only named (the read's result, and a timeout's message, say where each stands)."""
    parts = []
    if info.get("expected_new_runtimes"):
        parts.append(f"{len(info['new_runtimes'])}/{info['expected_new_runtimes']} restarted runtimes live and healthy")
    statuses: list[tuple[str, str]] = []
    for name, queue_view in info["queues"].items():
        # A read without the lanes (lanes: false) does not know the depths.
        beyond = ("" if "depth_beyond_count" not in queue_view else
                  f", {'?' if queue_view['depth_beyond_count'] is None else queue_view['depth_beyond_count']} ready "
                  "beyond the count")
        statuses.append((name, f"{queue_view['runtimes_converged']}/{queue_view['runtimes_live']} runtimes on "
                               f"{'/'.join(map(str, sorted(set(queue_view['enqueue_shards'].values()))))} shards{beyond}"
                               + (" (paused: nothing drains until it is resumed)" if queue_view["paused"] else "")))
    return "; ".join(parts + by_status(statuses, LISTED)) or "no queues"


def poll_line(info: StateRead, wait: str, elapsed: float, timeout: float, drain: DrainHistory | None = None) -> str:
    """A poll as the controller prints it: the seconds against the wait's timeout, whether it holds, where each
    queue stands, and (with the ``drain`` so far) the time left at the rate the depth beyond the count falls."""
    done = loop.PREDICATES[wait](info)
    left = "" if done or drain is None else drain.time_left(elapsed, timeout)
    return (f"{elapsed:5.0f}s of {timeout:g}s {'done' if done else f'waiting until {wait}'}: {progress_line(info)}"
            + (f"; {left}" if left else ""))


def noting_new_jobs(fetch: Callable[[], PolledRead]) -> Callable[[], PolledRead]:
    """``fetch``, whose reads also say which shards at or above the count received new jobs since the first read.

    Drained means no ready job is left beyond the count, and none arriving: a
    producer that still runs the old count (one a rollout left alone, or one
    outside the inventory) keeps refilling those shards, and with fast workers
    their depth can read 0 at every poll. A lane's enqueue cursor grows with
    every job enqueued on it, so a queue whose cursors beyond the count moved
    since the wait's first read is not drained.
    """
    first: dict[tuple[str, int, int], int] = {}

    def fetched() -> PolledRead:
        read = fetch()
        for view in read["queues"].values():
            moved = set()
            for lane in view.get("lanes", []):
                cursor = lane.get("enqueue_cursor")
                if lane["beyond_count"] and cursor is not None:
                    if cursor > first.setdefault((lane["queue"], lane["priority"], lane["shard"]), cursor):
                        moved.add((lane["queue"], lane["shard"]))
            view["new_jobs_beyond_count"] = [{"queue": queue, "shard": shard} for queue, shard in sorted(moved)]
            if moved:
                view["drained"] = False
        if "drained" in read:
            read["drained"] = all(view.get("drained", False) for view in read["queues"].values())
        return read

    return fetched


def _shards_text(shards: list[ShardRef]) -> str:
    by_queue: dict[str, list[str]] = {}
    for entry in shards:
        by_queue.setdefault(entry["queue"], []).append(str(entry["shard"]))
    return "; ".join(f"{queue} shard(s) {', '.join(numbers)}" for queue, numbers in by_queue.items())


def timeout_message(wait: str, info: StateRead, elapsed: float) -> str:
    """Why a wait ended without success: every straggler and every undrained queue, and what to do."""
    problems, advice = [], []
    if wait == "restarted":
        new = info["new_runtimes"]
        problems.append(f"{len(new)} of {info['expected_new_runtimes']} restarted runtimes are live and healthy"
                        + (f" (seen: {', '.join(describe_runtime(view) for view in new)})" if new else ""))
        advice.append("check the restarted services and their logs; the rollout stops here")
    queues = {} if wait == "restarted" else info["queues"]
    # (queue, what holds it up): the queues held up alike are named together.
    held_up: list[tuple[str, str]] = []
    for name, queue_view in queues.items():
        if not queue_view["converged"]:
            stragglers = {s["instance_id"]: s for s in queue_view["stragglers"]}
            listed = "; ".join(f"{describe_runtime(s)}: {s['reason']}" for s in stragglers.values())
            held_up.append((name, f"{queue_view['runtimes_converged']} of {queue_view['runtimes_live']} live "
                                  f"runtimes on the current count; not yet: {listed}"))
            advice.append("restart the runtimes named (a runtime that is gone stops counting once Awa marks "
                          "it stale, 30 s after its last snapshot)")
        elif wait == "drained" and not queue_view.get("drained", False):
            beyond = queue_view.get("depth_beyond_count")
            receiving = queue_view.get("new_jobs_beyond_count")
            if receiving:
                held_up.append((name, f"new jobs keep arriving at or above the count during the wait "
                                      f"({_shards_text(receiving)}): a producer that was not restarted still enqueues "
                                      "with the old count"))
                advice.append("find and restart it (a runtime the wait left out - a service the change does not "
                              "concern, or a producer outside the change window or the inventory - or a service "
                              "whose enqueue_shards_service_queues is wrong)")
            elif beyond is None:
                held_up.append((name, "the depth beyond the count is unknown (lane sequences not readable)"))
                advice.append("connect as a role that can read the lane sequences (their owner or a member of it)")
            elif queue_view["paused"]:
                held_up.append((name, f"{beyond} ready jobs remain on shards at or above the count, and the "
                                      "queue is paused: nothing drains until it is resumed"))
                advice.append(f"resume the queue (awa queue resume {name}) when the pause is over")
            else:
                held_up.append((name, f"{beyond} ready jobs remain on shards at or above the count"))
                advice.append("make sure workers serve the queue, or wait longer")
    problems += by_status(held_up)
    unique_advice = list(dict.fromkeys(advice))
    return (f"Timed out after {elapsed:.0f}s waiting until {wait}. " + " | ".join(problems)
            + (". To finish: " + "; ".join(unique_advice) + "." if unique_advice else "."))


def _disconnected(exc: BaseException) -> bool:
    return isinstance(exc, Disconnected)


def reconnect_policy(lost: Callable[[BaseException], bool] = _disconnected,
                     on_attempt: Callable[[BaseException, int, float], None] | None = None) -> loop.Reconnect:
    """How a wait rides out a lost connection (failover.RECONNECT_ATTEMPTS, failover.RECONNECT_INTERVAL).

    ``lost`` tells a lost connection from other failures (by default: ``Disconnected``).
    """
    return loop.Reconnect(lost=lost, attempts=failover.RECONNECT_ATTEMPTS, interval=failover.RECONNECT_INTERVAL,
                          describe=lambda exc: getattr(exc, "message", str(exc)), on_attempt=on_attempt)


def poll_until(fetch: Callable[[], PolledRead], wait: str, timeout: float, sleep: float, *,
               lost: Callable[[BaseException], bool] | None = None,
               on_poll: Callable[[PolledRead, float], None] | None = None,
               on_attempt: Callable[[BaseException, int, float], None] | None = None,
               clock: Callable[[], float] = time.monotonic,
               pause: Callable[[float], None] = time.sleep) -> ShardsInfo:
    """Poll ``fetch`` until ``wait`` (converged, drained or restarted) holds; ``none`` polls once.

    Returns the last read with ``waited``, ``polls`` and ``duration``, and in
    ``warnings`` (after the read's own) one per lost connection the wait rode
    out. A poll that raises a failure ``lost`` accepts (a lost connection) is
    tried again (``reconnect_policy``; ``on_attempt`` hears of each attempt);
    any other failure ends the wait as it is. Raises ``WaitTimeout`` when the
    deadline comes first and ``WaitInterrupted`` when the connection stays
    lost, each carrying that result, with the message that says what to do.
    """
    if wait not in WAIT_CHOICES:
        raise InvalidRequest(f"wait must be one of {', '.join(WAIT_CHOICES)}, got {wait!r}")
    if wait == "none":
        return {**fetch(), "waited": False, "polls": 1, "duration": 0.0}
    if wait == "drained":
        fetch = noting_new_jobs(fetch)
    try:
        outcome = loop.wait_until(fetch, loop.PREDICATES[wait], timeout, sleep, clock=clock, sleep=pause,
                                  on_poll=on_poll,
                                  reconnect=reconnect_policy(lost, on_attempt) if lost is not None else None)
    except loop.ReconnectGaveUp as gave_up:
        raise WaitInterrupted(failover.gave_up_message(gave_up, wait, failover.RECONNECT_ATTEMPTS),
                              dict(gave_up.last or {}, waited=True, polls=gave_up.polls,
                                   duration=round(gave_up.elapsed, 3))) from None
    info: ShardsInfo = {**outcome.last, "waited": True, "polls": outcome.polls, "duration": round(outcome.elapsed, 3)}
    # A module run polled from the controller may carry no warnings of its own.
    info["warnings"] = list(info.get("warnings") or []) + [
        failover.reconnected_warning(interruption, info["server"]) for interruption in outcome.interruptions]
    if not outcome.satisfied:
        raise WaitTimeout(timeout_message(wait, info, outcome.elapsed), info)
    return info


def wait_for_shards_info(conn: Connection, wait: str, timeout: float, sleep: float,
                         on_poll: Callable[[PolledRead, float], None] | None = None, *,
                         reconnect: Callable[[], Connection] | None = None, **options: Any) -> ShardsInfo:
    """Read until ``wait`` (converged, drained or restarted) holds; raise WaitTimeout with the last state otherwise.

    ``options`` are wait_in_session's. With ``reconnect`` (a function opening
    a new connection), a poll that loses its connection is tried again on a
    new one, a bounded number of times (``reconnect_policy``); then the wait
    ends with ``WaitInterrupted``. The connections the wait opened are closed
    when it ends; ``conn`` is the caller's.
    """
    session = ReadSession(conn, reconnect)
    try:
        return wait_in_session(session, wait, timeout, sleep, on_poll, **options)
    finally:
        session.close()


def wait_in_session(session: ReadSession, wait: str, timeout: float, sleep: float,
                    on_poll: Callable[[PolledRead, float], None] | None = None, *,
                    committed: dict[str, failover.Committed] | None = None, health: bool = False,
                    **read_args: Any) -> ShardsInfo:
    """wait_for_shards_info on the caller's ``session``, which it leaves on the connection the wait ended on (after a
    failover, a new one), so the caller reads on there and closes it.

    ``read_args`` are read_shards_info's. A poll that is not granted a lock
    within ``lock_timeout`` ends the wait at once with its ``LockTimeout``:
    something holds Awa's tables (DDL), the state cannot be seen, and the
    operator must know rather than wait blind.
    A lost connection is opened again when the session reopens (see
    wait_for_shards_info's ``reconnect``) - whether a read failed on it or
    psycopg found it closed after the last read - and the wait's warnings say so.
    Each read is checked against ``committed`` (failover.validate_committed):
    a count that is not the one committed ends the wait at once with
    ``ChangeNotFound``. With ``health``, every poll also reads what the change
    shows (health.py). The result names the ``server`` read.
    """
    def fetch() -> PolledRead:
        if session.ended_untold():
            # Lost after the last read, not during one: the same interruption, so the wait says it reconnected.
            session.lost()
            raise ConnectionLost("the server ended the session after the last read")
        current = session.current()
        try:
            read: PolledRead = {**read_shards_info(current, **read_args), "server": server_address(current)}
            problems = failover.missing_changes(committed or {}, read, read["server"])
            if problems:
                raise ChangeNotFound(" | ".join(problems), dict(read, waited=wait != "none"))
            if health:
                add_health(current, read, read_args.get("lock_timeout", DEFAULT_LOCK_TIMEOUT))
        except Disconnected:
            session.lost()
            raise
        return read

    return poll_until(fetch, wait, timeout, sleep, on_poll=on_poll, lost=_disconnected if session.reopens else None)
