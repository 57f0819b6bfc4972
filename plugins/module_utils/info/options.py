# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The info module's option values: their defaults, and the rules the argument spec cannot express.

The options themselves are declared with the module
(plugins/modules/awa_enqueue_shards_info.py, ``argument_spec()``); the action
plugin, the role's input check and the shard_advice event source check the
same values with these functions before anything connects.
"""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.module_utils.db.options import validate_lock_timeout
from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.naming import validate_queue_name

DEFAULT_WAIT_TIMEOUT = 300.0
DEFAULT_WAIT_SLEEP = 2.0
DEFAULT_ADVISE_WINDOW = 10.0
GAINS_PATHS = ("insert", "copy", "copy_keyed")


def validate_read_options(timeout: float, sleep: float, lock_timeout: float, delay: float = 0.0) -> None:
    """The info module's numeric options (wait_timeout, wait_sleep, lock_timeout, delay), checked before anything
    waits or connects."""
    validate_lock_timeout(lock_timeout)
    if not 0 <= timeout <= 86400:
        raise InvalidRequest(f"wait_timeout must be between 0 and 86400 seconds, got {timeout}")
    if not 0.1 <= sleep <= 3600:
        raise InvalidRequest(f"wait_sleep must be between 0.1 and 3600 seconds, got {sleep}")
    if not 0 <= delay <= 86400:
        raise InvalidRequest(f"delay must be between 0 and 86400 seconds, got {delay}")


def validate_lanes_option(lanes: bool, wait: str) -> None:
    """lanes: false reads no depths, so nothing can be waited on that needs them (drained)."""
    if not lanes and wait == "drained":
        raise InvalidRequest("wait=drained waits for the ready jobs on the old shards, and lanes=false reads no lane "
                             "depths: leave lanes at true (the default) to wait until drained, or wait until converged")


def validate_advice_options(advise: bool, window: float, gains: dict | None, wait: str) -> None:
    """advise, advise_window and advise_gains, checked before connecting."""
    if advise and wait != "none":
        raise InvalidRequest(f"advise watches the load and wait watches a change: give advise or wait={wait}, not "
                             "both (run them as two tasks)")
    if not 1 <= window <= 600:
        raise InvalidRequest(f"advise_window must be between 1 and 600 seconds, got {window}")
    if gains is None:
        return
    table = gains.get("gains")
    shape = "advise_gains must be a gains table as benchmarks/shard_gains.py prints it: {'gains': {PATH: {N: {S: gain}}}}"
    if not isinstance(table, dict) or not table:
        raise InvalidRequest(f"{shape}; it has no 'gains'")
    for path, rows in table.items():
        if path not in GAINS_PATHS or not isinstance(rows, dict):
            raise InvalidRequest(f"{shape}; PATH is insert, copy or copy_keyed, got {path!r}")
        for producers, row in rows.items():
            try:
                valid = int(producers) >= 1 and isinstance(row, dict) and row and all(
                    int(shards) >= 1 and float(gain) > 0 for shards, gain in row.items())
            except (TypeError, ValueError):
                valid = False
            if not valid:
                raise InvalidRequest(f"{shape}; {path} row {producers!r} is not a mapping of shard counts to "
                                     f"positive gains: {row!r}")


def selected_queues(queue: str | None, queues: list[str] | None, stripes: int | None) -> tuple[str, ...] | None:
    """The logical queues a read covers: ``(queue,)``, ``queues`` (once each), or None for every queue.

    An empty list of queues selects none (only the runtimes are read).
    """
    if queue is not None and queues:
        raise InvalidRequest("give queue or queues, not both")
    selected = (queue,) if queue is not None else tuple(dict.fromkeys(queues)) if queues is not None else None
    for name in selected or ():
        validate_queue_name(name)
    if stripes is not None and (selected is None or len(selected) != 1):
        raise InvalidRequest("stripes applies to one queue: set queue too (stripes are detected for every queue)")
    return selected
