# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The request of a shard-count change, validated before anything touches the database. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import (
    MAX_SHARDS, MAX_STRIPES, MIN_SHARDS, validate_count, validate_queue_name)


# The keys of an entry of a list of changes (the change module's queues, the role's enqueue_shards_queues).
ENTRY_KEYS = ("queue", "shards", "stripes", "new_queue")


@dataclass(frozen=True)
class ChangeRequest:
    """What the operator asked for, validated by ``validate_request``."""

    queue: str
    shards: int
    stripes: int | None = None
    runtime_roles: tuple[str, ...] = ()
    ledger: bool = True
    # The queue may be new to the database (prepared before its first producer); else one it has never seen is refused.
    new_queue: bool = False


def validate_request(queue: object, shards: object, stripes: object = None,
                     runtime_roles: object = (), ledger: bool = True, new_queue: object = False) -> ChangeRequest:
    """Check the options before touching the database."""
    runtime_roles = runtime_roles or ()
    if not isinstance(runtime_roles, Iterable):
        raise InvalidRequest(f"runtime_roles must be a list of role names, got {runtime_roles!r}")
    roles = tuple(runtime_roles)
    for role in roles:
        if not isinstance(role, str) or not role.strip():
            raise InvalidRequest(f"runtime_roles must be non-empty role names, got {role!r}")
    if len(set(roles)) != len(roles):
        raise InvalidRequest(f"runtime_roles lists a role twice: {list(roles)}")
    if not isinstance(new_queue, bool):
        raise InvalidRequest(f"new_queue must be true or false, got {new_queue!r}")
    return ChangeRequest(validate_queue_name(queue), validate_count("shards", shards, MIN_SHARDS, MAX_SHARDS),
                         None if stripes is None else validate_count("stripes", stripes, 1, MAX_STRIPES),
                         cast("tuple[str, ...]", roles), bool(ledger), new_queue)


def validate_requests(entries: object, runtime_roles: object = (), ledger: bool = True) -> list[ChangeRequest]:
    """A list of ``{queue, shards[, stripes][, new_queue]}`` changes, each checked like ``validate_request``."""
    if not isinstance(entries, list) or not entries:
        raise InvalidRequest("queues must be a non-empty list of {queue, shards[, stripes][, new_queue]} entries")
    requests = []
    for entry in entries:
        if not isinstance(entry, dict) or not {"queue", "shards"} <= entry.keys():
            raise InvalidRequest(f"each entry of queues needs queue and shards (stripes and new_queue are optional), "
                                 f"got {entry!r}")
        requests.append(validate_request(entry["queue"], entry["shards"], entry.get("stripes"), runtime_roles, ledger,
                                         False if entry.get("new_queue") is None else entry["new_queue"]))
    names = [request.queue for request in requests]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InvalidRequest(f"queues names a queue more than once: {', '.join(map(repr, repeated))}")
    return requests
