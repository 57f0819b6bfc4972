# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role's private filters are exactly the ones its tasks and the collection's playbooks call."""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.awa.operations.plugins.filter.__role.enqueue_shards import FilterModule

COLLECTION = Path(__file__).resolve().parents[4]
# A filter is called after a pipe (a task that names awa.operations.__role.* runs one of the role's own modules).
CALLED = re.compile(r"\|\s*awa\.operations\.__role\.(enqueue_shards_\w+)")


def test_every_filter_the_role_calls_is_registered_and_every_registered_one_is_called():
    texts = [path.read_text(encoding="utf-8") for folder in ("roles", "playbooks")
             for path in (COLLECTION / folder).rglob("*") if path.suffix in (".yml", ".j2")]
    called = {name for text in texts for name in CALLED.findall(text)}
    assert called == set(FilterModule().filters())


def test_the_only_filter_plugins_are_the_role_s_in_a_folder_ansible_doc_skips():
    """ansible-doc skips folders whose names start with two underscores; Galaxy refuses such file names, so the folder
    carries them (tests/functional/test_public_interface.py runs ansible-doc)."""
    files = sorted(path.relative_to(COLLECTION / "plugins" / "filter").as_posix()
                   for path in (COLLECTION / "plugins" / "filter").rglob("*.py"))
    assert files == ["__role/enqueue_shards.py"]
