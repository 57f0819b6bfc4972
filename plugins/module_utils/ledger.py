# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The change ledger: one row per applied change, written in the change's own transaction.

It is the audit trail (who, when, from, to) and the basis of the convergence
check: it records which runtime instances were running when the count switched.
This file names it and holds the record it yields; its SQL lives with the
other SQL, the table and its row in ``apply`` (writes), the lookup in
``introspect.changes`` (reads).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SCHEMA = "awa_operations"
TABLE = "enqueue_shards_changes"


@dataclass(frozen=True)
class RecordedChange:
    """The latest recorded switch of one physical queue's shard count."""

    id: int
    physical_queue: str
    changed_at: object  # datetime (database clock)
    from_shards: int
    to_shards: int
    live_runtime_ids: frozenset
    changed_by: str
    reason: str | None
