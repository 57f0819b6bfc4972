"""The releases every clone of this branch sees, checked: changelogs/changelog.yaml and the release commits.

    python hack/release_record.py    # prints each release and its commit; exit 1 naming what does not hold

A release is recorded in the repository's own files and history, not in a
tag (a clone holds tags only once they were pushed): changelogs/changelog.yaml
lists it with its date, and one commit on this branch carries the line
``Release X.Y.Z`` as its subject (``Release X.Y.Z: ...`` before 0.3.0).
That commit is the first whose changelog lists the release, its galaxy.yml
says that version, and it is dated (UTC) as the changelog dates the release.
``git log --grep '^Release '`` lists the releases in any clone.
hack/release.sh checks this before it makes a release, and writes both.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = "changelogs/changelog.yaml"
# The subject line a release commit carries: "Release 0.3.0", or "Release 0.1.0: ..." as the first two did.
RELEASE_SUBJECT = re.compile(r"^Release (\d+\.\d+\.\d+)(?::.*)?$")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env={**os.environ, "TZ": "UTC"}).stdout.strip()


def listed_releases(repo: Path, revision: str | None = None) -> dict[str, dict]:
    """version -> its entry in changelogs/changelog.yaml, in the working tree or at ``revision``."""
    text = git(repo, "show", f"{revision}:{CHANGELOG}") if revision else (repo / CHANGELOG).read_text(encoding="utf-8")
    return {str(version): entry for version, entry in ((yaml.safe_load(text) or {}).get("releases") or {}).items()}


def release_commits(repo: Path) -> dict[str, list[str]]:
    """version -> the commits of this branch whose subject is that version's release line."""
    found: dict[str, list[str]] = {}
    for line in git(repo, "log", "--format=%H %s", "-E", "--grep=^Release [0-9]").splitlines():
        commit, subject = line.split(" ", 1)
        match = RELEASE_SUBJECT.match(subject)
        if match:
            found.setdefault(match.group(1), []).append(commit)
    return found


def first_listing(repo: Path) -> dict[str, str]:
    """version -> the first commit of this branch whose changelog lists it."""
    first: dict[str, str] = {}
    for commit in git(repo, "log", "--reverse", "--format=%H", "--", CHANGELOG).splitlines():
        for version in listed_releases(repo, commit):
            first.setdefault(version, commit)
    return first


def problems(repo: Path = ROOT) -> list[str]:
    """What does not hold of the recorded releases (nothing: every release is recorded as it should be)."""
    if git(repo, "rev-parse", "--is-shallow-repository") == "true":
        return ["a shallow clone lacks the release commits: git fetch --unshallow"]
    releases, commits, first = listed_releases(repo), release_commits(repo), first_listing(repo)
    found = [f"a commit says 'Release {version}' but {CHANGELOG} lists no release {version}: {', '.join(shas)}"
             for version, shas in commits.items() if version not in releases]
    for version, entry in releases.items():
        shas = commits.get(version, [])
        if len(shas) != 1:
            found.append(f"release {version}: {len(shas)} commits carry the line 'Release {version}' (one should)")
            continue
        commit = shas[0]
        if first.get(version) != commit:
            found.append(f"release {version}: its commit {commit[:7]} is not the first whose {CHANGELOG} lists it")
        if f"version: {version}" not in git(repo, "show", f"{commit}:galaxy.yml").splitlines():
            found.append(f"release {version}: galaxy.yml of its commit {commit[:7]} does not say 'version: {version}'")
        day = git(repo, "log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%d", commit)
        if str(entry.get("release_date")) != day:
            found.append(f"release {version}: {CHANGELOG} dates it {entry.get('release_date')}, "
                         f"its commit {commit[:7]} is dated {day} (UTC)")
    return found


def main() -> int:
    found = problems()
    if found:
        print("\n".join(f"hack/release_record.py: {problem}" for problem in found), file=sys.stderr)
        return 1
    for version, commits in sorted(release_commits(ROOT).items(), key=lambda item: [int(part) for part in item[0].split(".")]):
        print(f"{version}  {git(ROOT, 'log', '-1', '--format=%h %cs %s', commits[0])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
