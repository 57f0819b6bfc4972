# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Can we act on what is installed? The installation, the ledger, and a queue's stripes. Pure.

Each check takes what ``introspect`` observed and either refuses (raising
``PreconditionFailed`` with what to do) or returns what it resolved. Both
the change and the read-only info path use them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.awa.operations.plugins.module_utils.errors import PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.installation import Installation
from ansible_collections.awa.operations.plugins.module_utils.ledger import CHANGE_ID_INDEX
from ansible_collections.awa.operations.plugins.module_utils.naming import physical_queues, stripe_index

# Awa schema versions (max(awa.schema_version.version)) of the releases this collection
# is tested with (docs/awa-internals.md §10): 39 = awa 0.6.0 and 0.6.1, 40 = 0.6.2 .. 0.6.9.
TESTED_SCHEMA_VERSIONS = (39, 40)
MIN_SERVER_VERSION_NUM = 170000


def storage_schema(found: Installation) -> str:
    """The schema of the active queue-storage engine; refused when that engine is not active."""
    if found.storage_state != "active" or found.storage_engine != "queue_storage" or not found.queue_storage_schema:
        raise PreconditionFailed(
            f"The queue-storage engine is not active in database {found.database!r} (state={found.storage_state}, "
            f"engine={found.storage_engine}); enqueue_shards only applies to queue storage. "
            "On a fresh database run `SELECT awa.storage_auto_finalize_if_fresh('awa')` or start a worker; "
            "on a database with canonical jobs use `awa storage prepare --engine queue_storage`, "
            "`awa storage enter-mixed-transition` and `awa storage finalize`.")
    return found.queue_storage_schema


def check_installation(found: Installation, runtime_roles: tuple[str, ...] = ()) -> list[str]:
    """Refuse an installation we cannot safely change; return warnings otherwise."""
    where = f"database {found.database!r}"
    if not found.has_awa_schema:
        raise PreconditionFailed(
            f"{where} has no Awa schema 'awa'. Check login_db, or install Awa there with `awa migrate` "
            "(awa-cli 0.6.8 or newer).")
    if not found.has_enqueue_shards or not found.has_queue_storage_tables:
        version = found.schema_version if found.schema_version is not None else "unknown"
        raise PreconditionFailed(
            f"The Awa schema in {where} (schema version {version}) has no enqueue shards "
            "(awa.queue_meta.enqueue_shards and the queue-storage lane tables arrived with Awa 0.6.0). "
            "Upgrade Awa to 0.6.8 or 0.6.9 and run `awa migrate`, then retry.")
    storage_schema(found)
    missing = [role for role in runtime_roles if role in found.missing_roles]
    if missing:
        raise PreconditionFailed(
            f"runtime_roles do not exist in {where}'s cluster: {', '.join(missing)}. "
            "Create them (CREATE ROLE ... LOGIN) or correct the names.")
    warnings = []
    if found.schema_version not in TESTED_SCHEMA_VERSIONS:
        warnings.append(
            f"Awa schema version {found.schema_version} is untested with this collection "
            f"(tested: {', '.join(map(str, TESTED_SCHEMA_VERSIONS))}, i.e. awa 0.6.x).")
    if found.server_version_num < MIN_SERVER_VERSION_NUM:
        warnings.append(f"PostgreSQL {found.server_version_num // 10000} is untested; supported: 17 and 18.")
    return warnings


@dataclass(frozen=True)
class LedgerPlan:
    """How a change writes its ledger row."""

    create: bool  # the ledger does not exist yet: create it
    add_change_id: bool  # a ledger of awa.operations 0.1.0, run by its owner: add the change_id column
    records_change_id: bool  # the row carries the change id (else a lost commit is looked up by transaction id)
    warnings: list[str]


def check_ledger(installation: Installation, ledger_schema: str, ledger_table: str) -> LedgerPlan:
    """Refuse a change whose ledger row could not be written (before writing anything); else say how to write it.

    A ledger created by awa.operations 0.1.0 lacks the change_id column. Its
    owner (or a member of the owning role) adds it in the change's own
    transaction; any other role cannot, so its rows carry no change id and it
    is told what the owner should run.
    """
    name = f"{ledger_schema}.{ledger_table}"
    who = installation.current_user
    if installation.ledger_exists and not installation.can_write_ledger:
        raise PreconditionFailed(
            f"The change ledger {name} exists but {who!r} cannot INSERT into it. "
            f"GRANT USAGE ON SCHEMA {ledger_schema} TO {who}; GRANT INSERT, SELECT ON {name} TO {who}; "
            "or set ledger: false to change without a record "
            "(convergence can then not be judged). Nothing was changed.")
    if not installation.ledger_exists and not installation.can_create_ledger:
        raise PreconditionFailed(
            f"The change ledger {name} does not exist and {who!r} may not create it. Either let an "
            f"administrator run this module once, or GRANT CREATE ON DATABASE {installation.database} TO {who} "
            f"(or CREATE ON SCHEMA {ledger_schema} if it exists); or set ledger: false to change without a "
            "record (convergence can then not be judged). Nothing was changed.")
    if not installation.ledger_exists:
        return LedgerPlan(create=True, add_change_id=False, records_change_id=True, warnings=[])
    if installation.ledger_has_change_id or installation.can_alter_ledger:
        return LedgerPlan(create=False, add_change_id=not installation.ledger_has_change_id, records_change_id=True,
                          warnings=[])
    owner = installation.ledger_owner
    return LedgerPlan(create=False, add_change_id=False, records_change_id=False, warnings=[
        f"The change ledger {name} predates change ids (awa.operations 0.1.0) and {who!r} cannot add the column: "
        f"only its owner {owner!r} can. This change's row carries no change id, so a commit whose connection is "
        "lost is looked up by its transaction id, which is lost with a failover. Run the module once as "
        f"{owner!r} (it adds the column), or as {owner!r}: ALTER TABLE {name} ADD COLUMN change_id uuid; "
        f"CREATE UNIQUE INDEX {CHANGE_ID_INDEX} ON {name} (change_id);"])


@dataclass(frozen=True)
class StripeLayout:
    stripes: int
    physical_queues: list[str]
    warnings: list[str]


def resolve_stripes(queue: str, requested: int | None, known_names: list[str]) -> StripeLayout:
    """Which physical queues ``queue`` has: from the request, or from the stored names.

    A stored layout that disagrees with the request is an error, not a guess.
    """
    stored = sorted({index for index in (stripe_index(queue, name) for name in known_names) if index is not None})
    plain_exists = queue in known_names
    warnings = []
    if stored and stored != list(range(stored[-1] + 1)):
        found = ", ".join(f"{queue}#{index}" for index in stored)
        raise PreconditionFailed(
            f"queue {queue!r} has stripes {found}, which are not {queue}#0..{queue}#{stored[-1]}. "
            "Check the runtimes' queue_storage_queue_stripe_count and pass stripes explicitly once it is fixed.")
    detected = stored[-1] + 1 if stored else 1
    if requested is None:
        stripes = detected
    elif stored and requested != detected:
        raise PreconditionFailed(
            f"stripes={requested} was requested, but queue {queue!r} is stored with {detected} stripes "
            f"({queue}#0..{queue}#{detected - 1}). Set stripes to the runtimes' queue_storage_queue_stripe_count "
            f"({detected} if they are unchanged).")
    else:
        stripes = requested
    if stripes > 1 and plain_exists:
        warnings.append(
            f"queue {queue!r} also has unstriped lanes or a queue_meta row: runtimes with {stripes} stripes "
            f"never claim jobs from {queue!r} itself (only from {queue}#0..{queue}#{stripes - 1}).")
    return StripeLayout(stripes, physical_queues(queue, stripes), warnings)
