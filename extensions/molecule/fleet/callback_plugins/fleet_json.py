# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet scenario's stdout callback: a run's results as one JSON document, for verify.

ansible-core ships no JSON stdout callback (ansible.posix has one, and the
test command installs no collection from Galaxy), so the scenario carries
this small one. It writes the document to the file ``FLEET_JSON_OUTPUT``
names (the action plugin's progress lines go to stdout too), or prints it.
The document has the shape verify reads:
``{"plays": [{"play": {"name": ...}, "tasks": [{"task": {"name": ...},
"hosts": {HOST: RESULT}}]}], "stats": {HOST: {...}}}``.
"""

from __future__ import annotations

import json
import os

from ansible.parsing.ajson import AnsibleJSONEncoder
from ansible.plugins.callback import CallbackBase
from ansible.vars.clean import module_response_deepcopy, strip_internal_keys

DOCUMENTATION = """
name: fleet_json
type: stdout
short_description: The fleet scenario's run results as one JSON document
description:
  - Prints every task's result per host as one JSON document when the playbook ends.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "fleet_json"

    def __init__(self) -> None:
        super().__init__()
        self.plays: list[dict] = []

    def v2_playbook_on_play_start(self, play) -> None:
        self.plays.append({"play": {"name": play.get_name()}, "tasks": []})

    def _task_entry(self, task) -> dict:
        tasks = self.plays[-1]["tasks"]
        if not tasks or tasks[-1]["task"]["id"] != str(task._uuid):  # pylint: disable=protected-access
            tasks.append({"task": {"name": task.get_name(), "id": str(task._uuid)},  # pylint: disable=protected-access
                          "hosts": {}})
        return tasks[-1]

    def _record(self, result, **status) -> None:
        entry = self._task_entry(result._task)  # pylint: disable=protected-access
        found = strip_internal_keys(module_response_deepcopy(result._result))  # pylint: disable=protected-access
        entry["hosts"][result._host.get_name()] = {**found, **status}  # pylint: disable=protected-access

    def v2_runner_on_ok(self, result) -> None:
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        self._record(result, failed=True)

    def v2_runner_on_skipped(self, result) -> None:
        self._record(result, skipped=True)

    def v2_runner_on_unreachable(self, result) -> None:
        self._record(result, unreachable=True)

    def v2_playbook_on_stats(self, stats) -> None:
        summary = {host: stats.summarize(host) for host in sorted(stats.processed)}
        document = json.dumps({"plays": self.plays, "stats": summary}, cls=AnsibleJSONEncoder, indent=1,
                              sort_keys=True)
        if os.environ.get("FLEET_JSON_OUTPUT"):
            with open(os.environ["FLEET_JSON_OUTPUT"], "w", encoding="utf-8") as output:
                output.write(document + "\n")
        else:
            self._display.display(document)
