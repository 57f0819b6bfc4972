# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The decisions of the role awa.operations.enqueue_shards, as filters.

Each filter is one pure function in plugins/plugin_utils (unit-tested there);
the role's tasks call them and assert on what they return. Each filter is
documented in the YAML file of its name next to this one.
"""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.plugin_utils import (
    environment_file,
    rollout_input,
    rollout_preflight,
    rollout_report,
    rollout_restarts,
)


class FilterModule:
    """awa.operations.enqueue_shards_* filters."""

    def filters(self) -> dict:
        return {
            "enqueue_shards_input_problems": rollout_input.input_problems,
            "enqueue_shards_restart_via": rollout_input.restart_via,
            "enqueue_shards_preflight": rollout_preflight.preflight,
            "enqueue_shards_change_lines": rollout_report.change_lines,
            "enqueue_shards_environment_lines": environment_file.environment_lines,
            "enqueue_shards_host_services": rollout_restarts.host_services,
            "enqueue_shards_restart_plan": rollout_restarts.restart_plan,
            "enqueue_shards_restart_outcome": rollout_restarts.restart_outcome,
            "enqueue_shards_batch_verdict": rollout_restarts.batch_verdict,
            "enqueue_shards_lowered_queues": rollout_report.lowered_queues,
            "enqueue_shards_summary": rollout_report.summary,
        }
