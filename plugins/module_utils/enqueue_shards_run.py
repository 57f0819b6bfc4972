# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run of awa_enqueue_shards: the change of one queue or of a list, shaped as the module returns it.

``enqueue_shards`` is the change itself (the Python API); this file is what
the module adds around it.
"""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.module_utils.enqueue_shards import without_statements
from ansible_collections.awa.operations.plugins.module_utils.enqueue_shards_result import (
    ChangesRun,
    EnqueueShardsResult,
    QueueChangeRun,
)


def module_result(run: QueueChangeRun | ChangesRun, *, diff: bool) -> tuple[EnqueueShardsResult, list[str]]:
    """The module's result from a run - without its warnings, which the module hands to Ansible, and with the
    diff only in diff mode - and the warnings."""
    result: EnqueueShardsResult = {
        "changed": run["changed"], "check_mode": run["check_mode"], "physical_queues": run["physical_queues"],
        "previous_shards": run["previous_shards"], "lanes_created": run["lanes_created"],
        "lanes_repaired": run["lanes_repaired"], "grants_added": run["grants_added"], "queries": run["queries"],
        "duration": run["duration"]}
    if "queues" in run:
        result["queues"] = run["queues"]
    else:
        result.update(without_statements(run))
    if diff:
        result["diff"] = run["diff"]
    return result, run["warnings"]
