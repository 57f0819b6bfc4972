"""awa_producer_services on every Python a supported ansible-core runs modules on, as the interpreter of a host.

From Python 3.8 it writes the environment file, restarts through a command and
reads the service back; on the older Pythons the floor core still runs modules
on (2.7 and 3.6 with ansible-core 2.16, 3.7 with 2.16 and 2.17) it refuses,
naming the version and what to install, and touches nothing. Real
interpreters (hack/bootstrap.sh links them into .venvs/interpreters: pyenv's or
the system's) and real ``ansible`` - the floor core's (hack/matrix.sh) where
the newest core runs no module (before Python 3.9), the project venv's
otherwise. No database.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from enqueue_shards_support import ansible_env

REPO = Path(__file__).resolve().parents[2]


def matrix() -> dict:
    """From hack/matrix.sh: the Pythons it runs on and refuses, the interpreters' folder, the venvs of the
    floor core (the oldest of matrix_cores) and the newest."""
    script = f"""
        root={REPO}; source "$root/hack/matrix.sh"
        echo "${{matrix_sanity_pythons[*]}}"; echo "${{matrix_refused_target_pythons[*]}}"
        echo "$venvs/interpreters"; matrix_venv "${{matrix_cores[-1]}}"; matrix_venv "${{matrix_cores[0]}}"
    """
    supported, refused, interpreters, floor, newest = subprocess.run(
        ["bash", "-c", script], check=True, capture_output=True, text=True).stdout.splitlines()
    return {"supported": supported.split(), "refused": refused.split(), "interpreters": Path(interpreters),
            "floor": Path(floor), "newest": Path(newest)}


MATRIX = matrix()


def run_module(python: str, module_args: dict) -> tuple[str, dict]:
    """``ansible localhost -m awa.operations.awa_producer_services --diff`` with Python ``python`` as the host's
    interpreter: what it printed and the result. Up to 3.8 the floor core runs it (the newest runs no module there)."""
    interpreter = MATRIX["interpreters"] / f"python{python}"
    if not interpreter.exists():
        pytest.fail(f"{interpreter} does not exist: bash hack/bootstrap.sh all links it (pyenv install {python})")
    venv = MATRIX["floor"] if [int(part) for part in python.split(".")] < [3, 9] else MATRIX["newest"]
    process = subprocess.run(
        [str(venv / "bin" / "ansible"), "localhost", "-c", "local", "--diff", "-m", "awa.operations.awa_producer_services",
         "-a", json.dumps(module_args), "-e", f"ansible_python_interpreter={interpreter}"],
        env=ansible_env(), capture_output=True, text=True, timeout=300, check=False)
    marker = process.stdout.find("localhost | ")
    assert marker >= 0, f"no result in ansible output:\n{process.stdout}\n{process.stderr}"
    return process.stdout, json.loads(process.stdout[process.stdout.index("{", marker):])


def restart_by_command(folder: Path) -> dict:
    """Write an environment file, restart one service by command, read it back with a status command."""
    return {"services": ["app-1"], "restart": ["app-1"], "method": "command",
            "restart_command": f"touch {folder}/{{service}}.restarted",
            "status_command": "sh -c 'echo $(date +%s) $$' {service}",
            "env_file": {"path": str(folder / "producer.env"), "content": "AWA_OVERRIDE_REFRESH_MS=1000\nTOKEN=t-s3cret\n",
                         "show": ["AWA_OVERRIDE_REFRESH_MS"], "mode": "0640"}}


@pytest.mark.parametrize("python", MATRIX["supported"])
def test_from_python_3_8_it_writes_the_file_restarts_and_reads_the_service(python, tmp_path):
    printed, result = run_module(python, restart_by_command(tmp_path))
    assert "localhost | CHANGED" in printed, printed
    assert result["changed"] and result["restarted"] == ["app-1"] and (tmp_path / "app-1.restarted").exists()
    [service] = result["services"]
    assert service["state"] == "running" and service["started_at"] > 0 and service["main_pid"] > 0
    assert result["env_file"] == {"path": str(tmp_path / "producer.env"), "changed": True}
    assert (tmp_path / "producer.env").read_text(encoding="utf-8").endswith("TOKEN=t-s3cret\n")
    assert "+AWA_OVERRIDE_REFRESH_MS=1000 (added)\n+TOKEN=******** (added)\n" in printed
    assert "t-s3cret" not in printed


@pytest.mark.parametrize("python", MATRIX["refused"])
def test_an_older_python_is_refused_with_its_version_and_what_to_install(python, tmp_path):
    printed, result = run_module(python, restart_by_command(tmp_path))
    assert "localhost | FAILED!" in printed, printed
    version = subprocess.run([str(MATRIX["interpreters"] / f"python{python}"), "-c",
                              "import platform; print(platform.python_version())"],
                             check=True, capture_output=True, text=True).stdout.strip()
    assert "awa_producer_services needs Python 3.8 or newer on the producer host; " in result["msg"]
    assert f"python{python}, Python {version}. Install Python 3.8 or newer there" in result["msg"]
    assert "set ansible_python_interpreter for the host to it. Nothing was restarted or written." in result["msg"]
    assert list(tmp_path.iterdir()) == [], "the refusal restarted or wrote something"
