"""Every release is a tag on the commit that released it, dated as the changelog says; hack/release.sh makes both.

No database. The first test reads this repository's history: each release's
commit (the first that lists it in changelogs/changelog.yaml) says its version
in galaxy.yml and is dated as the changelog says. The tags themselves are not
read from this clone - a clone of a pushed branch holds none, and the test
command lets no test skip - so the others run hack/release.sh in a copy of this
checkout, with this checkout's venvs, and check the annotated tag it makes.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

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


def release_commits() -> dict[str, str]:
    """Each release's commit: the first on this branch whose changelogs/changelog.yaml lists it."""
    if git("rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone lacks the releases' commits: git fetch --unshallow")
    found: dict[str, str] = {}
    for commit in git("log", "--reverse", "--format=%H", "--", "changelogs/changelog.yaml").splitlines():
        listed = yaml.safe_load(git("show", f"{commit}:changelogs/changelog.yaml")).get("releases") or {}
        for version in listed:
            found.setdefault(str(version), commit)
    return found


def test_every_release_is_a_commit_with_its_version_dated_as_the_changelog_says():
    commits = release_commits()
    for version, release in releases().items():
        assert version in commits, f"no commit lists the release {version} in changelogs/changelog.yaml"
        commit = commits[version]
        assert f"version: {version}" in git("show", f"{commit}:galaxy.yml").splitlines(), (version, commit)
        assert str(release["release_date"]) == commit_day(commit), (version, commit, release["release_date"])


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A git repository holding this checkout's files as they are now (committed or not), one commit."""
    copy = tmp_path / "awa.operations"
    copy.mkdir()
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           check=True, capture_output=True).stdout
    archive = subprocess.run(["tar", "--null", "-T", "-", "-cf", "-"], cwd=REPO, input=files, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-xf", "-"], cwd=copy, input=archive, check=True)
    git("init", "-q", "-b", "main", cwd=copy)
    git("add", "-A", cwd=copy)
    git("commit", "-q", "-m", "The checkout under test", cwd=copy)
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


def test_release_sh_commits_the_release_and_tags_it(checkout):
    before = git("rev-parse", "HEAD", cwd=checkout)
    prepare(checkout, "9.9.9")
    process = release(checkout, "9.9.9")
    assert process.returncode == 0, process.stdout + process.stderr
    assert git("log", "-1", "--format=%s", cwd=checkout) == "Release 9.9.9"
    assert git("rev-parse", "HEAD~1", cwd=checkout) == before
    assert git("cat-file", "-t", "v9.9.9", cwd=checkout) == "tag"
    assert git("rev-list", "-n", "1", "v9.9.9", cwd=checkout) == git("rev-parse", "HEAD", cwd=checkout)
    assert str(releases(checkout)["9.9.9"]["release_date"]) == commit_day("HEAD", checkout)
    assert git("status", "--porcelain", cwd=checkout) == "", "the release commit holds every change it made"
    assert not list((checkout / "changelogs" / "fragments").glob("*.yml")), "the fragments moved into the changelog"
    assert "v9\\.9\\.9" in (checkout / "CHANGELOG.md").read_text(encoding="utf-8")


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
