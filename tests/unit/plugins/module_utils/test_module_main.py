# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a module says without psycopg: the Python it ran with and the command for that Python, by its layout.

tests/functional/test_install_paths.py runs the modules with a real venv, a
pipx-style venv and /usr/bin/python3 that lack psycopg.
"""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.module_main import (
    Interpreter,
    install_command,
    missing_psycopg_message,
    older_python_message,
)

SYSTEM = "/usr"


@pytest.mark.parametrize("python, command", [
    (Interpreter("/srv/ansible/bin/python", "/srv/ansible", SYSTEM), "/srv/ansible/bin/python -m pip install 'psycopg[binary]'"),
    (Interpreter("/home/op/.local/share/pipx/venvs/ansible-core/bin/python",
                 "/home/op/.local/share/pipx/venvs/ansible-core", SYSTEM), "pipx inject ansible-core 'psycopg[binary]'"),
    (Interpreter("/home/op/.local/pipx/venvs/ansible/bin/python3", "/home/op/.local/pipx/venvs/ansible", SYSTEM),
     "pipx inject ansible 'psycopg[binary]'"),
    (Interpreter("/usr/bin/python3", SYSTEM, SYSTEM, ("debian",)), "apt install python3-psycopg"),
    (Interpreter("/usr/bin/python3", SYSTEM, SYSTEM, ("ubuntu", "debian")), "apt install python3-psycopg"),
    (Interpreter("/usr/bin/python3.11", SYSTEM, SYSTEM, ("rhel", "centos", "fedora")), "dnf install python3-psycopg3"),
    (Interpreter("/usr/bin/python3", SYSTEM, SYSTEM), "your distribution's psycopg 3 package (python3-psycopg on "
                                                      "Debian and Ubuntu)"),
    (Interpreter("/usr/local/bin/python3.13", "/usr/local", "/usr/local", ("debian",)),
     "/usr/local/bin/python3.13 -m pip install 'psycopg[binary]'"),
])
def test_the_command_is_the_one_for_that_kind_of_python(python, command):
    assert install_command(python) == command


def test_a_venv_that_is_not_pipx_s_is_not_taken_for_one_because_of_its_folder_name():
    venv = Interpreter("/srv/venvs/ansible/bin/python", "/srv/venvs/ansible", SYSTEM)
    assert install_command(venv) == "/srv/venvs/ansible/bin/python -m pip install 'psycopg[binary]'"


def test_the_message_names_the_python_its_host_the_command_and_the_database_host():
    message = missing_psycopg_message(Interpreter("/srv/ansible/bin/python", "/srv/ansible", SYSTEM, host="ctl1"))
    assert message.startswith("psycopg 3 (psycopg >= 3.1) cannot be imported by the Python this module ran with on "
                              "ctl1: /srv/ansible/bin/python. Install it into that Python: /srv/ansible/bin/python -m "
                              "pip install 'psycopg[binary]'.")
    assert "with a separate database host (the inventory group awa_db_controller) they run there instead" in message
    assert message.endswith("Nothing was read or written.")


@pytest.mark.parametrize("version, refused", [("3.8.18", True), ("3.9.2", True), ("3.10.0", False), ("3.13.1", False)])
def test_a_python_older_than_3_10_is_refused_naming_it_and_what_to_use(version, refused):
    message = older_python_message(Interpreter("/usr/bin/python3", SYSTEM, SYSTEM, ("rhel",), "db1", version))
    if not refused:
        assert message is None
        return
    assert message is not None
    assert f"db1 runs them with /usr/bin/python3, Python {version}" in message
    assert "need Python 3.10 or newer" in message and "ansible_python_interpreter" in message
    assert "psycopg[binary]" in message and "Nothing was read or written." in message
