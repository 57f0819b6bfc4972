# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Awa's names and limits: queues, stripes, shards, priorities; a queue's stripe layout; a name it has never seen. Pure."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from ansible_collections.awa.operations.plugins.module_utils.wording import did_you_mean
from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest, PreconditionFailed

# awa.queue_meta CHECK (enqueue_shards >= 1 AND enqueue_shards <= 64)
MIN_SHARDS = 1
MAX_SHARDS = 64
# Lanes are provisioned for the priorities Awa's SQL path accepts (1..4).
PRIORITIES = (1, 2, 3, 4)
# Queue striping: physical queues are "<logical>#<n>" (QUEUE_STRIPE_DELIMITER).
STRIPE_DELIMITER = "#"
MAX_STRIPES = 64
# Bounded so every physical name stays far below btree's ~2.7 kB entry limit.
MAX_QUEUE_NAME_LENGTH = 255


def validate_queue_name(queue: object) -> str:
    """Return ``queue`` unchanged if Awa can store it as a logical queue name."""
    if not isinstance(queue, str):
        raise InvalidRequest(f"queue must be a string, got {type(queue).__name__}")
    if not queue.strip():
        raise InvalidRequest("queue must be a non-empty name (it is empty or only whitespace)")
    if len(queue) > MAX_QUEUE_NAME_LENGTH:
        raise InvalidRequest(
            f"queue name is {len(queue)} characters long; at most {MAX_QUEUE_NAME_LENGTH} are accepted")
    if STRIPE_DELIMITER in queue:
        raise InvalidRequest(
            f"queue {queue!r} contains '{STRIPE_DELIMITER}': give the logical queue name "
            f"(without the '{STRIPE_DELIMITER}<n>' stripe suffix) and set 'stripes' instead")
    bad = sorted({f"U+{ord(ch):04X}" for ch in queue if unicodedata.category(ch) == "Cc"})
    if bad:
        raise InvalidRequest(f"queue {queue!r} contains control characters ({', '.join(bad)}); remove them")
    return queue


def validate_count(name: str, value: object, low: int, high: int) -> int:
    """An integer option within [low, high]; booleans are not integers here."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"{name} must be an integer between {low} and {high}, got {value!r}")
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be between {low} and {high}, got {value}")
    return value


def physical_queues(queue: str, stripes: int) -> list[str]:
    """The queue names runtimes with ``stripes`` stripes read and write."""
    return [queue] if stripes == 1 else [f"{queue}{STRIPE_DELIMITER}{stripe}" for stripe in range(stripes)]


def stripe_index(logical: str, physical: str) -> int | None:
    """n when ``physical`` is exactly ``<logical>#<n>`` (canonical decimal), else None."""
    prefix = logical + STRIPE_DELIMITER
    suffix = physical[len(prefix):]
    canonical = suffix.isdecimal() and suffix.isascii() and (len(suffix) == 1 or suffix[0] != "0")
    return int(suffix) if physical.startswith(prefix) and canonical else None


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
    if stored and stored != list(range(stored[-1] + 1)):
        found = ", ".join(f"{queue}#{index}" for index in stored)
        raise PreconditionFailed(
            f"queue {queue!r} has stripes {found}, which are not {queue}#0..{queue}#{stored[-1]}. "
            "Check the runtimes' queue_storage_queue_stripe_count and pass stripes explicitly once it is fixed.")
    detected = stored[-1] + 1 if stored else 1
    if requested is not None and stored and requested != detected:
        raise PreconditionFailed(
            f"stripes={requested} was requested, but queue {queue!r} is stored with {detected} stripes "
            f"({queue}#0..{queue}#{detected - 1}). Set stripes to the runtimes' queue_storage_queue_stripe_count "
            f"({detected} if they are unchanged).")
    stripes = detected if requested is None else requested
    warnings = [f"queue {queue!r} also has unstriped lanes or a queue_meta row: runtimes with {stripes} stripes "
                f"never claim jobs from {queue!r} itself (only from {queue}#0..{queue}#{stripes - 1})."
                ] if stripes > 1 and queue in known_names else []
    return StripeLayout(stripes, physical_queues(queue, stripes), warnings)


def never_seen(queue: str, known_names: Iterable[str]) -> str:
    """What is known of a queue the database has never seen, with the known queues whose names are closest to it
    (``known_names``: every name the database knows - stored, named by jobs or served by runtimes - whose logical
    queues it is compared with)."""
    known = sorted({logical_queue(name) for name in known_names} - {queue})
    return (f"the database has never seen queue {queue!r} - no awa.queue_meta row, no lanes, no jobs and no runtime "
            f"serving it{did_you_mean(queue, known)}")


def logical_queue(physical: str) -> str:
    """The logical name of a physical queue (``q#3`` -> ``q``; ``q`` -> ``q``)."""
    prefix, separator, suffix = physical.rpartition(STRIPE_DELIMITER)
    return prefix if separator and prefix and suffix.isdecimal() and suffix.isascii() else physical


def ordering_contract(shards: int) -> str:
    """What FIFO promise S shards give (ADR-025)."""
    return "strict FIFO per (queue, priority)" if shards == 1 else (
        f"partitioned FIFO: FIFO per (queue, priority, shard) across {shards} shards; use ordering_key for per-key FIFO")
