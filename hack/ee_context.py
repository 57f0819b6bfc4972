"""What an ansible-builder build context installs, checked against the collection's needs (hack/test.sh ee).

    python hack/ee_context.py NAME CONTEXT

CONTEXT is what ``ansible-builder create`` wrote for one of the documented
samples (docs/examples/*/). Prints one line: the base image, the Python, the
ansible-core and ansible-runner the image would get (the newest releases the
definition allows for that Python, as pip resolves them today, or the base
image's own when it installs none), and the collections. Fails, saying why,
when the definition lets ansible-core below the collection's floor
(meta/runtime.yml requires_ansible), has no build step that stops an image
running an older one, or does not install awa.operations. The image itself is
not built: that needs a container engine.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOWER_BOUNDS = (">=", ">", "==", "~=", "===")


class ContextProblem(Exception):
    """The build context does not give the collection what it needs."""


def collection_floor() -> Version:
    """The oldest ansible-core the collection supports (meta/runtime.yml)."""
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text(encoding="utf-8"))
    return Version(runtime["requires_ansible"].lstrip(">="))


def build_args(containerfile: str) -> dict[str, str]:
    """The ``ARG NAME="value"`` defaults ansible-builder writes at the top of the Containerfile."""
    return dict(re.findall(r'^ARG (\w+)="(.*)"$', containerfile, re.MULTILINE))


def keeps_floor(specifier: SpecifierSet, floor: Version) -> bool:
    """Whether ``specifier`` has a lower bound at or above ``floor`` (so no older release can satisfy it)."""
    return any(spec.operator in LOWER_BOUNDS and Version(spec.version.rstrip(".*")) >= floor for spec in specifier)


def resolved_versions(requirements: list[str], python: str) -> dict[str, str]:
    """name -> the version pip would install today for ``python`` (X.Y), without dependencies."""
    report = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "--dry-run", "--quiet",
         "--ignore-installed", "--no-deps", "--only-binary=:all:", "--python-version", python, "--report", "-",
         *requirements], capture_output=True, text=True, check=True)
    return {item["metadata"]["name"].lower(): item["metadata"]["version"]
            for item in json.loads(report.stdout)["install"]}


def describe(name: str, context: Path) -> str:
    containerfile = next(path for path in (context / "Containerfile", context / "Dockerfile") if path.exists())
    text = containerfile.read_text(encoding="utf-8")
    args = build_args(text)
    refs = [Requirement(ref) for ref in shlex.split(args.get("ANSIBLE_INSTALL_REFS", ""))]
    core = next((ref for ref in refs if ref.name == "ansible-core"), None)
    floor = collection_floor()
    # No ansible_core: the base image's own runs (AAP's EEs), and the final step below is what holds it to the floor.
    if core is not None and not keeps_floor(core.specifier, floor):
        raise ContextProblem(f"{name}: ansible-core '{core.specifier}' allows releases older than {floor}")
    if not re.search(rf"^RUN .*older than {floor.major}\.{floor.minor}", text, re.MULTILINE):
        raise ContextProblem(f"{name}: no final build step fails an image that runs an ansible-core older than "
                             f"{floor.major}.{floor.minor} (additional_build_steps.append_final)")
    collections = yaml.safe_load((context / "_build" / "requirements.yml").read_text(encoding="utf-8"))["collections"]
    if not any(entry["name"] == "awa.operations" for entry in collections):
        raise ContextProblem(f"{name}: the build context does not install awa.operations")
    python_match = re.search(r"python(\d+\.\d+)$", args["PYCMD"])
    if python_match is None:
        raise ContextProblem(f"{name}: give python_interpreter.python_path with its version (/usr/bin/python3.X), "
                             f"got {args['PYCMD']}")
    versions = resolved_versions([str(ref) for ref in refs], python_match.group(1)) if refs else {}
    installs = ", ".join(f"{ref} ({versions[ref.name.lower()]} today)" for ref in refs) \
        or f"the base image's own ansible-core and ansible-runner ({floor.major}.{floor.minor} or newer, checked by the build)"
    listed = ", ".join(f"{entry['name']} {entry.get('version', '')}".strip() for entry in collections)
    return (f"{name}: FROM {args['EE_BASE_IMAGE']}, {args['PYCMD']}: {installs}; collections {listed}; "
            "psycopg and libpq from the collection's meta/execution-environment.yml at build time")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        print(describe(argv[0], Path(argv[1])))
    except ContextProblem as problem:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
