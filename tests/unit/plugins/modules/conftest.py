# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module's result as the controller receives it."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest


@pytest.fixture
def module_result(capsys) -> Callable[[], dict]:
    """Reads what the module printed. From ansible-core 2.22 a module also sends its no_log values back
    (`_ansible_new_secrets`) so the controller masks them everywhere; the controller takes that key out before
    anything is shown or registered, so the tests take it out too."""
    def read() -> dict:
        result = json.loads(capsys.readouterr().out)
        result.pop("_ansible_new_secrets", None)
        return result
    return read
