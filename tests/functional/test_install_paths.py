"""The install paths the README gives for a host whose system Python refuses pip (PEP 668).

Debian 12 (like Ubuntu 24.04 and Fedora) marks its Python as externally
managed, so ``pip install psycopg`` into it fails. Two paths work, and both run
the modules here: the distribution's package (``python3-psycopg``, with
``ansible_python_interpreter: /usr/bin/python3``), and a virtual environment
made with the system Python (``ansible_python_interpreter`` pointing into it).
The test command installs the Debian packages (python3-psycopg, python3-venv).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from enqueue_shards_support import ansible_command, shard_counts

PLAYBOOK = Path(__file__).parent / "playbooks" / "install_paths.yml"
SYSTEM_PYTHON = Path("/usr/bin/python3")
# The psycopg the README tells users to put into their virtual environment (requirements/test.txt pins the same).
VENV_PSYCOPG = "psycopg[binary]==3.3.9"


def _system_python_has(module: str) -> bool:
    return subprocess.run([str(SYSTEM_PYTHON), "-c", f"import {module}"], capture_output=True, check=False).returncode == 0


@pytest.fixture(scope="module")
def system_python() -> Path:
    """/usr/bin/python3 with Debian's python3-psycopg: the distribution's path."""
    if not SYSTEM_PYTHON.exists() or not _system_python_has("psycopg"):
        pytest.fail(f"{SYSTEM_PYTHON} cannot import psycopg: install Debian's python3-psycopg (the test command "
                    "does, as root: apt-get install python3-psycopg python3-venv)")
    return SYSTEM_PYTHON


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory) -> Path:
    """A virtual environment of the system Python with psycopg from PyPI: the venv path."""
    venv = tmp_path_factory.mktemp("awa-host-venv")
    created = subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", str(venv)], capture_output=True, text=True,
                             check=False)
    if created.returncode != 0:
        pytest.fail(f"{SYSTEM_PYTHON} -m venv failed (install Debian's python3-venv): {created.stderr}")
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", VENV_PSYCOPG],
                   capture_output=True, text=True, check=True, timeout=300)
    return python


def run_with(interpreter: Path, awa_db, queue: str, tmp_path: Path) -> dict:
    result_file = tmp_path / f"{queue}.json"
    extra = {**awa_db.login_args("migrator"), "queue": queue, "result_file": str(result_file),
             "ansible_python_interpreter": str(interpreter)}
    process = ansible_command("ansible-playbook", str(PLAYBOOK), "-e", json.dumps(extra))
    assert process.returncode == 0, process.stdout + process.stderr
    return json.loads(result_file.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", ["distribution package", "virtual environment"])
def test_both_modules_run_with_the_hosts_own_python(path, request, awa_db, tmp_path):
    interpreter = request.getfixturevalue("system_python" if path == "distribution package" else "venv_python")
    awa_db.setup_least_privilege(runtime_count=1)
    results = run_with(interpreter, awa_db, "hosted", tmp_path)
    version, location = results["psycopg"].split(" ", 1)
    if path == "distribution package":
        assert location.startswith("/usr/lib/python3/dist-packages/"), location
    else:
        assert location.startswith(str(interpreter.parent.parent)), location
    assert tuple(int(part) for part in version.split(".")[:2]) >= (3, 1)
    assert results["change"]["changed"] and results["change"]["lanes_created"] == 16
    assert not results["rerun"]["changed"]
    assert results["info"]["converged"] and results["info"]["queues"]["hosted"]["enqueue_shards"] == {"hosted": 4}
    assert shard_counts(awa_db) == {"hosted": 4}


# -- without psycopg: the message names the Python and the command for it --------------------------------------

def bare_venv(folder: Path) -> Path:
    """A virtual environment of the system Python without psycopg (nor pip: nothing is installed into it)."""
    created = subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(folder)], capture_output=True,
                             text=True, check=False)
    if created.returncode != 0:
        pytest.fail(f"{SYSTEM_PYTHON} -m venv failed (install Debian's python3-venv): {created.stderr}")
    return folder / "bin" / "python"


def refused_for(interpreter: str) -> str:
    """The change module run with ``interpreter``, which cannot import psycopg: its failure message."""
    process = ansible_command("ansible", "localhost", "-m", "awa.operations.awa_enqueue_shards",
                              "-a", json.dumps({"login_host": "127.0.0.1", "queue": "orders", "shards": 2}),
                              "-e", json.dumps({"ansible_python_interpreter": interpreter}))
    assert process.returncode != 0, process.stdout
    return json.loads(process.stdout[process.stdout.index("{", process.stdout.find("localhost | ")):])["msg"]


def test_without_psycopg_a_venv_is_told_to_pip_install_into_that_venv(tmp_path):
    python = bare_venv(tmp_path / "ansible")
    message = refused_for(str(python))
    assert "cannot be imported by the Python this module ran with on " in message
    assert f": {python}. Install it into that Python: {python} -m pip install 'psycopg[binary]'." in message
    assert "with a separate database host (the inventory group awa_db_controller) they run there instead" in message


def test_without_psycopg_a_pipx_venv_is_told_to_inject_it(tmp_path):
    """pipx keeps an app's venv at <pipx home>/venvs/<app> (~/.local/share/pipx/venvs/ansible-core)."""
    python = bare_venv(tmp_path / "pipx" / "venvs" / "ansible-core")
    message = refused_for(str(python))
    assert f": {python}. Install it into that Python: pipx inject ansible-core 'psycopg[binary]'." in message


def test_without_psycopg_the_distribution_s_python_is_told_to_install_its_package(tmp_path):
    """/usr/bin/python3 has Debian's python3-psycopg here (the tests above use it); ``-S`` starts it without its
    site packages, as a Debian host without that package would (Ansible takes an interpreter path, not a command
    line: a script execs it)."""
    if "ID=debian" not in Path("/etc/os-release").read_text(encoding="utf-8"):
        pytest.fail("the distribution case is written for Debian 12, the test machine's system")
    without_site = tmp_path / "python3"
    without_site.write_text(f'#!/bin/sh\nexec {SYSTEM_PYTHON} -S "$@"\n', encoding="utf-8")
    without_site.chmod(0o755)
    message = refused_for(str(without_site))
    assert f": {SYSTEM_PYTHON}. Install it into that Python: apt install python3-psycopg." in message
