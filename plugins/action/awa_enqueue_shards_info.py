# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of awa_enqueue_shards_info: waits from the controller, with progress.

A module cannot print while it runs, so when ``wait`` is set this plugin polls
by running the module with ``wait: none``, prints one progress line per poll
(its seconds against ``wait_timeout``, and a drain's time left at the rate
its depth falls: info/wait.py's poll_line), and waits with the module's own
wait (info/wait.py's poll_until): the same predicates, deadline, result keys,
reconnection warnings and messages.
A poll that fails (a lock not granted within ``lock_timeout``, for one) ends
the wait with the module's result as is, as the module's own wait would -
except a poll that could not reach the database or lost its connection
(``disconnected``, a failover) after an earlier poll succeeded: that one is
tried again, as in the module's own wait (info/wait.py's FAILOVER_DELAYS).

Without ``wait`` the module runs once, as is. Under ``async`` it runs once too,
wrapped by Ansible's async_wrapper as ansible.builtin's ``normal`` action does
it, and waits itself: a detached job cannot print, and its job id (``poll:
0``) or its result (``poll`` above 0) is what Ansible's async machinery expects.

The options are checked with the module's own argument spec and rules, and
their values as the module checks them (info/options.py's validated). The
role's internal read (plugins/action/__role/enqueue_shards_rollout_info.py) is
this plugin for its module, with the rollout's options (info/options.py).
"""

from __future__ import annotations

import math
import time
from typing import Any, cast

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.awa.operations.plugins.module_utils.errors import FailedWithState, InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.info.drain_time import DrainHistory
from ansible_collections.awa.operations.plugins.module_utils.info.options import ARGUMENT_RULES, argument_spec, validated
from ansible_collections.awa.operations.plugins.module_utils.info.result import PolledRead
from ansible_collections.awa.operations.plugins.module_utils.info import wait
from ansible_collections.awa.operations.plugins.module_utils.info.views import shown

display = Display()


def validate_async_limit(async_seconds: int, wait: str, wait_timeout: float, delay: float = 0) -> None:
    """Under async, Ansible ends the job after ``async`` seconds: a delay and a wait must reach their ends first."""
    waits = {"delay": delay, "wait_timeout": 0 if wait == "none" else wait_timeout}
    given = {name: seconds for name, seconds in waits.items() if seconds}
    waited = sum(given.values())
    if not async_seconds or not waited or async_seconds > waited:
        return
    names = " and ".join(given)
    both = len(given) > 1
    raise InvalidRequest(
        f"async ({async_seconds}s) would end the job before "
        + (f"{names} together ({delay:g}s + {wait_timeout:g}s)" if both else f"{names} ({waited:g}s)")
        + ", and Ansible would stop the wait without naming what it waited for: give async more seconds than "
        f"{'both together' if both else names} (for example async: {math.ceil(waited) + 60}) or a shorter "
        + " or ".join(given))


class ActionModule(ActionBase):
    # The module each poll runs, whether it takes the rollout's options (the role's internal read does), and the
    # options this plugin takes for itself, not handed on to the module.
    MODULE = "awa.operations.awa_enqueue_shards_info"
    ROLLOUT = False
    OWN_OPTIONS: dict[str, dict[str, Any]] = {}
    # Whether the poll that ends the wait says so (a caller that says the outcome in its own words does not).
    say_done = True
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = True
    # The wait's clock and sleep (replaced in unit tests, which must not sleep).
    clock = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        given = self.validate_argument_spec(
            argument_spec={**argument_spec(rollout=self.ROLLOUT), **self.OWN_OPTIONS}, **ARGUMENT_RULES)[1]
        wrap_async = self._task.async_val
        try:
            args = validated(given)
            validate_async_limit(wrap_async, args["wait"], args["wait_timeout"], args["delay"])
        except InvalidRequest as exc:
            return dict(result, failed=True, msg=exc.message)
        host = task_vars.get("inventory_hostname", "localhost") if task_vars else "localhost"
        if args["delay"] and not wrap_async:
            # Waited out here, so the module runs without it and the operator sees why nothing moves.
            display.display(f"[{host}] waiting {args['delay']:g}s before the first read")
            self.sleep(args["delay"])
        if args["wait"] == "none" or wrap_async:
            # A copy: _execute_module adds Ansible's _ansible_* arguments to the dict it is given, and the task's
            # own would then carry them into the next try of an until loop, where validation refuses them.
            module_args = self.module_args(keep_delay=bool(wrap_async))
            result.update(self._execute_module(module_name=self.MODULE, module_args=module_args,
                                               task_vars=task_vars, wrap_async=wrap_async))
            if not wrap_async:
                # Under async the wrapper removes its own copy; otherwise the temporary path is ours to remove.
                self._remove_tmp_path(self._connection._shell.tmpdir)
            return result

        # Every poll returns the whole read, which the wait judges (a drain compares each lane's enqueue cursor across
        # polls); the wait's result is shown as the task asks (views.shown).
        poll_args = dict(self.module_args(), wait="none", detail=True)

        # Only once a poll has reached the database is a lost connection (a module run that says disconnected) a
        # failover worth reconnecting through: a first poll that cannot reach it has a wrong address or a server down
        # before the wait began, and the operator hears it at once, not after every reconnection attempt.
        answered = False

        # Each poll is the module's result with wait: none, as info/result.py declares it; a failed one ends the wait
        # with that result as is, as the module's own wait would.
        def fetch() -> PolledRead:
            nonlocal answered
            polled = self._execute_module(module_name=self.MODULE, module_args=dict(poll_args), task_vars=task_vars)
            if polled.get("failed"):
                raise FailedWithState(polled.get("msg", "poll failed"), polled)
            answered = True
            return cast(PolledRead, polled)

        # A drain says how long it has left at the rate its depth falls.
        drain = DrainHistory() if args["wait"] == "drained" else None

        def on_poll(info: PolledRead, elapsed: float) -> None:
            if drain is not None:
                drain.add(info, elapsed)
            if self.say_done or not wait.PREDICATES[args["wait"]](info):
                display.display(f"[{host}] {wait.poll_line(info, args['wait'], elapsed, args['wait_timeout'], drain)}")

        def on_attempt(error: str, attempt: int, delay: float) -> None:
            display.display(f"[{host}] connection lost ({error}): reconnecting in {delay:.0f}s, attempt {attempt} of "
                            f"{len(wait.FAILOVER_DELAYS)}")

        try:
            return dict(result, **shown(wait.poll_until(
                fetch, args["wait"], args["wait_timeout"], args["wait_sleep"], on_poll=on_poll, on_attempt=on_attempt,
                lost=lambda exc: answered and isinstance(exc, FailedWithState) and bool(exc.result.get("disconnected")),
                clock=self.clock, pause=self.sleep), detail=args["detail"]))
        except FailedWithState as exc:
            # A failed poll's result as is; a wait that failed, with its last poll's result, which says failed: false
            # (it read fine).
            return dict(result, **shown({**exc.result, "failed": True, "msg": exc.message}, detail=args["detail"]))

    def module_args(self, keep_delay: bool = False) -> dict[str, Any]:
        """The task's arguments for a module run: without this plugin's own, and without the delay once it was waited
        out here (the module's default is none)."""
        dropped = set(self.OWN_OPTIONS) | (set() if keep_delay else {"delay"})
        return {name: value for name, value in self._task.args.items() if name not in dropped}
