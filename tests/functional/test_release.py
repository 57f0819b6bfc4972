"""Every release is recorded where every clone of main sees it, and hack/release.sh records it so.

No database. A release is the commit on this branch whose subject is
``Release X.Y.Z``, the first whose changelogs/changelog.yaml lists it, with
its version in galaxy.yml, dated as the changelog says
(hack/release_record.py checks it; tags are not read - a clone of a pushed
branch holds them only once they were pushed, and the test command lets no
test skip). The other tests run hack/release.sh in a clone of this checkout
(with its uncommitted files), with this checkout's venvs: the release commit,
its tag, galaxy.yml naming the next version after it, and its refusals.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hack import release_docs

REPO = Path(__file__).resolve().parents[2]
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Release Test", "GIT_AUTHOR_EMAIL": "release@example.invalid",
                "GIT_COMMITTER_NAME": "Release Test", "GIT_COMMITTER_EMAIL": "release@example.invalid"}


def git(*args: str, cwd: Path = REPO, check: bool = True) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=check, capture_output=True, text=True,
                          env={**os.environ, **GIT_IDENTITY}).stdout.strip()


def commit_day(revision: str, cwd: Path = REPO) -> str:
    """The commit's date in UTC, as YYYY-MM-DD."""
    return subprocess.run(["git", "log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%d", revision], cwd=cwd,
                          check=True, capture_output=True, text=True, env={**os.environ, "TZ": "UTC"}).stdout.strip()


def releases(cwd: Path = REPO) -> dict:
    return yaml.safe_load((cwd / "changelogs" / "changelog.yaml").read_text(encoding="utf-8"))["releases"]


def release_record(cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "hack/release_record.py"], cwd=cwd, capture_output=True, text=True,
                          check=False)


def test_every_release_is_a_commit_with_its_version_dated_as_the_changelog_says():
    if git("rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone lacks the releases' commits: git fetch --unshallow")
    process = release_record()
    assert process.returncode == 0, process.stderr
    listed = [line.split()[0] for line in process.stdout.splitlines()]
    assert sorted(listed) == sorted(str(version) for version in releases())
    assert {"0.1.0", "0.2.0", "0.3.0"} <= set(listed)
    for line in process.stdout.splitlines():
        version, commit = line.split()[:2]
        assert f"version: {version}" in git("show", f"{commit}:galaxy.yml").splitlines(), line
        assert str(releases()[version]["release_date"]) == commit_day(commit), line


def test_main_names_the_next_version_once_a_release_is_out():
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text(encoding="utf-8"))
    newest = max(releases(), key=lambda version: [int(part) for part in str(version).split(".")])
    assert [int(part) for part in galaxy["version"].split(".")] > [int(part) for part in str(newest).split(".")], \
        f"galaxy.yml says {galaxy['version']}, the version released last ({newest}): an artifact of main would claim it"


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A clone of this branch (its releases' commits too) holding this checkout's files as they are now."""
    if git("rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone lacks the releases' commits: git fetch --unshallow")
    copy = tmp_path / "awa.operations"
    git("clone", "-q", "--no-tags", str(REPO), str(copy), cwd=tmp_path)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           check=True, capture_output=True).stdout
    archive = subprocess.run(["tar", "--null", "-T", "-", "-cf", "-"], cwd=REPO, input=files, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-xf", "-"], cwd=copy, input=archive, check=True)
    git("add", "-A", cwd=copy)
    git("commit", "-q", "--allow-empty", "-m", "The checkout under test", cwd=copy)
    return copy


def prepare(copy: Path, version: str) -> None:
    """What a maintainer does before hack/release.sh: the version in galaxy.yml and a release summary."""
    galaxy = copy / "galaxy.yml"
    lines = ["version: " + version if line.startswith("version: ") else line
             for line in galaxy.read_text(encoding="utf-8").splitlines()]
    galaxy.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # A summary this checkout prepared for its own next release would be a second summary for VERSION.
    for summary in (copy / "changelogs" / "fragments").glob("[0-9]*.[0-9]*.[0-9]*.yml"):
        summary.unlink()
    (copy / "changelogs" / "fragments" / f"{version}.yml").write_text(
        f"---\nrelease_summary: The release {version} of the test.\n", encoding="utf-8")


def release(copy: Path, version: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **GIT_IDENTITY, "AWA_OPS_VENV": str(REPO / ".venv"), "AWA_OPS_VENVS": str(REPO / ".venvs")}
    return subprocess.run(["bash", "hack/release.sh", version], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_release_sh_commits_the_release_tags_it_and_names_the_next_version(checkout):
    before = git("rev-parse", "HEAD", cwd=checkout)
    prepare(checkout, "9.9.9")
    process = release(checkout, "9.9.9")
    assert process.returncode == 0, process.stdout + process.stderr
    assert git("log", "-1", "--format=%s", "HEAD~1", cwd=checkout) == "Release 9.9.9"
    assert git("rev-parse", "HEAD~2", cwd=checkout) == before
    assert git("cat-file", "-t", "v9.9.9", cwd=checkout) == "tag"
    assert git("rev-list", "-n", "1", "v9.9.9", cwd=checkout) == git("rev-parse", "HEAD~1", cwd=checkout)
    assert str(releases(checkout)["9.9.9"]["release_date"]) == commit_day("HEAD~1", checkout)
    assert "version: 9.9.9" in git("show", "HEAD~1:galaxy.yml", cwd=checkout).splitlines()
    assert "version: 9.10.0" in (checkout / "galaxy.yml").read_text(encoding="utf-8").splitlines()
    assert git("diff", "--name-only", "HEAD~1", "HEAD", cwd=checkout).splitlines() == ["README.md", "galaxy.yml"]
    # The README and the install guides name the release, and main's next version, in the commits that made them.
    assert "'awa.operations:>=9.9.9,<9.10.0'" in git("show", "HEAD~1:README.md", cwd=checkout)
    assert "--tag awa-operations-ee:9.9.9" in git("show", "HEAD~1:docs/execution_environment.md", cwd=checkout)
    readme = (checkout / "README.md").read_text(encoding="utf-8")
    assert re.search(r"--grep '\^Release '`:\s+0\.1\.0, [0-9., ]*, 9\.9\.9;", readme)
    assert re.search(r"names the next version\s+\(now 9\.10\.0\)", readme)
    assert git("status", "--porcelain", cwd=checkout) == "", "the release commit holds every change it made"
    assert not list((checkout / "changelogs" / "fragments").glob("*.yml")), "the fragments moved into the changelog"
    assert "v9\\.9\\.9" in (checkout / "CHANGELOG.md").read_text(encoding="utf-8")
    recorded = release_record(checkout)
    assert recorded.returncode == 0 and "9.9.9" in recorded.stdout.split(), recorded.stdout + recorded.stderr


def test_release_sh_refuses_a_tree_with_other_changes(checkout):
    before = git("rev-parse", "HEAD", cwd=checkout)
    prepare(checkout, "9.9.9")
    (checkout / "README.md").write_text("changed after the tests ran\n", encoding="utf-8")
    process = release(checkout, "9.9.9")
    assert process.returncode == 1
    assert "the working tree has changes outside galaxy.yml CHANGELOG.md changelogs" in process.stderr
    assert "README.md" in process.stderr and "nothing was changed" in process.stderr
    assert git("rev-parse", "HEAD", cwd=checkout) == before
    assert git("tag", "--list", "v9.9.9", cwd=checkout) == ""


def test_release_sh_refuses_when_a_release_before_it_has_no_release_commit(checkout):
    changelog = checkout / "changelogs" / "changelog.yaml"
    recorded = yaml.safe_load(changelog.read_text(encoding="utf-8"))
    recorded["releases"]["0.0.9"] = {"release_date": "2026-11-28", "changes": {"release_summary": "Never committed."}}
    changelog.write_text(yaml.safe_dump(recorded), encoding="utf-8")
    git("commit", "-q", "-am", "A release nobody made", cwd=checkout)
    before = git("rev-parse", "HEAD", cwd=checkout)
    prepare(checkout, "9.9.9")
    process = release(checkout, "9.9.9")
    assert process.returncode == 1
    assert "release 0.0.9: 0 commits carry the line 'Release 0.0.9'" in process.stderr
    assert "nothing was changed" in process.stderr
    assert git("rev-parse", "HEAD", cwd=checkout) == before


# ---- the versions the README and the install guides name ----

def newest_release() -> str:
    return max((str(version) for version in releases()), key=lambda version: [int(part) for part in version.split(".")])


def version_docs() -> dict[str, str]:
    """The README and the install guides, where hack/release.sh writes the versions (hack/release_docs.py)."""
    return {str(path.relative_to(REPO)): path.read_text(encoding="utf-8")
            for pattern in release_docs.DOCS for path in sorted(REPO.glob(pattern))}


def named(pattern: re.Pattern[str], text: str) -> list[str]:
    """The versions ``pattern`` (one of release_docs') finds in ``text``: what follows its first group."""
    return [text[match.end(1):match.end()].rstrip(")") for match in pattern.finditer(text)]


def test_every_install_range_and_image_tag_names_the_newest_release():
    """After a release the docs install it: ``>=X.Y.0,<X.(Y+1).0`` of the newest release, its image tags."""
    newest = newest_release()
    wanted = f"{newest},<{release_docs.next_minor(newest)}"
    ranges = {(name, found) for name, text in version_docs().items() for found in named(release_docs.INSTALL_RANGE, text)}
    tags = {(name, found) for name, text in version_docs().items() for found in named(release_docs.IMAGE_TAG, text)}
    assert {name for name, dummy in ranges} >= {"README.md", "docs/execution_environment.md"}, ranges
    assert {(name, found) for name, found in ranges if found != wanted} == set(), \
        f"ranges that do not install the newest release {newest} (>={wanted})"
    assert tags and {(name, found) for name, found in tags if found != newest} == set(), \
        f"image tags that do not name the newest release {newest}"


def test_the_readme_lists_every_release_and_the_version_main_names():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    listed = release_docs.RELEASE_LIST.search(readme)
    assert listed, "README.md no longer lists the releases after the git log command"
    assert [version.strip() for version in listed.group(2).split(",")] == \
        sorted((str(version) for version in releases()), key=lambda version: [int(part) for part in version.split(".")])
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text(encoding="utf-8"))
    assert named(release_docs.NEXT_VERSION, readme) == [galaxy["version"]]


@pytest.mark.parametrize(("message", "refused"), [
    ("Tie each runtime to its service\n\nWhy, and what was measured.\n", None),
    ("wip: runtime identity\n", "a 'wip' commit does not belong on main"),
    ("Tie each runtime to its own producer service, wherever the producers happen to run\n",
     "the subject has 82 characters, at most 72"),
    ("Tie each runtime to its service.\n", "the subject ends with a full stop"),
    ("Tie each runtime to its service\nwithout a blank line\n", "a blank line goes between the subject and the body"),
])
def test_the_commit_msg_hook_keeps_subjects_a_reader_can_scan(tmp_path, message, refused):
    (tmp_path / "COMMIT_EDITMSG").write_text(message + "# Please enter the commit message\n", encoding="utf-8")

    hook = subprocess.run(["bash", str(REPO / "hack" / "hooks" / "commit-msg"), str(tmp_path / "COMMIT_EDITMSG")],
                          capture_output=True, text=True, check=False)

    assert (hook.returncode == 0) is (refused is None), hook.stderr
    assert refused is None or refused in hook.stderr
