# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of the rollout role's internal read: awa_enqueue_shards_info's, for the internal module.

The same controller-side wait with a progress line per poll, the delay
waited out here, and async, with the rollout's options (info/options.py).
"""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.action.awa_enqueue_shards_info import ActionModule as InfoAction


class ActionModule(InfoAction):
    MODULE = "awa.operations.__role.enqueue_shards_rollout_info"
    ROLLOUT = True
