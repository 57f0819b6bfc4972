# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waiting for a condition of a read.

``wait_for_shards_info`` is importable from here, as the info module's guide
shows it called from Python (docs/public_interface.yml: such a name is
public).
"""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.module_utils.info.wait.polls import wait_for_shards_info

__all__ = ["wait_for_shards_info"]
