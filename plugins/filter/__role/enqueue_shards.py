# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The decisions of the role awa.operations.enqueue_shards, as filters its tasks call: private to the role.

Each filter is a function of plugins/plugin_utils, unit-tested there; the
role's tasks call them and assert on what they return. They are not an
interface of the collection: ansible-doc (and so the docs site) skips a
folder whose name starts with two underscores - Ansible's mark of what is
private - and the role calls them by that folder's name,
awa.operations.__role.<filter>. (The file's own name cannot carry the mark:
Galaxy refuses it.) Their names, arguments and results change with the role
in any release. Filters that take more than two arguments take them by
keyword.
"""

from __future__ import annotations

from typing import Any

from ansible import context

from ansible_collections.awa.operations.plugins.module_utils.change.result import EnqueueShardsResult
from ansible_collections.awa.operations.plugins.module_utils.info.result import StateRead
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import (
    backout,
    batch,
    environment_file,
    input_rules,
    preflight,
    record,
    restarts,
    services,
    summary,
    verdicts,
)


def restart_plan(settings: list[dict[str, Any]], *, probes: list[dict[str, Any]], reads: list[dict[str, Any]], read: StateRead,
                 change: EnqueueShardsResult | None, batch_size: object, runtimes_per_service: int, check_mode: bool,
                 max_fail_percentage: float = 0) -> dict[str, Any]:
    """The plan (and the rollout's state) from each host's settings and its read of its services, which says whether
    its environment file changed (or, for a host left out since it was reached, why) - one entry per play host, in
    order."""
    hosts = [services.host_state(host, probe if result.get("skipped") else result)
             for host, probe, result in zip(settings, probes, reads)]
    return restarts.restart_plan(hosts, read=read, change=change, batch_size=batch_size,
                                 runtimes_per_service=runtimes_per_service, check_mode=check_mode,
                                 max_fail_percentage=max_fail_percentage)


def backout_command(read: dict[str, Any], queues: list[dict[str, Any]]) -> str:
    """The back-out, rebuilt from the options this ansible-playbook was started with."""
    return backout.backout_command(queues, read, dict(context.CLIARGS))


class FilterModule:
    """awa.operations.__role.enqueue_shards_*: the role's filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "enqueue_shards_host_settings": input_rules.host_settings,
            "enqueue_shards_input_verdict": input_rules.input_verdict,
            "enqueue_shards_producer_group_problem": input_rules.producer_group_problem,
            "enqueue_shards_reachability": verdicts.reachability,
            "enqueue_shards_preflight": preflight.preflight,
            "enqueue_shards_backlog_queues": preflight.backlog_queues,
            "enqueue_shards_change_lines": summary.change_lines,
            "enqueue_shards_environment_lines": environment_file.environment_lines,
            "enqueue_shards_environment_shown": environment_file.shown_variables,
            "enqueue_shards_restart_plan": restart_plan,
            "enqueue_shards_batch_services": batch.batch_services,
            "enqueue_shards_batch_expectations": batch.expectations,
            "enqueue_shards_pause_seconds": batch.pause_seconds,
            "enqueue_shards_after_batch": batch.after_batch,
            "enqueue_shards_backout_command": backout_command,
            "enqueue_shards_window_services": restarts.window_services,
            "enqueue_shards_inventory_verdict": verdicts.inventory_verdict,
            "enqueue_shards_lowered_queues": summary.lowered_queues,
            "enqueue_shards_summary": summary.summary,
            "enqueue_shards_window_times": record.times_text,
            "enqueue_shards_window_verdict": summary.window_verdict,
            "enqueue_shards_stop": record.stop,
            "enqueue_shards_record": record.window_record,
        }
