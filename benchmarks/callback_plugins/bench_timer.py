# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When each task of a playbook started and when each host finished it, as JSON, for the fleet benchmark.

Enabled by benchmarks/fleet.py only (``ANSIBLE_CALLBACK_PLUGINS`` points
here, ``ANSIBLE_CALLBACKS_ENABLED=bench_timer``); it writes the file named
by ``AWA_BENCH_TIMINGS`` when the playbook ends, failed or not. Every time
is ``time.time()`` in the ansible-playbook process, read when the strategy
reports the event (with the CPU seconds it and the processes it reaped
have used so far, at each task start): a task starts when the strategy announces it, a host's
part of it when the host is handed to a worker and ends when its result is
processed. benchmarks/fleet_timing.py turns the records into phases.

Each task start also reads the CPU seconds of ansible-playbook's own
process (``cpu_main``: the strategy, templating and results, which one core
runs however many forks there are) and, when ``AWA_BENCH_DB_PID`` names the
database server's postmaster, the server's (``db_cpu``,
benchmarks/server_cpu.py); the end of the playbook reads all three again.

Each host's part also lists its runs, ``[host it ran on, outcome, item]``:
the host a result was delegated to (per loop item, too), else the host
itself; the outcome ok, changed, skipped, failed or unreachable. A looped
task lists each item's run (a ``delegate_to: "{{ item.host }}"`` loop run
once lists every host it reached) and its final result adds none; any other
result is one run, its item null - but for a run of awa_producer_services
that restarted services, whose item is ``{"services": [...]}``, the services
it restarted. These are the task x host runs the benchmark counts.

Each play start is an entry of ``plays`` (its name, start and whether it
has ``serial``): a play with serial starts once per batch of hosts, so each
of its batches is an entry, and a task names the entry it ran in
(``play``, its index).
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import time
from pathlib import Path

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: bench_timer
    type: aggregate
    short_description: Task and host timings as JSON, for benchmarks/fleet.py
    description:
      - Writes every task's start, tags, action, file and loop iteration, and each host's start, end,
        status and runs (the host each ran on, delegation and loop items included), to the file named by
        the environment variable AWA_BENCH_TIMINGS.
    requirements:
      - enabled with ANSIBLE_CALLBACKS_ENABLED=bench_timer
"""


def _load_server_cpu():
    """benchmarks/server_cpu.py, loaded by its path: ansible-playbook does not import the benchmarks package."""
    spec = importlib.util.spec_from_file_location("bench_server_cpu",
                                                  Path(__file__).resolve().parents[1] / "server_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_SERVER_CPU = _load_server_cpu()


def _cpu_seconds() -> float:
    """CPU time of ansible-playbook and of every process it has reaped: its forks, their SSH clients and modules."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def _main_cpu_seconds() -> float:
    """CPU time of ansible-playbook's own process: the strategy, not its forks."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _db_cpu_seconds() -> float | None:
    """CPU time of the database server named by AWA_BENCH_DB_PID so far; None without it."""
    pid = os.environ.get("AWA_BENCH_DB_PID")
    return _SERVER_CPU.tree_cpu_seconds(int(pid)) if pid else None


def _readings() -> dict:
    """The CPU counters read at each task start and at the end."""
    return {"cpu": _cpu_seconds(), "cpu_main": _main_cpu_seconds(), "db_cpu": _db_cpu_seconds()}


def _ran_on(result) -> str:
    """The host a result ran on: the one it was delegated to, else its own.

    A skipped result carries no delegated vars, but its task's ``delegate_to``
    was rendered by the worker (the final result of a loop keeps the template:
    its items say where they ran)."""
    delegated = (result.result.get("_ansible_delegated_vars") or {}).get("ansible_delegated_host")
    target = delegated or result.task.delegate_to
    return str(target) if target and "{{" not in str(target) else result.host.get_name()


def _run(result, status: str, item: bool) -> list:
    """[host the result ran on, outcome, the loop item - or the services a run restarted - or None]."""
    if status == "ok" and result.result.get("changed"):
        status = "changed"
    elif status in ("failed", "ignored"):
        status = "unreachable" if result.result.get("unreachable") else "failed"
    restarted = result.result.get("restarted")
    recorded = result.result.get("item") if item else {"services": restarted} if restarted else None
    return [_ran_on(result), status, json.loads(json.dumps(recorded, default=str))]


def _loop_iteration(task) -> dict | None:
    """The nearest looped include this task was loaded by, and which iteration (index var, else item)."""
    parent = task._parent  # pylint: disable=protected-access
    while parent is not None:
        if getattr(parent, "loop", None) and isinstance(getattr(parent, "vars", None), dict):
            control = getattr(parent, "loop_control", None)
            name_of = [getattr(control, "index_var", None), getattr(control, "loop_var", None) or "item"]
            value = next((parent.vars[name] for name in name_of if name and name in parent.vars), None)
            return {"include": parent.get_name(), "iteration": json.dumps(value, sort_keys=True, default=str)}
        parent = parent._parent  # pylint: disable=protected-access
    return None


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._record: dict = {"started": time.time(), "cpu_started": _cpu_seconds(), "plays": [], "tasks": []}
        self._open: dict[str, dict] = {}

    def v2_playbook_on_play_start(self, play) -> None:
        # A play with serial starts once per batch of hosts: each start is an entry of its own, marked serial.
        self._record["plays"].append({"name": play.get_name(), "start": time.time(), "serial": bool(play.serial)})

    def _task_start(self, task, handler: bool = False) -> None:
        entry = {
            "name": task.get_name(), "action": task.action, "tags": sorted(map(str, task.tags or [])),
            "path": task.get_path() or "", "play": len(self._record["plays"]) - 1, "handler": handler,
            "run_once": bool(task.run_once), "delegated": bool(task.delegate_to), "loop": _loop_iteration(task),
            "wait": task.args.get("wait") if isinstance(task.args.get("wait"), str) else None,
            "start": time.time(), **_readings(), "hosts": {}, "retries": 0,
        }
        self._record["tasks"].append(entry)
        self._open[task._uuid] = entry  # pylint: disable=protected-access

    def v2_playbook_on_task_start(self, task, is_conditional) -> None:
        self._task_start(task)

    def v2_playbook_on_handler_task_start(self, task) -> None:
        self._task_start(task, handler=True)

    def _entry(self, task) -> dict | None:
        return self._open.get(task._uuid)  # pylint: disable=protected-access

    def v2_runner_on_start(self, host, task) -> None:
        entry = self._entry(task)
        if entry is not None:
            entry["hosts"][host.get_name()] = {"start": time.time()}

    def _host(self, result) -> dict | None:
        entry = self._entry(result.task)
        return None if entry is None else entry["hosts"].setdefault(result.host.get_name(), {})

    def _host_end(self, result, status: str) -> None:
        host = self._host(result)
        if host is None:
            return
        host.update(end=time.time(), status=status)
        if not host.get("looped"):
            host.setdefault("runs", []).append(_run(result, status, item=False))

    def _item_end(self, result, status: str) -> None:
        host = self._host(result)
        if host is None:
            return
        host["looped"] = True
        if status == "ok":
            host.setdefault("items", []).append(str(result.result.get("item")))
        host.setdefault("runs", []).append(_run(result, status, item=True))

    def v2_runner_on_ok(self, result) -> None:
        self._host_end(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        self._host_end(result, "ignored" if ignore_errors else "failed")

    def v2_runner_on_skipped(self, result) -> None:
        self._host_end(result, "skipped")

    def v2_runner_on_unreachable(self, result) -> None:
        self._host_end(result, "unreachable")

    def v2_runner_item_on_ok(self, result) -> None:
        self._item_end(result, "ok")

    def v2_runner_item_on_failed(self, result) -> None:
        self._item_end(result, "failed")

    def v2_runner_item_on_skipped(self, result) -> None:
        self._item_end(result, "skipped")

    def v2_runner_retry(self, result) -> None:
        entry = self._entry(result.task)
        if entry is not None:
            entry["retries"] += 1

    def v2_playbook_on_stats(self, stats) -> None:
        self._record["ended"] = time.time()
        self._record.update({f"{name}_ended": value for name, value in _readings().items()})
        path = os.environ.get("AWA_BENCH_TIMINGS")
        if path:
            with open(path, "w", encoding="utf-8") as output:
                json.dump(self._record, output, indent=1)
