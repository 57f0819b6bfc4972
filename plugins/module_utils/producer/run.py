# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run of awa_producer_services on a producer host: the environment file, the restarts, the read, the result.

The module file only builds the module and checks the Python it runs on (it
must parse on Pythons older than this package needs, to refuse them); the
run is here.
"""

from __future__ import annotations

import functools
import socket
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.producer.environment_diff import environment_diff
from ansible_collections.awa.operations.plugins.module_utils.producer.managed_file import ensure_file
from ansible_collections.awa.operations.plugins.module_utils.producer.services import operate


def run(module: Any) -> None:
    """Write the environment file (when asked), restart, read the services, and exit or fail with the result."""
    params = module.params
    unknown = [service for service in params["restart"] if service not in params["services"]]
    if unknown:
        module.fail_json(msg=f"restart names {', '.join(unknown)}, which services does not list: every service to "
                             "restart must be one of services")
    written: dict[str, Any] = {}
    if params["env_file"]:
        wanted = params["env_file"]
        outcome, diff = ensure_file(module, wanted["path"], wanted["content"], owner=wanted["owner"],
                                    group=wanted["group"], mode=wanted["mode"],
                                    show_change=functools.partial(environment_diff, shown=wanted["show"]))
        if "error" in outcome:
            module.fail_json(msg=f"The environment file {outcome['error']}. Nothing was restarted.", env_file=outcome)
        written = {"env_file": outcome, **({"diff": diff} if diff and module._diff else {})}
    # A program that cannot run raises OSError, which operate turns into words: never run_command's bare
    # "Error executing command.".
    found = operate(functools.partial(module.run_command, handle_exceptions=False), params["services"],
                    params["restart"], method=params["method"], restart_command=params["restart_command"],
                    status_command=params["status_command"], check_mode=module.check_mode,
                    hostname=socket.gethostname())
    result = found.result()
    if module.check_mode and not found.problems:
        result["restarted"] = list(params["restart"])
    result.update(written)
    result["changed"] = bool(result["restarted"]) or bool(written and written["env_file"]["changed"])
    failure = found.restart_failure(params["restart"], module.check_mode)
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(**result)
