# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of the role's internal report writer: the report on the controller, with no module run anywhere.

ansible.builtin.copy, delegated to localhost, runs two modules (stat, then
copy) in new Python processes for one file: about a second and a half of the
controller's CPU at the end of every change window.

The role writes the record as the window goes (after the change, after each
batch, at the end), each time whole, into one file per window: named by
when the run of ansible-playbook started and a digest of this controller,
that run and the window's start (``window``), so two windows started in the
same second - two slices of an AWX job, two ``--limit``s - never write the
same file, and an interrupted window leaves the record of its last step.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from typing import Any

from ansible.plugins.action import ActionBase

ARGUMENT_SPEC = {
    "report": {"type": "raw", "required": True},
    "dir": {"type": "path", "default": "."},
    "window": {"type": "str", "default": ""},
}


def process_start(pid: int) -> float | None:
    """When process ``pid`` started, in unix seconds (Linux's /proc); None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat, open("/proc/stat", encoding="utf-8") as system:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            boot = next(int(line.split()[1]) for line in system if line.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def report_path(directory: str, window: str, run: int | None = None) -> str:
    """The window's report file in ``directory``: the UTC second its run of ansible-playbook (``run``, the
    process that forked this worker) started, and a digest of this host, that run and ``window``."""
    run = os.getppid() if run is None else run
    started = process_start(run)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if started is None else started))
    digest = hashlib.sha256(f"{socket.gethostname()} {run} {started} {window}".encode()).hexdigest()[:8]
    # ~ and variables are expanded by the argument spec (type path).
    return os.path.join(os.path.abspath(directory), f"enqueue_shards-{stamp}-{digest}.json")


def write_report(report: object, directory: str, window: str) -> dict[str, Any]:
    """``report`` as indented JSON in the window's file in ``directory`` (report_path), readable by its owner only
    (even if the file was there before): its ``path``, or what failed (``failed``, ``msg``)."""
    path = report_path(directory, window)
    if not os.path.isdir(os.path.dirname(path)):
        return {"failed": True, "msg": (
            f"The report's directory {os.path.dirname(path)} does not exist on the controller: create it or name "
            "another (the role's enqueue_shards_report_dir; an empty string there writes no report)")}
    try:
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as file:
            os.fchmod(file.fileno(), 0o600)
            file.write(json.dumps(report, indent=4, sort_keys=True) + "\n")
    except OSError as exc:
        return {"failed": True, "msg": f"Could not write the report {path}: {exc.strerror}"}
    return {"changed": True, "path": path}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        return dict(result, **write_report(args["report"], args["dir"], args["window"]))
