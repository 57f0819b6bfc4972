# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The result of awa_enqueue_shards_info, declared once: what ``views`` builds and every reader imports.

The role's filters (plugins/plugin_utils), the info module's action plugin and
the shard_advice event source read this result by key; these TypedDicts (PEP
589) name every key and its type. tests/unit/plugins/module_utils/info/test_result.py
holds them against the module's RETURN documentation, the recorded results the
unit tests use, and results read from live databases (PostgreSQL 17 and 18).

Modules run on Python 3.10, where ``typing.NotRequired`` does not exist yet
(3.11), and module_utils may not depend on typing_extensions: a key that is
not always returned is declared in a subclass with ``total=False``.
"""

from __future__ import annotations

from typing import TypedDict

from ansible_collections.awa.operations.plugins.module_utils.advice.result import Advice


class RuntimeIdentity(TypedDict):
    """A runtime as every view of it names it."""

    instance_id: str
    hostname: str | None
    pid: int
    version: str
    started_at: str
    seconds_since_start: float
    seconds_since_seen: float


class RuntimeView(RuntimeIdentity):
    """One ``awa.runtime_instances`` row, judged by the database's clock."""

    last_seen_at: str
    live: bool
    stale: bool
    shutting_down: bool
    healthy: bool
    leader: bool
    # physical queue -> the count its snapshot reports (no released Awa reports one yet).
    reported_shards: dict[str, int]
    # Logical queues whose current count this runtime does not run with yet.
    pending_queues: list[str]
    converged: bool


class StragglerView(RuntimeIdentity):
    """A live runtime not yet on the current count of one physical queue, and why."""

    physical_queue: str
    reason: str


class ChangeView(TypedDict):
    """The last recorded switch of one physical queue's count (the change ledger)."""

    id: int
    changed_at: str
    from_shards: int
    to_shards: int
    changed_by: str
    reason: str | None


class ShardRef(TypedDict):
    """A shard of a physical queue."""

    queue: str
    shard: int


class LaneRef(ShardRef):
    """A lane named by its key."""

    priority: int


class ShardView(ShardRef):
    """The lanes of one (physical queue, shard), summed over priorities (None where a lane's sequences are
    unreadable)."""

    beyond_count: bool
    ready_depth: int | None
    seq_lag: int | None
    oldest_ready_age_seconds: float | None


class LaneView(LaneRef, ShardView):
    """One lane: whether it is whole, and its exact ready depth (None when its sequences are unreadable)."""

    complete: bool
    readable: bool
    enqueue_cursor: int | None


class MissingGrant(TypedDict):
    """Privileges a runtime role lacks on lane sequences of the queue."""

    role: str
    privileges: list[str]
    sequences: int
    examples: list[str]


class Grants(TypedDict):
    missing: list[MissingGrant]
    # role -> how many of the queue's lane sequences it owns.
    sequence_owners: dict[str, int]


class QueueConvergenceView(TypedDict):
    """What every read says about one logical queue: its count, its runtimes on it, its last change."""

    queue: str
    stripes: int
    physical_queues: list[str]
    enqueue_shards: dict[str, int]
    # Whether the database has ever seen it: a queue_meta row, lanes, jobs or a runtime serving it.
    known: bool
    paused: bool
    ordering: str
    converged: bool
    runtimes_live: int
    runtimes_converged: int
    stragglers: list[StragglerView]
    last_change: dict[str, ChangeView]
    findings: list[str]


class QueueView(QueueConvergenceView, total=False):
    """Everything the module says about one logical queue. The keys below come from its lanes: every read has them
    but one with ``lanes: false`` (views.LANE_KEYS); the module returns ``lanes``, ``shards`` and ``summary_lines``
    only with ``detail`` (views.QUEUE_DETAIL_KEYS)."""

    # This queue's lines of the read's summary_lines.
    summary_lines: list[str]
    drained: bool
    ready_depth: int | None
    depth_beyond_count: int | None
    lanes_complete: int
    lanes_missing: list[LaneRef]
    lanes: list[LaneView]
    shards: list[ShardView]
    grants: Grants
    # Only in a wait until drained (wait.note_new_jobs).
    new_jobs_beyond_count: list[ShardRef]


class QueueHealth(TypedDict):
    """One queue's failed and retried jobs since its last recorded change (None: no change recorded)."""

    since: str | None
    failed_jobs: int | None
    retried_jobs: int | None


class HealthView(TypedDict):
    """What a bad change shows on the database side (``health: true``; health.py)."""

    read_at: str
    deadlocks: int
    stats_reset: str | None
    queues: dict[str, QueueHealth]


class _StateReadAlways(TypedDict):
    summary_lines: list[str]
    read_at: str
    expected_new_runtimes: int
    converged: bool
    queues: dict[str, QueueView]
    findings: list[str]


class StateRead(_StateReadAlways, total=False):
    """What one read of the state says: the info module's result, and the change module's ``observed``.

    The readers of either (the role's restart plan and verdicts) take this type. A read has every key; the modules
    return the runtimes and the summary as one string only with ``detail`` (views.DETAIL_KEYS), as the role asks.
    """

    # Every read but one with lanes: false.
    drained: bool
    runtimes: list[RuntimeView]
    new_runtimes: list[RuntimeView]
    summary: str


class ShardsRead(StateRead):
    """One read of the state (``read.read_shards_info``)."""

    changed: bool
    # Handed to Ansible's warnings by the module.
    warnings: list[str]


class ObservedRead(StateRead):
    """The change module's ``observed``: the read right after the change, on the change's connection."""

    # host:port of the server read.
    server: str


class PolledRead(ShardsRead, ObservedRead, total=False):
    """One poll of a wait: a read, the server it read (after a failover, the one the wait reconnected to; added by
    the wait), and (``health: true``) what the change shows, read with it."""

    health: HealthView


class _WaitedRead(PolledRead):
    waited: bool
    polls: int
    duration: float


class ShardsInfo(_WaitedRead, total=False):
    """The module's result: the last read, how the wait went, and (``advise: true``) the advice."""

    advice: dict[str, Advice]
    # On a failure only: no server accepted the connection, or it was lost; a later attempt may succeed.
    disconnected: bool
