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
in any release. A filter takes what it works on first (the rollout's state,
the window's reads, a batch's index), then its options by keyword when it has
several.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.awa.operations.plugins.plugin_utils.rollout import (
    batch,
    environment_file,
    estimate,
    input_rules,
    preflight,
    record,
    restarts,
    state,
    summary,
    verdicts,
)


def restart_plays(hostvars: Any) -> dict[str, list[Any]]:
    """The play of the batches: its ``hosts`` (those the plan restarts, in its order) and its ``serial`` (how many
    hosts each batch restarts), from the window's state on localhost. No hosts before a plan, after a stop, in check
    mode (the plan restarts none), and where Ansible gives no hostvars (--list-tasks)."""
    window_state = (hostvars["localhost"] if "localhost" in hostvars else {}).get("_enqueue_shards_window_state") or {}
    batches = [] if window_state.get("stop") else (window_state.get("rollout") or {}).get("batch_hosts", [])
    return {"hosts": [host for hosts in batches for host in hosts], "serial": [len(hosts) for hosts in batches] or [1]}


def window_estimate(hosts: list[dict[str, Any]], asked: state.RolloutSettings, before: dict[str, Any]) -> str:
    """Before the change: how long the window should take if every host with producer services restarts
    (rollout.estimate), in batches of ``asked``'s batch size; a lowering's drain wait counts (``before``: preflight's
    read)."""
    views = (before or {}).get("queues") or {}
    lowering = any(int(entry["shards"]) < min(views[entry["queue"]]["enqueue_shards"].values(), default=0)
                   for entry in asked["queues"] if entry["queue"] in views)
    return str(estimate.estimate(estimate.every_host_batches(hosts, asked["batch_size"]), asked, lowering)["line"])


def play_hosts(hostvars: Any, hosts: list[str]) -> dict[str, Any]:
    """What the steps that run once for every play host read of each host's own values, gathered from ``hostvars``
    once as plain values, in play order: a template hands them on as text on ansible-core 2.16, which a host's lazy
    variables do not survive. Each host's ``settings`` (validate's), its reach's ``probe``, the three the plan reads of
    it (``reads``: its settings, its probe, its read after its environment file), its batch's ``restarts`` by host,
    and what ``stopped`` the window where a host failed in a block with a rescue (record.stop)."""
    own = [hostvars[host] for host in hosts]
    reads = [[values.get(name) or {} for name in ("_enqueue_shards_host", "__enqueue_shards_reach",
                                                  "__enqueue_shards_services_now")] for values in own]
    return {"settings": [read[0] for read in reads], "probes": [read[1] for read in reads], "reads": reads,
            "restarts": {host: values.get("__enqueue_shards_restart") or {} for host, values in zip(hosts, own)},
            "stopped": record.stop(hosts, dict(zip(hosts, own)))}


def stop(window: state.Window, stopped: state.StopRecord) -> state.Window:
    """The window's state with what ``stopped`` it (play_hosts), the first stop only."""
    return window if window["stop"] else {"rollout": window["rollout"] or None, "stop": stopped}


class FilterModule:
    """awa.operations.__role.enqueue_shards_*: the role's filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "enqueue_shards_host_settings": input_rules.host_settings,
            "enqueue_shards_input_verdict": input_rules.input_verdict,
            "enqueue_shards_producer_group_problem": input_rules.producer_group_problem,
            "enqueue_shards_reachability": verdicts.reachability,
            "enqueue_shards_preflight": preflight.preflight,
            "enqueue_shards_change_lines": summary.change_lines,
            "enqueue_shards_environment_lines": environment_file.environment_lines,
            "enqueue_shards_environment_shown": environment_file.shown_variables,
            "enqueue_shards_rollout_plan": record.rollout_plan,
            "enqueue_shards_batch_services": batch.batch_services,
            "enqueue_shards_restart_plays": restart_plays,
            "enqueue_shards_play_hosts": play_hosts,
            "enqueue_shards_estimate": window_estimate,
            "enqueue_shards_window_services": restarts.window_services,
            "enqueue_shards_lowered_queues": summary.lowered_queues,
            "enqueue_shards_summary": record.window_summary,
            "enqueue_shards_stop": stop,
            "enqueue_shards_record": record.window_record,
        }
