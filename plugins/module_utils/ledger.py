# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The change ledger: one row per applied change, written in the change's own transaction.

It is the audit trail (who, when, from, to) and the basis of the convergence
check: it records which runtime instances were running when the count switched.
This file names it and holds the record it yields; its SQL lives with the
other SQL, the table and its row in ``change.apply`` (writes), the lookup in
``info.introspect.changes`` (reads). The change writes the ledger and the read
judges convergence by it, so this file sits below both, beside ``naming``.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import Any, TypedDict

DEFAULT_SCHEMA = "awa_operations"
TABLE = "enqueue_shards_changes"
# The id the client gives each change (a UUID), so that a run whose COMMIT lost its connection can find its row.
# Ledgers created by awa.operations 0.1.0 lack the column until their owner adds it (with this unique index).
CHANGE_ID_COLUMN = "change_id"
CHANGE_ID_INDEX = f"{TABLE}_change_id_key"


def lookup_query(schema: str, change_id: str) -> str:
    """The statement an operator runs to find a change by its id, for messages (never run: the id is a UUID we
    made, the schema name is quoted when it needs to be)."""
    shown = schema if re.fullmatch(r"[a-z_][a-z0-9_]*", schema) else '"' + schema.replace('"', '""') + '"'
    return f"SELECT id, changed_at, to_shards FROM {shown}.{TABLE} WHERE change_id = '{change_id}'"


class LedgerRow(TypedDict):
    """The change ledger's row written for a change (recorded_row)."""

    schema: str
    table: str
    id: int
    changed_at: str
    live_runtimes: int
    # None for a row of a 0.1.0 ledger the run may not alter (no change_id column).
    change_id: str | None


def recorded_row(schema: str, row: tuple[Any, ...], change_id: str | None) -> LedgerRow:
    """The ``ledger`` of a result: the row (id, changed_at, live runtimes) written for a change."""
    ledger_id, changed_at, live = row
    return {"schema": schema, "table": TABLE, "id": ledger_id, "changed_at": changed_at.isoformat(),
            "live_runtimes": live, "change_id": change_id}


@dataclass(frozen=True)
class RecordedChange:
    """The latest recorded switch of one physical queue's shard count."""

    id: int
    physical_queue: str
    changed_at: datetime.datetime  # database clock
    from_shards: int
    to_shards: int
    live_runtime_ids: frozenset[str]
    changed_by: str
    reason: str | None
