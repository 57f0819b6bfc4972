# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The result of awa_enqueue_shards, declared once: what ``operation`` builds and every reader imports.

The role's filters (plugins/plugin_utils), the info module's ``committed``
option (wait.validate_committed) and the benchmarks read this result by
key; these TypedDicts (PEP 589) name every key and its type.
tests/unit/plugins/module_utils/change/test_result.py holds them
against the module's RETURN documentation, the recorded results the role's
unit tests use, and results of live changes on PostgreSQL 17 and 18.

Three shapes: a queue's own change (``QueueChange``, also each entry of a
list run's ``queues``), what the Python API returns (operation.change_queues:
``QueueChangeRun`` for one request, ``ChangesRun`` for a list), and the module's result
(``EnqueueShardsResult``): either of those without ``warnings`` (handed to
Ansible's warnings) and with ``diff`` only in diff mode (``ChangeOutcome``),
and the read after the change (``observed``). As in
info/result.py, a key not always returned is declared in a subclass with
``total=False`` (modules run on Python 3.10, before ``typing.NotRequired``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from ansible_collections.awa.operations.plugins.module_utils.info.result import ObservedRead

if TYPE_CHECKING:
    # For annotations only: the ledger imports the database driver, and the role's filters, which read results
    # with this file in every worker, do not need it.
    from ansible_collections.awa.operations.plugins.module_utils.schema.ledger import LedgerRow


class PhysicalQueueSide(TypedDict):
    """One physical queue on one side of the diff (plan.queue_summary)."""

    enqueue_shards: int
    # Complete lanes, and lanes below the count that are not complete.
    lanes: int
    lanes_missing: int
    # (runtime role, privilege, lane sequence) triples missing.
    missing_grants: int


class ChangeDiff(TypedDict):
    before: dict[str, PhysicalQueueSide]
    after: dict[str, PhysicalQueueSide]


class _LostCommitOutcome(TypedDict):
    outcome: str  # committed, not applied or unknown


class LostCommit(_LostCommitOutcome, total=False):
    """How a COMMIT whose connection was lost was looked up (lost_commit); only ``outcome`` when unknown."""

    resolved_by: str
    reconnect_attempts: int


class ChangeTotals(TypedDict):
    """What every result says: of one queue, or summed and merged over a list of them."""

    changed: bool
    check_mode: bool
    physical_queues: list[str]
    previous_shards: dict[str, int]
    lanes_created: int
    lanes_repaired: int
    grants_added: int
    duration: float


class _Applied(TypedDict, total=False):
    # A change applied (not in check mode, not when nothing changed): its ledger row (with the ledger) and id.
    ledger: LedgerRow
    change_id: str
    # The connection was lost while COMMIT was in flight, and the change was found committed.
    lost_commit: LostCommit


class _QueueChangeAlways(ChangeTotals):
    queue: str
    shards: int
    stripes: int
    ordering: str


class QueueChange(_QueueChangeAlways, _Applied):
    """One queue's change, as each entry of a list run's ``queues`` holds it."""


class _Statements(TypedDict):
    """What a run reports once: the statements it ran (or would run), its diff, and its warnings."""

    queries: list[str]
    diff: ChangeDiff
    # Handed to Ansible's warnings by the module.
    warnings: list[str]


class QueueChangeRun(QueueChange, _Statements):
    """``operation.change_queues`` of one queue (the module's ``queue``): its change with its statements."""


class ChangesRun(ChangeTotals, _Statements):
    """``operation.change_queues`` of a list (the module's ``queues``): the totals, and each queue's own change."""

    queues: dict[str, QueueChange]


class ChangeOutcome(ChangeTotals, _Applied, total=False):
    """What the module says of its change: one queue's (``queue``) or a list's (``queues``)."""

    # Only with detail (the module's option).
    queries: list[str]
    queue: str
    shards: int
    stripes: int
    ordering: str
    queues: dict[str, QueueChange]
    # Only in diff mode.
    diff: ChangeDiff


class EnqueueShardsResult(ChangeOutcome):
    """The module's result: its change, and the changed queues read right after it."""

    # In check mode: the state now. As the info module reads them (info/result.py).
    observed: ObservedRead


def queue_changes(result: EnqueueShardsResult | None) -> dict[str, QueueChange]:
    """Each queue's change in a result of a list of queues (as the role runs the module); none without a result."""
    return result.get("queues", {}) if result else {}
