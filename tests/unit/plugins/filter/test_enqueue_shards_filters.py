# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role's private filters are exactly the ones its tasks and the collection's playbooks call."""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.awa.operations.plugins.filter.__enqueue_shards_role import FilterModule

COLLECTION = Path(__file__).resolve().parents[4]
CALLED = re.compile(r"awa\.operations\.(enqueue_shards_\w+)")


def test_every_filter_the_role_calls_is_registered_and_every_registered_one_is_called():
    texts = [path.read_text(encoding="utf-8") for folder in ("roles", "playbooks")
             for path in (COLLECTION / folder).rglob("*") if path.suffix in (".yml", ".j2")]
    called = {name for text in texts for name in CALLED.findall(text)}
    assert called == set(FilterModule().filters())
