"""Every link between the project's documents resolves: the file exists, and so does the heading it points to.

No database: the Markdown of the README, CONTRIBUTING, the guides in docs/
and the role READMEs, and the links the plugin and role documentation give
to this repository on GitHub (as Galaxy and ansible-doc show them). A
heading's anchor is GitHub's: lower case, punctuation dropped, spaces as
hyphens, a repeated heading numbered -1, -2, ...
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GITHUB = "https://github.com/awa-operations/awa.operations/"
MARKDOWN = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", *REPO.glob("docs/*.md"),
                   *REPO.glob("roles/*/README.md")])
PLUGIN_DOCS = sorted([*REPO.glob("plugins/**/*.py"), *REPO.glob("roles/*/meta/argument_specs.yml")])

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
# [text](target) and ![alt](target), not inside inline code.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REPO_URL = re.compile(re.escape(GITHUB) + r"(?:blob|tree)/main/([^)\s,#\"'>]*)(?:#([\w-]+))?")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's Markdown text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("**", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor a Markdown file has: its headings' and its explicit <a id=...>."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(path.read_text(encoding="utf-8")):
        found.update(EXPLICIT_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def markdown_links(path: Path) -> list[str]:
    """The link targets of a Markdown file's prose (inline code spans left out)."""
    targets = []
    for line in prose_lines(path.read_text(encoding="utf-8")):
        targets += LINK.findall(re.sub(r"`[^`]*`", "", line))
    return targets


def shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def problem(source: Path, target: str) -> str | None:
    """Why ``target`` (a link in ``source``) does not resolve, or None."""
    repo_url = REPO_URL.fullmatch(target)
    if repo_url:
        path, fragment = REPO / repo_url.group(1), repo_url.group(2)
    elif re.match(r"^[a-z][a-z0-9+.-]*:", target):
        return None  # another site: not checked here
    else:
        file_part, dummy, fragment = target.partition("#")
        path = (source.parent / file_part).resolve() if file_part else source
    if not path.exists():
        return f"{target}: no file {shown(path)}"
    if fragment and path.suffix == ".md" and fragment not in anchors(path):
        return f"{target}: {shown(path)} has no heading with the anchor #{fragment}"
    return None


def test_the_slug_is_githubs():
    assert slug("6. Health gates between batches") == "6-health-gates-between-batches"
    assert slug("1. The dry run (`--check --diff`)") == "1-the-dry-run---check---diff"
    assert slug("Acting on the advice: Event-Driven Ansible") == "acting-on-the-advice-event-driven-ansible"
    assert slug("Changing a queue's shard count: `awa.operations.awa_enqueue_shards`") == \
        "changing-a-queues-shard-count-awaoperationsawa_enqueue_shards"


def test_a_broken_anchor_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Health gates\n\n```\n## not a heading\n```\n", encoding="utf-8")
    assert anchors(page) == {"title", "health-gates"}
    assert problem(page, "#health-gates") is None
    assert "no heading with the anchor #not-a-heading" in problem(page, "#not-a-heading")
    assert "no file" in problem(page, "other.md")


@pytest.mark.parametrize("source", MARKDOWN, ids=shown)
def test_every_link_of_a_document_resolves(source):
    problems = [found for target in markdown_links(source) if (found := problem(source, target))]
    assert not problems, "\n".join(problems)


def test_every_link_of_the_plugin_and_role_docs_to_this_repository_resolves():
    problems = []
    for source in PLUGIN_DOCS:
        for match in REPO_URL.finditer(source.read_text(encoding="utf-8")):
            found = problem(source, match.group(0))
            if found:
                problems.append(f"{shown(source)}: {found}")
    assert not problems, "\n".join(problems)
