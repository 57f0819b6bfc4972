# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The decisions of the role awa.operations.enqueue_shards, as filters: internal to the role.

Each filter is one function in plugins/plugin_utils (unit-tested there); the
role's tasks call them and assert on what they return. They are not a public
interface of the collection: their names, arguments and results change with
the role, in any release (the README names what is public). Each is
documented in the YAML file of its name next to this one. Filters that take
more than three arguments take them by keyword.
"""

from __future__ import annotations

from ansible import context

from ansible_collections.awa.operations.plugins.plugin_utils import (
    environment_file,
    rollout_backout,
    rollout_gates,
    rollout_input,
    rollout_preflight,
    rollout_report,
    rollout_restarts,
    rollout_services,
    rollout_verdicts,
)


def host_services(services: list[str], *, host: str, method: str, systemd: dict | None = None,
                  status: dict | None = None, clock: object = None, environment_changed: bool = False,
                  names: list[str] | None = None, reachable: bool = True) -> dict:
    return rollout_services.host_services(services, host, method, systemd, status, clock, environment_changed,
                                          names, reachable)


def restart_outcomes(hosts: list[str], *, systemd: list[dict], command: list[dict], batch: list[list[str]]) -> list[dict]:
    """Every play host's restarts in a batch, from its registered systemd and command restart results."""
    return [rollout_restarts.restart_outcome([by_systemd, by_command],
                                             [service for member, service in batch if member == host], host)
            for host, by_systemd, by_command in zip(hosts, systemd, command)]


def backout_command(read: dict, queues: list[dict]) -> str:
    """The back-out, rebuilt from the options this ansible-playbook was started with."""
    return rollout_backout.backout_command(queues, read, dict(context.CLIARGS))


class FilterModule:
    """awa.operations.enqueue_shards_* filters (internal to the role)."""

    def filters(self) -> dict:
        return {
            "enqueue_shards_input_problems": rollout_input.input_problems,
            "enqueue_shards_producer_group_problem": rollout_input.producer_group_problem,
            "enqueue_shards_restart_via": rollout_input.restart_via,
            "enqueue_shards_reachability": rollout_verdicts.reachability,
            "enqueue_shards_preflight": rollout_preflight.preflight,
            "enqueue_shards_change_lines": rollout_report.change_lines,
            "enqueue_shards_environment_lines": environment_file.environment_lines,
            "enqueue_shards_host_services": host_services,
            "enqueue_shards_restart_plan": rollout_restarts.restart_plan,
            "enqueue_shards_backout_command": backout_command,
            "enqueue_shards_restart_outcome": rollout_restarts.restart_outcome,
            "enqueue_shards_restart_outcomes": restart_outcomes,
            "enqueue_shards_health_gates": rollout_gates.evaluate,
            "enqueue_shards_batch_verdict": rollout_verdicts.batch_verdict,
            "enqueue_shards_inventory_verdict": rollout_verdicts.inventory_verdict,
            "enqueue_shards_lowered_queues": rollout_report.lowered_queues,
            "enqueue_shards_summary": rollout_report.summary,
        }
