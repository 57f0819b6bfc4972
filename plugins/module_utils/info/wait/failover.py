# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Across a failover: a wait that reconnects, and a change the server read does not hold. Pure.

A wait only reads, so when its connection is lost (the primary stopped, a
standby promoted) it connects again - to whichever server of ``login_host``
is the primary now - a bounded number of times before it gives up, and says
which server it reads after. What it reads is checked against what the
change committed (the info module's ``committed``): after a failover to a
standby that had not received the change (asynchronous replication), the
count the change set is not there, and a wait would otherwise report
convergence on a count that no longer exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.info.result import ChangeView, StateRead
from ansible_collections.awa.operations.plugins.module_utils.info.wait.loop import Interruption, ReconnectGaveUp

# After a lost connection, a wait tries to reconnect up to RECONNECT_ATTEMPTS times, RECONNECT_INTERVAL seconds
# apart (or wait_sleep, when longer), within wait_timeout: two minutes of outage at least. That covers the
# failovers operators run into - Patroni's defaults (ttl 30 s, loop_wait 10 s) promote a standby within about
# 40 s, and a managed Multi-AZ failover is documented as typically 60 to 120 s - while an outage longer than that
# is no failover to ride out quietly but something the operator must look at.
RECONNECT_ATTEMPTS = 24
RECONNECT_INTERVAL = 5.0


@dataclass(frozen=True)
class Committed:
    """What a change committed for one logical queue: its count and, when recorded, its ledger row."""

    queue: str
    shards: int
    ledger_id: int | None


def validate_committed(value: object) -> dict[str, Committed]:
    """The info module's ``committed``: the change's per-queue results, or ``{queue: {shards: N, ledger: {id: ID}}}``.

    Other keys of a change's result are ignored; so are check-mode results, which committed nothing.
    """
    if value is None:
        return {}
    shape = ("committed must map each queue to what the change committed, as awa_enqueue_shards returns it in "
             "queues (for example {orders: {shards: 8, ledger: {id: 12}}})")
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{shape}; got {value!r}")
    committed = {}
    for queue, entry in value.items():
        if not isinstance(entry, Mapping):
            raise InvalidRequest(f"{shape}; {queue!r} maps to {entry!r}")
        if entry.get("check_mode") is True:
            continue  # a check-mode run committed nothing
        shards = entry.get("shards")
        ledger = entry.get("ledger")
        ledger_id = ledger.get("id") if isinstance(ledger, Mapping) else None
        if isinstance(shards, bool) or not isinstance(shards, int) or ledger_id is not None and (
                isinstance(ledger_id, bool) or not isinstance(ledger_id, int)):
            raise InvalidRequest(f"{shape}; {queue!r} has shards {shards!r} and ledger {ledger!r}")
        committed[str(queue)] = Committed(str(queue), shards, ledger_id)
    return committed


def _counts_text(counts: dict[str, int]) -> str:
    values = sorted(set(counts.values()))
    if len(values) == 1:
        return f"enqueue_shards {values[0]}"
    return "enqueue_shards " + ", ".join(f"{name}: {count}" for name, count in sorted(counts.items()))


def _change_text(change: ChangeView) -> str:
    return (f"change #{change['id']} ({change['from_shards']} -> {change['to_shards']}, by {change['changed_by']} "
            f"at {change['changed_at']})")


def missing_changes(committed: dict[str, Committed], info: StateRead, server: str) -> list[str]:
    """One line per queue of ``info`` (a read) whose count is not the one committed, saying why and what to do.

    Queues the read did not cover are not judged.
    """
    problems = []
    for name, change in committed.items():
        view = info["queues"].get(name)
        if view is None or all(count == change.shards for count in view["enqueue_shards"].values()):
            continue
        found = _counts_text(view["enqueue_shards"])
        recorded = sorted(view["last_change"].values(), key=lambda row: row["id"])
        latest = recorded[-1] if recorded else None
        what = f"enqueue_shards {change.shards}" + (f" (ledger change #{change.ledger_id})" if change.ledger_id else "")
        if latest is not None and change.ledger_id is not None and latest["id"] > change.ledger_id:
            problems.append(
                f"{name}: the change committed {what}, but {server} now holds {found}: it was changed again since, "
                f"by {_change_text(latest)}. Nothing will converge on {change.shards} here; if {found} is not "
                f"what you want, run the change again.")
            continue
        history = f"its latest recorded change is {_change_text(latest)}" if latest else "it has no recorded change"
        problems.append(
            f"{name}: the change committed {what}, but {server} holds {found} and {history}: the change is not on "
            "this server. This happens after a failover to a standby that had not received it (asynchronous "
            "replication): the commit was lost with the old primary. Nothing will converge on "
            f"{change.shards} here. Re-run the change against the new primary (awa.operations.awa_enqueue_shards "
            f"with queue {name} and shards {change.shards}, or the playbook awa.operations.set_enqueue_shards), "
            "then the wait.")
    return problems


def reconnected_warning(interruption: Interruption, server: str) -> str:
    """What the operator is told when a wait lost its connection and reconnected."""
    return (f"The connection to the database was lost {interruption.lost_at:.0f}s into the wait "
            f"({interruption.error}); the wait reconnected after {interruption.attempts} attempt(s) and read "
            f"{server} from then on (the primary now, if it was a failover). The state reported was read there.")


def gave_up_message(gave_up: ReconnectGaveUp, wait: str, attempts: int) -> str:
    """Why a wait ended without an answer after losing its connection, and what to do."""
    lost = gave_up.interruption
    ended = (f"the wait's deadline came after {lost.attempts} reconnection attempt(s)" if gave_up.deadline_reached
             else f"all {attempts} reconnection attempts failed")
    return (f"The connection to the database was lost {lost.lost_at:.0f}s into the wait until {wait} ({lost.error}), "
            f"and {ended} (the last at {gave_up.elapsed:.0f}s: {gave_up.last_error}). Nothing was changed: the wait "
            "only reads. When a primary accepts connections again (after a failover, list it in login_host), run "
            "the wait again (in the role: the entry point wait, or --tags enqueue_shards_wait). If a change ran "
            "just before, check its count there first - a failover to a standby that had not received it loses it: "
            "give the wait committed and it says so.")
