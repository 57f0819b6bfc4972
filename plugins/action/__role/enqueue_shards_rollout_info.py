# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of the rollout role's internal read: awa_enqueue_shards_info's, for the internal module.

The same controller-side wait with a progress line per poll, the delay
waited out here, and async, with the rollout's options (info/options.py).

Given a window's state (``batch``) and the restarts of its next batch
(``restarts``: each host's result), it is the batch's whole step on the
database controller: it waits for the runtimes of the services that batch
restarted (rollout.batch.expectations), watches the batch for its pause when
it came back within its health gates, judges it on its last read
(rollout.state.after_batch) - returned as ``window_state``, said in one line -
and writes the window's record with its verdict (``record``: the window's
reads, its queues, the report's directory and window key), so an interrupted
window leaves the record of its last batch.
"""

from __future__ import annotations

import os
from typing import Any

from ansible.utils.display import Display

from ansible_collections.awa.operations.plugins.action.awa_enqueue_shards_info import ActionModule as InfoAction
from ansible_collections.awa.operations.plugins.action.__role.enqueue_shards_report_file import write_report
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import batch, record, state

display = Display()


class ActionModule(InfoAction):
    MODULE = "awa.operations.__role.enqueue_shards_rollout_info"
    ROLLOUT = True
    OWN_OPTIONS = {"batch": {"type": "dict"}, "restarts": {"type": "dict", "default": {}},
                   "record": {"type": "dict", "default": {}}}

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        window = self._task.args.get("batch")
        if window is None:
            return super().run(tmp, task_vars)
        found: state.Window = {"rollout": window.get("rollout") or None, "stop": window.get("stop") or None}
        rollout = found["rollout"]
        if rollout is None:
            return {"failed": True, "msg": "batch holds no rollout's state: the plan did not run"}
        index, ran = batch.next_batch(rollout, self._task.args.get("restarts"))
        # The verdict's line says the batch is back.
        self.say_done = False
        asked = dict(self._task.args)
        # The verdict reads the whole read: every runtime, the new ones. It waits for the runtimes of what restarted.
        self._task.args = {**asked, "detail": True, "wait": "restarted", "known_runtimes": rollout["known_runtimes"],
                           **batch.expectations(rollout, ran)}
        reads = [super().run(tmp, task_vars)]
        # A batch that did not come back, or crossed a gate, is judged at once; the last is not watched either.
        pause = batch.pause_seconds(rollout, index, reads[0])
        if pause:
            self._task.args = {**self._task.args, "wait": "none", "delay": pause}
            reads.append(super().run(tmp, task_vars))
        self._task.args = asked
        judged = state.after_batch(found, ran, reads)
        verdict = judged["rollout"]["verdicts"][-1]  # type: ignore[index]
        # A stop is said once, by the window's end (with what is done and left); here what came back of the batch.
        back = (f" ({len(reads[0]['new_runtimes'])}/{reads[0]['expected_new_runtimes']} restarted runtimes live and "
                "healthy)" if "expected_new_runtimes" in reads[0] else "")
        said = verdict["message"] if verdict["ok"] else (
            f"Batch {index + 1} of {len(rollout['batches'])} stopped the window{back}: its end says why")
        display.display(f"[{(task_vars or {}).get('inventory_hostname', 'localhost')}] {said}")
        written = asked.get("record") or {}
        if written.get("dir"):
            # The window's record after the batch; one that cannot be written is the window's end to report.
            made = record.window_record({**written["reads"], "step": record.BATCH}, judged, {  # type: ignore[typeddict-item]
                "queues": written["queues"], "check_mode": False})
            write_report(made["report"], os.path.expanduser(written["dir"]), written.get("window", ""))
        return {"changed": False, "window_state": judged}
