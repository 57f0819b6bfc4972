"""The versions the README and the install guides name, written by hack/release.sh (tests/functional/test_release.py
holds them against galaxy.yml and changelogs/changelog.yaml):

    python hack/release_docs.py released VERSION   # the release commit: VERSION installed, listed among the releases
    python hack/release_docs.py next VERSION       # main's next commit: the version galaxy.yml names from now on

Prints the files it changed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Where a version of the collection is named: ranges to install (the command line, a requirements.yml), image tags.
DOCS = ("README.md", "docs/execution_environment.md", "docs/examples/*/*.yml", "docs/examples/*/collections/requirements.yml")
INSTALL_RANGE = re.compile(r"((?:awa\.operations:|version: \")>=)\d+\.\d+\.\d+,<\d+\.\d+\.\d+")
IMAGE_TAG = re.compile(r"(--tag awa-operations-[a-z-]+:|awa-operations-ee-aap:)\d+\.\d+\.\d+")
RELEASE_LIST = re.compile(r"(--grep '\^Release '`:\s+)([0-9., ]+)(;)")
NEXT_VERSION = re.compile(r"(names the next version\s+\(now )\d+\.\d+\.\d+(\))")


def next_minor(version: str) -> str:
    major, minor, dummy = (int(part) for part in version.split("."))
    return f"{major}.{minor + 1}.0"


def released(text: str, version: str) -> str:
    text = INSTALL_RANGE.sub(lambda match: f"{match.group(1)}{version},<{next_minor(version)}", text)
    text = IMAGE_TAG.sub(lambda match: f"{match.group(1)}{version}", text)

    def listed(match: re.Match[str]) -> str:
        versions = [item.strip() for item in match.group(2).split(",") if item.strip()]
        return match.group(1) + ", ".join(versions + ([version] if version not in versions else [])) + match.group(3)

    return RELEASE_LIST.sub(listed, text)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("released", "next"):
        print(__doc__, file=sys.stderr)
        return 2
    what, version = argv
    for path in sorted({path for pattern in DOCS for path in ROOT.glob(pattern)}):
        text = path.read_text(encoding="utf-8")
        new = released(text, version) if what == "released" else \
            NEXT_VERSION.sub(lambda match: f"{match.group(1)}{version}{match.group(2)}", text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
