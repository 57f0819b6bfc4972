# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run of awa_enqueue_shards: the change of one queue or of a list, then the read of those queues after it.

``operation`` is the change itself (the Python API); this file is what
the module adds around it. After the change (in check mode: at once) it reads
the changed queues on the change's connection - exactly the read
awa_enqueue_shards_info returns for them, declared by info/result.py -
and returns it as ``observed``: which runtimes are live and on the count,
each queue's convergence and last recorded change, and the database's clock.
The rollout's restart plan starts from it, so it needs no read of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ansible_collections.awa.operations.plugins.module_utils.db.connection import server_address
from ansible_collections.awa.operations.plugins.module_utils.db.reopening import Reopening, reconnect_with_retries
from ansible_collections.awa.operations.plugins.module_utils.change.listed import change_many_queues
from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_enqueue_shards, without_statements
from ansible_collections.awa.operations.plugins.module_utils.change.result import (
    ChangeOutcome,
    ChangesRun,
    EnqueueShardsResult,
    QueueChangeRun,
)
from ansible_collections.awa.operations.plugins.module_utils.errors import AwaOperationsError, FailedWithState
from ansible_collections.awa.operations.plugins.module_utils.info.views import observed_read
from ansible_collections.awa.operations.plugins.module_utils.change.request import ChangeRequest
from ansible_collections.awa.operations.plugins.module_utils.info.read import read_shards_info

if TYPE_CHECKING:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import Connection


def _totals(run: QueueChangeRun | ChangesRun, *, diff: bool) -> ChangeOutcome:
    """What every module result says of its change (its queue's own keys or the list's come on top)."""
    outcome: ChangeOutcome = {
        "changed": run["changed"], "check_mode": run["check_mode"], "physical_queues": run["physical_queues"],
        "previous_shards": run["previous_shards"], "lanes_created": run["lanes_created"],
        "lanes_repaired": run["lanes_repaired"], "grants_added": run["grants_added"], "queries": run["queries"],
        "duration": run["duration"]}
    if diff:
        outcome["diff"] = run["diff"]
    return outcome


def queue_outcome(run: QueueChangeRun, *, diff: bool) -> ChangeOutcome:
    """The module's result for one queue (``queue``), but the read after it; the diff only in diff mode."""
    outcome = _totals(run, diff=diff)
    outcome.update(without_statements(run))
    return outcome


def list_outcome(run: ChangesRun, *, diff: bool) -> ChangeOutcome:
    """The module's result for a list (``queues``), but the read after it; the diff only in diff mode."""
    outcome = _totals(run, diff=diff)
    outcome["queues"] = run["queues"]
    return outcome


def _read_failed(outcome: ChangeOutcome, warnings: list[str], error: AwaOperationsError) -> FailedWithState:
    if outcome["check_mode"]:
        done = "The check-mode run planned the change (nothing was written)"
    elif outcome["changed"]:
        done = "The change was committed (the result says what it did)"
    else:
        done = "Nothing needed changing"
    return FailedWithState(
        f"{done}, but reading the state of the queues after it failed: {error.message} The change stands: a re-run "
        "changes nothing more and reads again; or read the state with awa.operations.awa_enqueue_shards_info.",
        {**outcome, "warnings": warnings})


def change_and_read(conn: Connection, requests: list[ChangeRequest], *, listed: bool, diff: bool,
                    reconnect: Callable[[], Connection] | None, **options: Any) -> tuple[EnqueueShardsResult, list[str]]:
    """The module's run: change ``requests`` (``listed``: as a list run), then read those queues; the module's
    result with the read as ``observed``, and the warnings of both (the module hands them to Ansible).

    ``options`` are change_enqueue_shards' (check_mode, lock_timeout,
    ledger_schema, reason). The read runs on ``conn``, or - when a COMMIT lost
    it - on a new connection from ``reconnect``. A read that fails raises
    ``FailedWithState`` carrying the change's result: the change stands.
    """
    if listed:
        listed_run = change_many_queues(conn, requests, reconnect=reconnect, **options)
        outcome, warnings = list_outcome(listed_run, diff=diff), listed_run["warnings"]
    else:
        queue_run = change_enqueue_shards(conn, requests[0], reconnect=reconnect, **options)
        outcome, warnings = queue_outcome(queue_run, diff=diff), queue_run["warnings"]
    session = Reopening(conn, (lambda: reconnect_with_retries(reconnect)) if reconnect else None)
    try:
        current = session.current()
        read = read_shards_info(current, queues=[request.queue for request in requests],
                                runtime_roles=requests[0].runtime_roles, ledger_schema=options["ledger_schema"],
                                lock_timeout=options["lock_timeout"])
        server = server_address(current)
    except AwaOperationsError as exc:
        raise _read_failed(outcome, warnings, exc) from None
    finally:
        session.close()
    result: EnqueueShardsResult = {**outcome, "observed": observed_read(read, server)}
    return result, list(dict.fromkeys(warnings + read["warnings"]))
