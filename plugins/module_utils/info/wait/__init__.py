# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waiting for a condition of a read.

``wait_for_shards_info`` stays importable from here, as the info module's
guide shows it called from Python (docs/public_interface.yml: such a name is
public). It is looked up when asked for: the info module's options
(info/options.py) import this package's loop, and the polls import the read,
which imports those options.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "wait_for_shards_info":
        from ansible_collections.awa.operations.plugins.module_utils.info.wait import polls  # pylint: disable=import-outside-toplevel

        return polls.wait_for_shards_info
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
