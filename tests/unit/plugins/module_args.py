# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module's arguments in a unit test, on every ansible-core of the matrix.

ansible-core 2.19 added ``ansible.module_utils.testing.patch_module_args``.
Before it (2.16 to 2.18) a module read its arguments from
``basic._ANSIBLE_ARGS`` when set, the JSON the controller sends it: the
stand-in below sets that, as 2.19's does.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core 2.16 to 2.18
    from ansible.module_utils import basic

    @contextlib.contextmanager
    def patch_module_args(args: dict[str, Any] | None = None) -> Iterator[None]:  # type: ignore[misc]
        """Expose ``args`` to the AnsibleModule instances created within this context."""
        with mock.patch.object(basic, "_ANSIBLE_ARGS", json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}).encode()):
            yield

__all__ = ["patch_module_args"]
