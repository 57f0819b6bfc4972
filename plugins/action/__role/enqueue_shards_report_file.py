# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of the role's internal report writer: the report on the controller, with no module run anywhere.

ansible.builtin.copy, delegated to localhost, runs two modules (stat, then
copy) in new Python processes for one file: about a second and a half of the
controller's CPU at the end of every change window.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import Any

from ansible.plugins.action import ActionBase

ARGUMENT_SPEC = {
    "report": {"type": "raw", "required": True},
    "dir": {"type": "path", "default": "."},
}


def report_path(directory: str, now: datetime.datetime) -> str:
    """The report's file in ``directory``, named by the UTC second ``now``."""
    stamp = now.astimezone(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    # ~ and variables are expanded by the argument spec (type path).
    return os.path.join(os.path.abspath(directory), f"enqueue_shards-{stamp}.json")


def write_report(report: object, path: str) -> None:
    """``report`` as indented JSON in ``path``, readable by its owner only (even if the file was there before)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        os.fchmod(file.fileno(), 0o600)
        json.dump(report, file, indent=4, sort_keys=True)
        file.write("\n")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    @staticmethod
    def now() -> datetime.datetime:
        """The time that names the file (replaced in unit tests)."""
        return datetime.datetime.now(datetime.timezone.utc)

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        del validation
        path = report_path(args["dir"], self.now())
        if not os.path.isdir(os.path.dirname(path)):
            return dict(result, failed=True, msg=(
                f"The report's directory {os.path.dirname(path)} does not exist on the controller: create it or name "
                "another (the role's enqueue_shards_report_dir; an empty string there writes no report)"))
        try:
            write_report(args["report"], path)
        except OSError as exc:
            return dict(result, failed=True, msg=f"Could not write the report {path}: {exc.strerror}")
        return dict(result, changed=True, path=path)
