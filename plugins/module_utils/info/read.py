# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the shard state of one, some or all queues: the read of awa_enqueue_shards_info. Read-only.

    from ansible_collections.awa.operations.plugins.module_utils.db.connection import open_connection
    from ansible_collections.awa.operations.plugins.module_utils.info.read import read_shards_info

    with open_connection({"login_host": "db1", "login_db": "app", "login_user": "awa_migrator"}) as conn:
        info = read_shards_info(conn, queue="orders")
        print("\\n".join(info["summary_lines"]))

Each read takes the state (counts, lanes, grants, runtimes, the ledger, and
the depths of the first thousand lanes) in one REPEATABLE READ, READ ONLY
transaction of a fixed number of statements (without ``lanes``: the counts,
runtimes and ledger only, in fewer). The depths of further lanes are
read in further READ ONLY transactions of at most a thousand lanes each,
because reading a lane's cursors locks its two sequences until the
transaction ends. Every transaction sets ``lock_timeout``: reads take only
ACCESS SHARE locks, so they wait only behind DDL (for example an ``awa
migrate`` holding ACCESS EXCLUSIVE), and fail with ``LockTimeout`` naming the
holder rather than wait for it. Waiting is wait.py's, advice
info_run.py's; the result is declared in result.py.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, ContextManager

from ansible_collections.awa.operations.plugins.module_utils.db.connection import transaction
from ansible_collections.awa.operations.plugins.module_utils.db.options import DEFAULT_LOCK_TIMEOUT, DEFAULT_SCHEMA
from ansible_collections.awa.operations.plugins.module_utils.errors import PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.info import views
from ansible_collections.awa.operations.plugins.module_utils.info.convergence import DEFAULT_MARGIN_SECONDS
from ansible_collections.awa.operations.plugins.module_utils.schema import installation, ledger
from ansible_collections.awa.operations.plugins.module_utils.schema.lanes import (
    LaneDepth, QueueState, fetch_lane_depths, fetch_queue_counts, fetch_queue_state)
from ansible_collections.awa.operations.plugins.module_utils.schema.queues import (
    fetch_all_queue_names, fetch_queue_names)
from ansible_collections.awa.operations.plugins.module_utils.schema.runtimes import fetch_runtimes
from ansible_collections.awa.operations.plugins.module_utils.schema.sessions import describe_lock_holders
from ansible_collections.awa.operations.plugins.module_utils.info.options import selected_queues
from ansible_collections.awa.operations.plugins.module_utils.info.result import ShardsRead
from ansible_collections.awa.operations.plugins.module_utils.info.service_runtimes import (
    RestartedService, WindowService, left_out)
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import (
    StripeLayout, logical_queue, never_seen, resolve_stripes)

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection


def _layouts(conn: Connection, schema: str, selected: tuple[str, ...] | None,
             stripes: int | None) -> tuple[dict[str, StripeLayout], list[str], dict[str, str]]:
    """logical queue -> StripeLayout, for the selected queues or (None) every stored queue; and what is known of the
    selected queues the database has never seen (queue_rules.never_seen, by queue).

    A stripe layout that cannot be resolved is an error for a queue asked for
    by name, and a finding when every queue is scanned.
    """
    if selected == ():
        return {}, [], {}
    if selected is not None:
        names = fetch_queue_names(conn, schema, list(selected))
        unknown = [logical for logical in selected if not names.known(logical)]
        known = fetch_all_queue_names(conn, schema, used=True) if unknown else []
        return ({logical: resolve_stripes(logical, stripes, names.stored[logical]) for logical in selected}, [],
                {logical: never_seen(logical, known) for logical in unknown})
    grouped: dict[str, list[str]] = defaultdict(list)
    for name in fetch_all_queue_names(conn, schema):
        grouped[logical_queue(name)].append(name)
    layouts: dict[str, StripeLayout] = {}
    findings: list[str] = []
    for logical in sorted(grouped):
        try:
            layouts[logical] = resolve_stripes(logical, None, grouped[logical])
        except PreconditionFailed as exc:
            findings.append(exc.message)
    return layouts, findings, {}


# Lanes whose depth is read in one transaction (two sequence locks each).
DEPTH_LANES_PER_TRANSACTION = 1000


def depth_chunks(physical: list[str], state: QueueState) -> list[list[str]]:
    """Physical queues grouped so each group has at most DEPTH_LANES_PER_TRANSACTION lanes (unless one alone has more)."""
    counted = Counter(lane.queue for lane in state.lanes)
    chunks: list[list[str]] = []
    for queue in physical:
        if not chunks or sum(counted[name] for name in chunks[-1]) + counted[queue] > DEPTH_LANES_PER_TRANSACTION:
            chunks.append([])
        chunks[-1].append(queue)
    return chunks


def _read_only_transaction(conn: Connection, selected: tuple[str, ...] | None, ledger_schema: str,
                           lock_timeout: float) -> ContextManager[None]:
    what = ", ".join(map(repr, selected)) if selected else "the runtimes" if selected == () else "every queue"
    return transaction(conn, f"reading the shard state of {what}", lock_timeout=lock_timeout, read_only=True,
                       repeatable_read=True, on_lock_timeout=lambda: describe_lock_holders(conn, ["awa", ledger_schema]))


def read_shards_info(conn: Connection, *, queue: str | None = None, queues: list[str] | None = None, stripes: int | None = None,
                     runtime_roles: tuple[str, ...] = (), ledger_schema: str = DEFAULT_SCHEMA,
                     margin_seconds: float = DEFAULT_MARGIN_SECONDS, known_runtimes: tuple[str, ...] = (),
                     expected_new_runtimes: int = 0, lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
                     lanes: bool = True, restarted_services: Sequence[RestartedService] = (),
                     window_services: Sequence[WindowService] = ()) -> ShardsRead:
    """A read-only look at ``queue``, at ``queues``, or at every queue when neither is given.

    ``new_runtimes`` lists live, healthy runtimes not in ``known_runtimes``
    (instance ids seen before a restart), for ``wait: restarted``: with
    ``restarted_services``, those of the services a batch restarted, plus
    ``expected_new_runtimes`` more counted among the others
    (views.shards_read). Without ``lanes``, the lanes are not read (nor their
    grants and depths): a queue's view then has its count, its convergence
    and its last change only (views.LANE_KEYS are absent, and so is
    ``drained``), in a fixed number of statements whatever the number of
    lanes - what a wait for restarted runtimes needs. With
    ``window_services`` (a rollout's producer services), the runtimes of
    those the change does not concern, and those outside the window
    (service_runtimes.left_out), are left out of each queue's convergence;
    the result still lists them in ``runtimes``. Raises ``LockTimeout`` when
    a lock is not granted within ``lock_timeout`` seconds.
    """
    selected = selected_queues(queue, queues, stripes)
    runtime_roles = tuple(runtime_roles)
    with _read_only_transaction(conn, selected, ledger_schema, lock_timeout):
        found = installation.fetch_installation(conn, list(runtime_roles), ledger_schema, ledger.TABLE)
        read_at = installation.fetch_database_clock(conn)
        schema, warnings = installation.check_installation(found, runtime_roles)
        layouts, findings, unknown = _layouts(conn, schema, selected, stripes)
        physical = [name for layout in layouts.values() for name in layout.physical_queues]
        state = (fetch_queue_state(conn, schema, physical, list(runtime_roles)) if lanes
                 else fetch_queue_counts(conn, physical))
        runtimes = fetch_runtimes(conn)
        latest = ledger.fetch_latest_changes(conn, ledger_schema, physical) if found.ledger_exists else {}
        chunks = depth_chunks(physical, state) if lanes else []
        observed = fetch_lane_depths(conn, schema, chunks[0]) if chunks else []
    # Reading a lane's cursors locks its two sequences until the transaction ends (docs/awa-internals.md §9):
    # a transaction per chunk, so thousands of lanes cannot exhaust the lock table.
    for chunk in chunks[1:]:
        with _read_only_transaction(conn, selected, ledger_schema, lock_timeout):
            observed += fetch_lane_depths(conn, schema, chunk)
    if not found.ledger_exists:
        warnings.append(f"No change ledger {ledger_schema}.{ledger.TABLE}: no change was recorded, so runtimes "
                        "are judged converged. Change counts with awa.operations.awa_enqueue_shards to record them.")
    # A runtime of a service the change does not concern keeps the old count by design, and one outside the change
    # window is another's to restart: convergence does not wait for either.
    outside = left_out(window_services, [(runtime.instance_id, runtime.pid, runtime.hostname,
                                          runtime.started_at.timestamp()) for runtime in runtimes])
    concerned = [runtime for runtime in runtimes if runtime.instance_id not in outside]
    depths_by_queue: dict[str, list[LaneDepth]] = {}
    for depth in observed:
        depths_by_queue.setdefault(depth.queue, []).append(depth)
    views_read = {logical: views.queue_view(layout, logical, state, depths_by_queue, concerned, latest, runtime_roles,
                                            margin_seconds, lanes=lanes, never_seen=unknown.get(logical))
                  for logical, layout in layouts.items()}
    return views.shards_read(views_read, runtimes, read_at=read_at, findings=findings, warnings=warnings,
                             known_runtimes=frozenset(known_runtimes), expected_new_runtimes=expected_new_runtimes,
                             lanes=lanes, restarted_services=restarted_services)
