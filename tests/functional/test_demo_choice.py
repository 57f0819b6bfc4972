"""The demo's choice of ansible-core for the Python it runs on, held against the releases themselves.

hack/matrix.sh says which Python each ansible-core of the matrix needs
(matrix_core_min_python) and picks, for the demo, the newest released core a
Python runs (matrix_core_for_python): never the next core's pre-release
(matrix_prerelease_cores), which only ansible-test runs, and none on a Python
the test bed does not install on (matrix_testbed_min_python). The releases
say it too: the Requires-Python of each pinned ansible-core, read here from
the venv hack/bootstrap.sh made for that core, and of each package of
requirements/testbed.txt, from the project venv. No database, no demo run.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parents[2]
# Every Python of the matrix, and one older than any core supports.
PYTHONS = ("3.10", "3.11", "3.12", "3.13")


def matrix() -> dict:
    """The matrix as hack/matrix.sh states it (released cores, then pre-releases), and the demo's choice
    for each of PYTHONS ('' for none)."""
    script = f"""
        root={REPO}; source "$root/hack/matrix.sh"
        for core in "${{matrix_cores[@]}}"; do
            printf '%s %s %s\\n' "$core" "${{matrix_core_min_python[$core]}}" "$(matrix_venv "$core")"
        done
        echo prereleases
        for core in "${{matrix_prerelease_cores[@]}}"; do
            printf '%s %s %s\\n' "$core" "${{matrix_core_min_python[$core]}}" "$(matrix_venv "$core")"
        done
        echo choices
        for python in {' '.join(PYTHONS)}; do printf '%s %s\\n' "$python" "$(matrix_core_for_python "$python")"; done
    """
    lines = subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True).stdout.splitlines()
    prereleases, choices = lines.index("prereleases"), lines.index("choices")

    def cores(entries: list[str]) -> dict:
        return {core: {"min_python": minimum, "venv": Path(venv)}
                for core, minimum, venv in (line.split() for line in entries)}

    return {"cores": cores(lines[:prereleases]), "prereleases": cores(lines[prereleases + 1:choices]),
            "choices": {fields[0]: fields[1] if len(fields) > 1 else ""
                        for fields in (line.split() for line in lines[choices + 1:])}}


def requires_python(venv: Path) -> str:
    if not (venv / "bin" / "python").exists():
        pytest.skip(f"{venv} does not exist: bash hack/bootstrap.sh all prepares it")
    code = "import importlib.metadata as m; print(m.metadata('ansible-core')['Requires-Python'])"
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_each_core_needs_the_python_its_release_says():
    stated_matrix = matrix()
    for core, stated in {**stated_matrix["cores"], **stated_matrix["prereleases"]}.items():
        release = requires_python(stated["venv"])
        assert SpecifierSet(release).contains(stated["min_python"]), (core, release)
        older = f"3.{int(stated['min_python'].split('.')[1]) - 1}"
        assert not SpecifierSet(release).contains(older), (core, release, "needs less than the matrix says")


def python_the_testbed_requires() -> SpecifierSet:
    """What every package requirements/testbed.txt pins asks of Python (the demo's venv installs them all)."""
    pinned = re.findall(r"^([A-Za-z0-9_.-]+)(?:\[[^]]*\])?==", (REPO / "requirements" / "testbed.txt").read_text(),
                        re.MULTILINE)
    code = ("import importlib.metadata as m, sys; "
            "print(';'.join(m.metadata(name)['Requires-Python'] or '' for name in sys.argv[1:]))")
    venv = matrix()["cores"][next(iter(matrix()["cores"]))]["venv"]
    found = subprocess.run([str(venv / "bin" / "python"), "-c", code, *pinned], check=True, capture_output=True,
                           text=True).stdout.strip()
    return SpecifierSet(",".join(spec for spec in found.split(";") if spec))


def test_the_demo_runs_the_newest_core_each_python_runs():
    stated = matrix()
    releases = {core: SpecifierSet(requires_python(entry["venv"])) for core, entry in stated["cores"].items()}
    testbed = python_the_testbed_requires()
    for python in PYTHONS:
        newest = next((core for core, allowed in releases.items() if allowed.contains(python)), "")
        expected = newest if testbed.contains(python) else ""
        assert stated["choices"][python] == expected, (python, stated["choices"][python], expected)
    assert stated["choices"]["3.10"] == "", "the test bed does not install on Python 3.10 (hypothesis needs 3.11)"
