"""What ansible-doc publishes is the README's public interface, no more and no less.

A plugin ansible-doc lists is a promise to users (issue 28, section 5): the
README's table "What is in it" names every module and role, and
`ansible-doc --metadata-dump` (what Galaxy's importer reads) lists exactly
those and nothing of any other plugin type - the role's filters included,
which live in a file only the role loads by name. No database.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from enqueue_shards_support import ansible_command

README = Path(__file__).resolve().parents[2] / "README.md"
# A row of the table: | [awa.operations.NAME](link) | TYPE | what it does |
TABLE_ROW = re.compile(r"^\| \[(awa\.operations\.\w+)\]\([^)]*\) \| ([\w ,]+) \|", re.MULTILINE)
# Types ansible-doc documents that are not plugins of a collection.
NOT_PLUGINS = {"keyword"}


def readme_interface() -> dict[str, set[str]]:
    table = README.read_text(encoding="utf-8").split("## What is in it", 1)[1].split("\n## ", 1)[0]
    published: dict[str, set[str]] = {}
    for name, kind in TABLE_ROW.findall(table):
        published.setdefault(kind.strip(), set()).add(name)
    return published


def ansible_doc_interface() -> dict[str, set[str]]:
    process = ansible_command("ansible-doc", "--metadata-dump", "--no-fail-on-errors", "awa.operations")
    assert process.returncode == 0, process.stderr
    dump = json.loads(process.stdout)["all"]
    return {kind: set(plugins) for kind, plugins in dump.items() if plugins and kind not in NOT_PLUGINS}


def test_ansible_doc_lists_exactly_the_modules_and_roles_the_readme_promises():
    published = readme_interface()
    assert published["module"] == {"awa.operations.awa_enqueue_shards", "awa.operations.awa_enqueue_shards_info",
                                   "awa.operations.awa_producer_services", "awa.operations.awa_enqueue_shards_report"}
    listed = ansible_doc_interface()
    assert listed == {"module": published["module"], "role": published["role"]}


def test_the_role_s_filters_are_not_published():
    process = ansible_command("ansible-doc", "-t", "filter", "-l", "awa.operations", "--json")
    assert process.returncode == 0, process.stderr
    assert json.loads(process.stdout) == {}
