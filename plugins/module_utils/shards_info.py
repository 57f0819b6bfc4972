# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the shard state of one or all queues, and wait for convergence or drain. Read-only.

    from ansible_collections.awa.operations.plugins.module_utils.connection import open_connection
    from ansible_collections.awa.operations.plugins.module_utils.shards_info import read_shards_info

    with open_connection({"login_host": "db1", "login_db": "app", "login_user": "awa_migrator"}) as conn:
        info = read_shards_info(conn, queue="orders")
        print("\\n".join(info["summary_lines"]))

Each read takes the state (counts, lanes, grants, runtimes, the ledger, and
the depths of the first thousand lanes) in one REPEATABLE READ, READ ONLY
transaction of a fixed number of statements. The depths of further lanes are
read in further READ ONLY transactions of at most a thousand lanes each,
because reading a lane's cursors locks its two sequences until the
transaction ends. Every transaction sets ``lock_timeout``: reads take only
ACCESS SHARE locks, so they wait only behind DDL (for example an ``awa
migrate`` holding ACCESS EXCLUSIVE), and fail with ``LockTimeout`` naming the
holder rather than wait for it. A wait stops at the first poll that fails so.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import ContextManager

from ansible_collections.awa.operations.plugins.module_utils import (
    advice,
    introspect,
    ledger,
    load_window,
    report,
    shard_gains,
    waiters,
)
from ansible_collections.awa.operations.plugins.module_utils.connection import (
    DEFAULT_LOCK_TIMEOUT,
    transaction,
    validate_lock_timeout,
)
from ansible_collections.awa.operations.plugins.module_utils.convergence import DEFAULT_MARGIN_SECONDS
from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest, PreconditionFailed, WaitTimeout
from ansible_collections.awa.operations.plugins.module_utils.naming import logical_queue, validate_queue_name
from ansible_collections.awa.operations.plugins.module_utils.preconditions import check_installation, resolve_stripes


DEFAULT_WAIT_TIMEOUT = 300.0
DEFAULT_WAIT_SLEEP = 2.0
DEFAULT_ADVISE_WINDOW = 10.0


def info_argument_spec() -> dict:
    """awa_enqueue_shards_info's own options (shared with its action plugin)."""
    return {
        "queue": {"type": "str"},
        "queues": {"type": "list", "elements": "str"},
        "stripes": {"type": "int"},
        "runtime_roles": {"type": "list", "elements": "str", "default": []},
        "wait": {"type": "str", "default": "none", "choices": list(waiters.WAIT_CHOICES)},
        "wait_timeout": {"type": "float", "default": DEFAULT_WAIT_TIMEOUT},
        "wait_sleep": {"type": "float", "default": DEFAULT_WAIT_SLEEP},
        "clock_margin": {"type": "float", "default": DEFAULT_MARGIN_SECONDS},
        "known_runtimes": {"type": "list", "elements": "str", "default": []},
        "expected_new_runtimes": {"type": "int", "default": 0},
        "ledger_schema": {"type": "str", "default": ledger.DEFAULT_SCHEMA},
        "lock_timeout": {"type": "float", "default": DEFAULT_LOCK_TIMEOUT},
        "advise": {"type": "bool", "default": False},
        "advise_window": {"type": "float", "default": DEFAULT_ADVISE_WINDOW},
        "advise_gains": {"type": "dict"},
        "health": {"type": "bool", "default": False},
    }


def validate_read_options(timeout: float, sleep: float, lock_timeout: float) -> None:
    """The info module's numeric options (wait_timeout, wait_sleep, lock_timeout), checked before connecting."""
    validate_lock_timeout(lock_timeout)
    if not 0 <= timeout <= 86400:
        raise InvalidRequest(f"wait_timeout must be between 0 and 86400 seconds, got {timeout}")
    if not 0.1 <= sleep <= 3600:
        raise InvalidRequest(f"wait_sleep must be between 0.1 and 3600 seconds, got {sleep}")


def validate_advice_options(advise: bool, window: float, gains: dict | None, wait: str) -> None:
    """advise, advise_window and advise_gains, checked before connecting."""
    if advise and wait != "none":
        raise InvalidRequest(f"advise watches the load and wait watches a change: give advise or wait={wait}, not "
                             "both (run them as two tasks)")
    if not 1 <= window <= 600:
        raise InvalidRequest(f"advise_window must be between 1 and 600 seconds, got {window}")
    if gains is None:
        return
    table = gains.get("gains")
    shape = "advise_gains must be a gains table as benchmarks/shard_gains.py prints it: {'gains': {PATH: {N: {S: gain}}}}"
    if not isinstance(table, dict) or not table:
        raise InvalidRequest(f"{shape}; it has no 'gains'")
    for path, rows in table.items():
        if path not in ("insert", "copy", "copy_keyed") or not isinstance(rows, dict):
            raise InvalidRequest(f"{shape}; PATH is insert, copy or copy_keyed, got {path!r}")
        for producers, row in rows.items():
            try:
                valid = int(producers) >= 1 and isinstance(row, dict) and row and all(
                    int(shards) >= 1 and float(gain) > 0 for shards, gain in row.items())
            except (TypeError, ValueError):
                valid = False
            if not valid:
                raise InvalidRequest(f"{shape}; {path} row {producers!r} is not a mapping of shard counts to "
                                     f"positive gains: {row!r}")


def advise_queues(conn, info: dict, seconds: float, lock_timeout: float, measured: dict | None = None) -> dict:
    """Watch the load on the queues of ``info`` for ``seconds`` and advise a shard count for each.

    Returns queue -> advice (advice.advise); ``measured`` defaults to the shipped gains table.
    """
    views = info["queues"]
    physical = [name for view in views.values() for name in view["physical_queues"]]
    window = load_window.watch(conn, physical, seconds, lock_timeout)
    table = measured or shard_gains.MEASURED
    advised = {}
    for name, view in views.items():
        shards = max(view["enqueue_shards"].values(), default=1)
        advised[name] = advice.advise(advice.queue_load(name, view["physical_queues"], shards, window), window.tally, table)
    return advised


def add_advice(info: dict, advised: dict) -> None:
    """Put the advice into a read's result: ``advice``, its lines in the summary, its findings among the findings."""
    info["advice"] = advised
    lines = [f"advice: {view['message']} {view['ordering']}" for view in advised.values()]
    info["summary_lines"] = info["summary_lines"] + lines
    info["summary"] = "\n".join(info["summary_lines"])
    info["findings"] = list(dict.fromkeys(info["findings"] + [finding for view in advised.values()
                                                              for finding in view["findings"]]))


def progress_line(info: dict) -> str:
    """One line per poll: where each queue stands."""
    parts = []
    if info.get("expected_new_runtimes"):
        parts.append(f"{len(info['new_runtimes'])}/{info['expected_new_runtimes']} restarted runtimes live and healthy")
    for name, queue_view in info["queues"].items():
        beyond = queue_view["depth_beyond_count"]
        parts.append(f"{name}: {queue_view['runtimes_converged']}/{queue_view['runtimes_live']} runtimes on "
                     f"{'/'.join(map(str, sorted(set(queue_view['enqueue_shards'].values()))))} shards, "
                     f"{'?' if beyond is None else beyond} ready beyond the count"
                     + (" (paused: nothing drains until it is resumed)" if queue_view["paused"] else ""))
    return "; ".join(parts) or "no queues"


def _layouts(conn, schema: str, selected: tuple[str, ...] | None, stripes: int | None) -> tuple[dict, list[str]]:
    """logical queue -> StripeLayout, for the selected queues or (None) every stored queue.

    A stripe layout that cannot be resolved is an error for a queue asked for
    by name, and a finding when every queue is scanned.
    """
    if selected == ():
        return {}, []
    if selected is not None and len(selected) == 1:
        known = introspect.fetch_known_queue_names(conn, schema, selected[0])
        return {selected[0]: resolve_stripes(selected[0], stripes, known)}, []
    grouped: dict[str, list[str]] = defaultdict(list)
    for name in introspect.fetch_all_queue_names(conn, schema):
        grouped[logical_queue(name)].append(name)
    layouts, findings = {}, []
    for logical in sorted(grouped) if selected is None else selected:
        try:
            layouts[logical] = resolve_stripes(logical, None, grouped.get(logical, []))
        except PreconditionFailed as exc:
            if selected is not None:
                raise
            findings.append(exc.message)
    return layouts, findings


# Lanes whose depth is read in one transaction (two sequence locks each).
DEPTH_LANES_PER_TRANSACTION = 1000


def depth_chunks(physical: list[str], state: introspect.QueueState) -> list[list[str]]:
    """Physical queues grouped so each group has at most DEPTH_LANES_PER_TRANSACTION lanes (unless one alone has more)."""
    lanes = Counter(lane.queue for lane in state.lanes)
    chunks: list[list[str]] = []
    size = 0
    for queue in physical:
        if not chunks or size + lanes[queue] > DEPTH_LANES_PER_TRANSACTION:
            chunks.append([])
            size = 0
        chunks[-1].append(queue)
        size += lanes[queue]
    return chunks


def _read_only_transaction(conn, selected: tuple[str, ...] | None, ledger_schema: str,
                           lock_timeout: float) -> ContextManager[None]:
    what = ", ".join(map(repr, selected)) if selected else "the runtimes" if selected == () else "every queue"
    return transaction(conn, f"reading the shard state of {what}", lock_timeout=lock_timeout, read_only=True,
                       repeatable_read=True,
                       on_lock_timeout=lambda: introspect.describe_lock_holders(conn, ["awa", ledger_schema]))


def _read(conn, selected: tuple[str, ...] | None, stripes: int | None, runtime_roles: tuple[str, ...], ledger_schema: str,
          margin_seconds: float, known_runtimes: frozenset, expected_new_runtimes: int, lock_timeout: float) -> dict:
    with _read_only_transaction(conn, selected, ledger_schema, lock_timeout):
        installation = introspect.fetch_installation(conn, list(runtime_roles), ledger_schema, ledger.TABLE)
        read_at = introspect.fetch_database_clock(conn)
        warnings = check_installation(installation, runtime_roles)
        schema = installation.queue_storage_schema
        layouts, findings = _layouts(conn, schema, selected, stripes)
        physical = [name for layout in layouts.values() for name in layout.physical_queues]
        state = introspect.fetch_queue_state(conn, schema, physical, list(runtime_roles))
        runtimes = introspect.fetch_runtimes(conn)
        changes = introspect.fetch_latest_changes(conn, ledger_schema, physical) if installation.ledger_exists else {}
        chunks = depth_chunks(physical, state)
        depths = introspect.fetch_lane_depths(conn, schema, chunks[0]) if chunks else []
    # Reading a lane's cursors locks its two sequences until the transaction ends (docs/awa-internals.md §9):
    # a transaction per chunk, so thousands of lanes cannot exhaust the lock table.
    for chunk in chunks[1:]:
        with _read_only_transaction(conn, selected, ledger_schema, lock_timeout):
            depths += introspect.fetch_lane_depths(conn, schema, chunk)
    if not installation.ledger_exists:
        warnings.append(f"No change ledger {ledger_schema}.{ledger.TABLE}: no change was recorded, so runtimes "
                        "are judged converged. Change counts with awa.operations.awa_enqueue_shards to record them.")
    queues = {logical: report.queue_report(layout, logical, state, depths, runtimes, changes, runtime_roles,
                                           margin_seconds)
              for logical, layout in layouts.items()}
    pending: dict[str, list[str]] = defaultdict(list)
    for logical, queue_view in queues.items():
        for straggler in queue_view["stragglers"]:
            if logical not in pending[straggler["instance_id"]]:
                pending[straggler["instance_id"]].append(logical)
    runtime_views = []
    for runtime in runtimes:
        view = report.runtime_view(runtime)
        view["pending_queues"] = pending.get(runtime.instance_id, [])
        view["converged"] = runtime.live and not view["pending_queues"]
        runtime_views.append(view)
    lines = [line for queue_view in queues.values() for line in queue_view["summary_lines"]]
    new_runtimes = [view for view in runtime_views
                    if view["live"] and view["healthy"] and view["instance_id"] not in known_runtimes]
    return {
        "changed": False,
        "read_at": read_at.isoformat(),
        "new_runtimes": new_runtimes,
        "expected_new_runtimes": expected_new_runtimes,
        "converged": all(q["converged"] for q in queues.values()),
        "drained": all(q["drained"] for q in queues.values()),
        "queues": queues,
        "runtimes": runtime_views,
        "findings": findings + [finding for q in queues.values() for finding in q["findings"]],
        "summary": "\n".join(lines),
        "summary_lines": lines,
        "warnings": warnings,
    }


def read_shards_info(conn, *, queue: str | None = None, queues: list[str] | None = None, stripes: int | None = None,
                     runtime_roles: tuple[str, ...] = (), ledger_schema: str = ledger.DEFAULT_SCHEMA,
                     margin_seconds: float = DEFAULT_MARGIN_SECONDS, known_runtimes: tuple[str, ...] = (),
                     expected_new_runtimes: int = 0, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> dict:
    """A read-only look at ``queue``, at ``queues``, or at every queue when neither is given.

    ``new_runtimes`` lists live, healthy runtimes not in ``known_runtimes``
    (instance ids seen before a restart), for ``wait: restarted``. Raises
    ``LockTimeout`` when a lock is not granted within ``lock_timeout`` seconds.
    """
    if queue is not None and queues:
        raise InvalidRequest("give queue or queues, not both")
    # No queue named: every queue. An empty list of queues: none, only the runtimes.
    selected = (queue,) if queue is not None else tuple(dict.fromkeys(queues)) if queues is not None else None
    for name in selected or ():
        validate_queue_name(name)
    if stripes is not None and (selected is None or len(selected) != 1):
        raise InvalidRequest("stripes applies to one queue: set queue too (stripes are detected for every queue)")
    return _read(conn, selected, stripes, tuple(runtime_roles), ledger_schema, margin_seconds,
                 frozenset(known_runtimes), expected_new_runtimes, lock_timeout)


def timeout_message(wait: str, info: dict, elapsed: float) -> str:
    """Why a wait ended without success: every straggler and every undrained queue, and what to do."""
    problems, advice = [], []
    if wait == "restarted":
        new = info["new_runtimes"]
        problems.append(f"{len(new)} of {info['expected_new_runtimes']} restarted runtimes are live and healthy"
                        + (f" (seen: {', '.join(report.describe_runtime(view) for view in new)})" if new else ""))
        advice.append("check the restarted services and their logs; the rollout stops here")
    queues = {} if wait == "restarted" else info["queues"]
    for name, queue_view in queues.items():
        if not queue_view["converged"]:
            stragglers = {s["instance_id"]: s for s in queue_view["stragglers"]}
            listed = "; ".join(f"{report.describe_runtime(s)}: {s['reason']}" for s in stragglers.values())
            problems.append(f"{name}: {queue_view['runtimes_converged']} of {queue_view['runtimes_live']} live "
                            f"runtimes on the current count; not yet: {listed}")
            advice.append("restart the runtimes named (a runtime that is gone stops counting once Awa marks "
                          "it stale, 30 s after its last snapshot)")
        elif wait == "drained" and not queue_view["drained"]:
            beyond = queue_view["depth_beyond_count"]
            if beyond is None:
                problems.append(f"{name}: the depth beyond the count is unknown (lane sequences not readable)")
                advice.append("connect as a role that can read the lane sequences (their owner or a member of it)")
            elif queue_view["paused"]:
                problems.append(f"{name}: {beyond} ready jobs remain on shards at or above the count, and the "
                                "queue is paused: nothing drains until it is resumed")
                advice.append(f"resume the queue (awa queue resume {name}) when the pause is over")
            else:
                problems.append(f"{name}: {beyond} ready jobs remain on shards at or above the count")
                advice.append("make sure workers serve the queue, or wait longer")
    unique_advice = list(dict.fromkeys(advice))
    return (f"Timed out after {elapsed:.0f}s waiting until {wait}. " + " | ".join(problems)
            + (". To finish: " + "; ".join(unique_advice) + "." if unique_advice else "."))


def wait_for_shards_info(conn, wait: str, timeout: float, sleep: float,
                         on_poll: Callable[[dict, float], None] | None = None, **read_args) -> dict:
    """Read until ``wait`` (converged, drained or restarted) holds; raise WaitTimeout with the last state otherwise.

    A poll that is not granted a lock within ``lock_timeout`` ends the wait at
    once with its ``LockTimeout``: something holds Awa's tables (DDL), the
    state cannot be seen, and the operator must know rather than wait blind.
    """
    if wait not in waiters.WAIT_CHOICES:
        raise InvalidRequest(f"wait must be one of {', '.join(waiters.WAIT_CHOICES)}, got {wait!r}")
    if wait == "none":
        info = read_shards_info(conn, **read_args)
        info.update(waited=False, polls=1, duration=0.0)
        return info
    outcome = waiters.wait_until(lambda: read_shards_info(conn, **read_args), waiters.PREDICATES[wait],
                                 timeout, sleep, on_poll=on_poll)
    info = dict(outcome.last, waited=True, polls=outcome.polls, duration=round(outcome.elapsed, 3))
    if not outcome.satisfied:
        raise WaitTimeout(timeout_message(wait, info, outcome.elapsed), info)
    return info
