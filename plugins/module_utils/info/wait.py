# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one wait: reads (read.py) polled until a condition holds, within one deadline, across a lost connection.

    from ansible_collections.awa.operations.plugins.module_utils.info.wait import wait_for_shards_info

    with open_connection(options) as conn:
        wait_for_shards_info(conn, "converged", timeout=600, sleep=5, queue="orders")  # raises WaitTimeout

``poll_until`` is the one loop: the module's wait (a read on its session per
poll, ``wait_in_session``) and the action plugin's (a run of the module per
poll, from the controller, with a progress line) differ only in how a poll
reads and which failure is a lost connection. It owns no clock (``clock``
and ``pause`` are injected), so it is tested without sleeping. It builds
``waited``, ``polls`` and ``duration``, the warnings of a wait that
reconnected, and the messages of a wait that timed out or gave up.

One reconnect policy, ``attempts``: try, then try again after each delay of
a schedule, never past a deadline. The schedule is the caller's bound: a
change (a COMMIT that lost its connection, the next queue of a list, the
read after the change) rides out a restart (RECONNECT_DELAYS); a wait, which
only reads, rides out a failover (FAILOVER_DELAYS), connecting again to
whichever server of ``login_host`` is the primary now, and says which
server it read after. What it reads is checked against what the change
committed (the info module's ``committed``): after a failover to a standby
that had not received the change (asynchronous replication), the count the
change set is not there, and a wait would otherwise report convergence on a
count that no longer exists.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any

from ansible_collections.awa.operations.plugins.module_utils.db.connection import server_address
from ansible_collections.awa.operations.plugins.module_utils.db.options import DEFAULT_LOCK_TIMEOUT
from ansible_collections.awa.operations.plugins.module_utils.errors import (
    ChangeNotFound, ConnectionFailed, ConnectionLost, Disconnected, InvalidRequest, WaitInterrupted, WaitTimeout)
from ansible_collections.awa.operations.plugins.module_utils.info.drain_time import DrainHistory
from ansible_collections.awa.operations.plugins.module_utils.info.health import add_health
from ansible_collections.awa.operations.plugins.module_utils.info.read import read_shards_info
from ansible_collections.awa.operations.plugins.module_utils.info.result import (
    PolledRead, ShardRef, ShardsInfo, StateRead)
from ansible_collections.awa.operations.plugins.module_utils.info.views import describe_runtime
from ansible_collections.awa.operations.plugins.module_utils.wording import LISTED, counted, named_queues, names_text

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection

# Seconds before each attempt after the first. A change's: six attempts within about 15 s, which outlasts a restart
# (benchmarks/lost_commit.py: a fast restart of a busy 2-core test machine answered after 3.5 to 7.5 s, once later).
RECONNECT_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)
# A wait's, after a lost poll: 24 attempts 5 s apart (or wait_sleep apart, when longer), within wait_timeout: two
# minutes of outage at least. That covers the failovers operators run into - Patroni's defaults (ttl 30 s, loop_wait
# 10 s) promote a standby within about 40 s, and a managed Multi-AZ failover is documented as typically 60 to 120 s -
# while an outage longer than that is no failover to ride out quietly but something the operator must look at.
FAILOVER_DELAYS = (5.0,) * 24

# What a wait waits for: a predicate on a read, by the wait's name.
PREDICATES: dict[str, Callable[[StateRead], bool]] = {
    "converged": lambda info: info["converged"],
    # Drained implies converged: a runtime with the old count refills old shards.
    "drained": lambda info: info["converged"] and info.get("drained", False),
    # After a restart: enough new runtime instances are live and healthy.
    "restarted": lambda info: len(info["new_runtimes"]) >= info["expected_new_runtimes"],
}


def attempts(sleep: Callable[[float], None], delays: Sequence[float] = RECONNECT_DELAYS, *, until: float = float("inf"),
             clock: Callable[[], float] = time.monotonic,
             before: Callable[[int, float], None] = lambda number, delay: None) -> Iterator[int]:
    """The reconnect policy: attempt numbers from 1, sleeping each of ``delays`` (a change's, by default) before
    the next, each sleep cut to the deadline ``until`` and none past it. ``before`` hears of each attempt after the
    first: its number and its delay."""
    yield 1
    for number, delay in enumerate(delays, start=2):
        remaining = until - clock()
        if remaining <= 0:
            return
        before(number, min(delay, remaining))
        sleep(min(delay, remaining))
        yield number


def attempts_text(failures: list[str], delays: Sequence[float] = RECONNECT_DELAYS) -> str:
    """How many attempts failed, and within how many seconds (``delays``, a change's by default)."""
    return f"{len(failures)} attempts within {sum(delays):g} s"


def reconnect_with_retries(reconnect: Callable[[], Connection], *,
                           sleep: Callable[[float], None] = time.sleep) -> Connection:
    """A new connection from ``reconnect`` (a connect with the run's options), on the RECONNECT_DELAYS schedule."""
    failures: list[str] = []
    for dummy in attempts(sleep):
        try:
            return reconnect()
        except ConnectionFailed as exc:
            failures.append(exc.message)
    raise ConnectionFailed(f"{failures[-1]} ({attempts_text(failures)})")


class ReadSession:
    """A connection that is opened again (``reopen``) once it was lost, for read-only work - a wait - that may
    outlive the server it started on. ``close`` closes the connections it opened; the first is the caller's.
    Without ``reopen``, a lost connection stays lost."""

    def __init__(self, conn: Connection, reopen: Callable[[], Connection] | None) -> None:
        self.conn = self._first = conn
        self.reopen = reopen

    def current(self) -> Connection:
        """The connection, opened again when the last one was closed (raises ``ServerUnreachable`` when it cannot
        be)."""
        if self.conn.closed and self.reopen is not None:
            self.conn = self.reopen()
        return self.conn

    def close(self) -> None:
        if self.conn is not self._first:
            self.conn.close()


def validate_committed(value: object) -> dict[str, tuple[int, int | None]]:
    """The info module's ``committed``: the change's per-queue results, or ``{queue: {shards: N, ledger: {id: ID}}}``;
    each queue's count and, when recorded, its ledger row's id.

    Other keys of a change's result are ignored; so are check-mode results, which committed nothing.
    """
    entries = {} if value is None else value
    shape = ("committed must map each queue to what the change committed, as awa_enqueue_shards returns it in "
             "queues (for example {orders: {shards: 8, ledger: {id: 12}}})")
    if not isinstance(entries, Mapping):
        raise InvalidRequest(f"{shape}; got {value!r}")
    committed = {}
    for queue, entry in entries.items():
        if not isinstance(entry, Mapping):
            raise InvalidRequest(f"{shape}; {queue!r} maps to {entry!r}")
        shards, ledger = entry.get("shards"), entry.get("ledger")
        ledger_id = ledger.get("id") if isinstance(ledger, Mapping) else None
        if entry.get("check_mode") is True:
            continue  # a check-mode run committed nothing
        if isinstance(shards, bool) or not isinstance(shards, int) or ledger_id is not None and (
                isinstance(ledger_id, bool) or not isinstance(ledger_id, int)):
            raise InvalidRequest(f"{shape}; {queue!r} has shards {shards!r} and ledger {ledger!r}")
        committed[str(queue)] = (shards, ledger_id)
    return committed


def missing_changes(committed: dict[str, tuple[int, int | None]], info: StateRead, server: str) -> list[str]:
    """One line per queue of ``info`` (a read) whose count is not the one committed, saying why and what to do.

    Queues the read did not cover are not judged.
    """
    problems = []
    for name, (shards, ledger_id) in committed.items():
        counts = info["queues"][name]["enqueue_shards"] if name in info["queues"] else {}
        if all(count == shards for count in counts.values()):
            continue
        values = sorted(set(counts.values()))
        found = "enqueue_shards " + (str(values[0]) if len(values) == 1 else
                                     ", ".join(f"{queue}: {count}" for queue, count in sorted(counts.items())))
        latest = max(info["queues"][name]["last_change"].values(), key=lambda row: row["id"], default=None)
        change = (f"change #{latest['id']} ({latest['from_shards']} -> {latest['to_shards']}, by "
                  f"{latest['changed_by']} at {latest['changed_at']})" if latest else "")
        said = (f"{name}: the change committed enqueue_shards {shards}"
                + (f" (ledger change #{ledger_id})" if ledger_id else "") + f", but {server}")
        if latest is not None and ledger_id is not None and latest["id"] > ledger_id:
            problems.append(f"{said} now holds {found}: it was changed again since, by {change}. Nothing "
                            f"will converge on {shards} here; if {found} is not what you want, run the change again.")
        else:
            history = f"its latest recorded change is {change}" if change else "it has no recorded change"
            problems.append(
                f"{said} holds {found} and {history}: the change is not on this server. This happens after a failover "
                "to a standby that had not received it (asynchronous replication): the commit was lost with the old "
                f"primary. Nothing will converge on {shards} here. Re-run the change against the new primary "
                f"(awa.operations.awa_enqueue_shards with queue {name} and shards {shards}, or the playbook "
                "awa.operations.set_enqueue_shards), then the wait.")
    return problems


def by_status(statuses: list[tuple[str, str]], limit: int | None = None) -> list[str]:
    """``name: status`` for each (queue, status), said once for the queues that share a status (``100 queues
    (q000..q099): status``), in the order the statuses first appear. Past ``limit`` different statuses, the other
    queues are only named."""
    grouped: dict[str, list[str]] = {}
    for name, status in statuses:
        grouped.setdefault(status, []).append(name)
    parts = [f"{named_queues(queues)}: {status}" for status, queues in list(grouped.items())[:limit]]
    others = [name for queues in list(grouped.values())[len(parts):] for name in queues]
    return parts + ([f"{counted(len(others), 'other queue')} ({names_text(others)})"] if others else [])


def progress_line(info: StateRead) -> str:
    """One line per poll: where each queue stands, the queues that stand alike together. Past LISTED different
    standings the other queues are only named (the read's result, and a timeout's message, say where each stands)."""
    parts = [f"{len(info['new_runtimes'])}/{info['expected_new_runtimes']} restarted runtimes live and healthy"
             ] if info.get("expected_new_runtimes") else []
    # A read without the lanes (lanes: false) does not know the depths.
    statuses = [(name, f"{view['runtimes_converged']}/{view['runtimes_live']} runtimes on "
                       f"{'/'.join(map(str, sorted(set(view['enqueue_shards'].values()))))} shards"
                       + ("" if "depth_beyond_count" not in view else
                          f", {'?' if view['depth_beyond_count'] is None else view['depth_beyond_count']} ready "
                          "beyond the count")
                       + (" (paused: nothing drains until it is resumed)" if view["paused"] else ""))
                for name, view in info["queues"].items()]
    return "; ".join(parts + by_status(statuses, LISTED)) or "no queues"


def poll_line(info: StateRead, wait: str, elapsed: float, timeout: float, drain: DrainHistory | None = None) -> str:
    """A poll as the controller prints it: the seconds against the wait's timeout, whether it holds, where each
    queue stands, and (with the ``drain`` so far) the time left at the rate the depth beyond the count falls."""
    done = PREDICATES[wait](info)
    left = "" if done or drain is None else drain.time_left(elapsed, timeout)
    return (f"{elapsed:5.0f}s of {timeout:g}s {'done' if done else f'waiting until {wait}'}: {progress_line(info)}"
            + (f"; {left}" if left else ""))


def note_new_jobs(read: PolledRead, first: dict[tuple[str, int, int], int]) -> None:
    """Say in ``read`` which shards at or above the count received new jobs since the wait's first read (``first``:
    each lane's enqueue cursor then, filled in as lanes are first seen).

    Drained means no ready job is left beyond the count, and none arriving: a
    producer that still runs the old count (one a rollout left alone, or one
    outside the inventory) keeps refilling those shards, and with fast workers
    their depth can read 0 at every poll. A lane's enqueue cursor grows with
    every job enqueued on it, so a queue whose cursors beyond the count moved
    since the wait's first read is not drained.
    """
    for view in read["queues"].values():
        moved = sorted({(lane["queue"], lane["shard"]) for lane in view.get("lanes", [])
                        if lane["beyond_count"] and (cursor := lane.get("enqueue_cursor")) is not None
                        and cursor > first.setdefault((lane["queue"], lane["priority"], lane["shard"]), cursor)})
        view["new_jobs_beyond_count"] = [{"queue": queue, "shard": shard} for queue, shard in moved]
        if moved:
            view["drained"] = False
    if "drained" in read:
        read["drained"] = all(view.get("drained", False) for view in read["queues"].values())


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
    # (queue, what holds it up): the queues held up alike are named together.
    held_up: list[tuple[str, str]] = []
    for name, view in ({} if wait == "restarted" else info["queues"]).items():
        if not view["converged"]:
            stragglers = {s["instance_id"]: s for s in view["stragglers"]}
            listed = "; ".join(f"{describe_runtime(s)}: {s['reason']}" for s in stragglers.values())
            held_up.append((name, f"{view['runtimes_converged']} of {view['runtimes_live']} live "
                                  f"runtimes on the current count; not yet: {listed}"))
            advice.append("restart the runtimes named (a runtime that is gone stops counting once Awa marks "
                          "it stale, 30 s after its last snapshot)")
        elif wait == "drained" and not view.get("drained", False):
            beyond, receiving = view.get("depth_beyond_count"), view.get("new_jobs_beyond_count")
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
            elif view["paused"]:
                held_up.append((name, f"{beyond} ready jobs remain on shards at or above the count, and the "
                                      "queue is paused: nothing drains until it is resumed"))
                advice.append(f"resume the queue (awa queue resume {name}) when the pause is over")
            else:
                held_up.append((name, f"{beyond} ready jobs remain on shards at or above the count"))
                advice.append("make sure workers serve the queue, or wait longer")
    unique_advice = list(dict.fromkeys(advice))
    return (f"Timed out after {elapsed:.0f}s waiting until {wait}. " + " | ".join(problems + by_status(held_up))
            + (". To finish: " + "; ".join(unique_advice) + "." if unique_advice else "."))


def poll_until(fetch: Callable[[], PolledRead], wait: str, timeout: float, sleep: float, *,
               lost: Callable[[BaseException], bool] | None = None,
               on_poll: Callable[[PolledRead, float], None] = lambda read, elapsed: None,
               on_attempt: Callable[[str, int, float], None] = lambda error, attempt, delay: None,
               clock: Callable[[], float] = time.monotonic,
               pause: Callable[[float], None] = time.sleep) -> ShardsInfo:
    """Poll ``fetch`` until ``wait`` (converged, drained or restarted) holds or ``timeout`` seconds pass; ``none``
    polls once, and a timeout of 0 means one look.

    Returns the last read with ``waited``, ``polls`` and ``duration``, and in
    ``warnings`` (after the read's own) one per lost connection the wait rode
    out. A poll that raises a failure ``lost`` accepts (a lost connection) is
    tried again on the FAILOVER_DELAYS schedule (``on_attempt`` hears of each
    attempt: the failure, its number, its delay); any other failure ends the
    wait as it is. Raises ``WaitTimeout`` when the deadline comes first and
    ``WaitInterrupted`` when the connection stays lost, each carrying that
    result, with the message that says what to do.
    """
    if wait != "none" and wait not in PREDICATES:
        raise InvalidRequest(f"wait must be one of {', '.join(('none', *PREDICATES))}, got {wait!r}")
    if wait == "none":
        return {**fetch(), "waited": False, "polls": 1, "duration": 0.0}
    started = clock()
    deadline = started + timeout
    delays = [max(sleep, delay) for delay in FAILOVER_DELAYS]
    polls = 0
    first: dict[tuple[str, int, int], int] = {}  # a drain's enqueue cursors at the first read (note_new_jobs)
    interruptions: list[tuple[float, str, int]] = []  # seconds into the wait, why, reconnection attempts
    failures: list[tuple[float, str]] = []  # a poll's failed tries: seconds into the wait, and why

    while True:
        failures.clear()
        for dummy in attempts(pause, delays, until=deadline, clock=clock,
                              before=lambda number, delay: on_attempt(failures[-1][1], number - 1, delay)):
            try:
                read = fetch()
                break
            except Exception as exc:  # pylint: disable=broad-exception-caught
                if lost is None or not lost(exc):
                    raise
                failures.append((clock() - started, getattr(exc, "message", str(exc))))
        else:  # the connection stayed lost: given up at the last failure
            ended = (f"the wait's deadline came after {len(failures) - 1} reconnection attempt(s)"
                     if deadline <= clock() else f"all {len(delays)} reconnection attempts failed")
            raise WaitInterrupted(
                f"The connection to the database was lost {failures[0][0]:.0f}s into the wait until {wait} "
                f"({failures[0][1]}), and {ended} (the last at {failures[-1][0]:.0f}s: {failures[-1][1]}). Nothing was "
                "changed: the wait only reads. When a primary accepts connections again (after a failover, list it in "
                "login_host), run the wait again (in the role: the entry point wait, or --tags enqueue_shards_wait). "
                "If a change ran just before, check its count there first - a failover to a standby that had not "
                "received it loses it: give the wait committed and it says so.",
                {**(read if polls else {}), "waited": True, "polls": polls, "duration": round(failures[-1][0], 3)})
        elapsed = clock() - started
        if failures:
            interruptions.append((*failures[0], len(failures)))
        if wait == "drained":
            note_new_jobs(read, first)
        polls += 1
        on_poll(read, elapsed)
        if PREDICATES[wait](read) or deadline <= clock():
            break
        pause(min(sleep, deadline - clock()))
    info: ShardsInfo = {**read, "waited": True, "polls": polls, "duration": round(elapsed, 3)}
    # A module run polled from the controller may carry no warnings of its own.
    info["warnings"] = list(info.get("warnings") or []) + [
        f"The connection to the database was lost {lost_at:.0f}s into the wait ({error}); the wait reconnected after "
        f"{tries} attempt(s) and read {info['server']} from then on (the primary now, if it was a failover). The "
        "state reported was read there." for lost_at, error, tries in interruptions]
    if not PREDICATES[wait](read):
        raise WaitTimeout(timeout_message(wait, info, elapsed), info)
    return info


def wait_for_shards_info(conn: Connection, wait: str, timeout: float, sleep: float,
                         on_poll: Callable[[PolledRead, float], None] = lambda read, elapsed: None, *,
                         reconnect: Callable[[], Connection] | None = None, **options: Any) -> ShardsInfo:
    """Read until ``wait`` (converged, drained or restarted) holds; raise WaitTimeout with the last state otherwise.

    ``options`` are wait_in_session's. With ``reconnect`` (a function opening
    a new connection), a poll that loses its connection is tried again on a
    new one, on the FAILOVER_DELAYS schedule; then the wait ends with
    ``WaitInterrupted``. The connections the wait opened are closed when it
    ends; ``conn`` is the caller's.
    """
    with closing(ReadSession(conn, reconnect)) as session:
        return wait_in_session(session, wait, timeout, sleep, on_poll, **options)


def wait_in_session(session: ReadSession, wait: str, timeout: float, sleep: float,
                    on_poll: Callable[[PolledRead, float], None] = lambda read, elapsed: None, *,
                    committed: dict[str, tuple[int, int | None]] | None = None, health: bool = False,
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
    Each read is checked against ``committed`` (validate_committed): a count
    that is not the one committed ends the wait at once with
    ``ChangeNotFound``. With ``health``, every poll also reads what the change
    shows (health.py). The result names the ``server`` read.
    """
    counted: list[Connection] = []  # the connections the wait counted lost

    def fetch() -> PolledRead:
        if session.reopen is not None and session.conn.closed and session.conn not in counted:
            # Lost after the last read, not during one (psycopg closed it after the read: the rollback that ends a
            # read's transaction met the server gone): the same interruption, so the wait says it reconnected rather
            # than open another connection without a word.
            counted.append(session.conn)
            raise ConnectionLost("the server ended the session after the last read")
        current = session.current()
        try:
            read: PolledRead = {**read_shards_info(current, **read_args), "server": server_address(current)}
            problems = missing_changes(committed or {}, read, read["server"])
            if problems:
                raise ChangeNotFound(" | ".join(problems), dict(read, waited=wait != "none"))
            if health:
                add_health(current, read, read_args.get("lock_timeout", DEFAULT_LOCK_TIMEOUT))
        except Disconnected:
            counted.append(current)
            current.close()  # the next poll opens another
            raise
        return read

    return poll_until(fetch, wait, timeout, sleep, on_poll=on_poll,
                      lost=(lambda exc: isinstance(exc, Disconnected)) if session.reopen is not None else None)
