# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The command that backs a change out: the same playbook, the same options, the previous counts.

The previous count of each queue is the one its last recorded change
(the ledger, as the info module reports it) switched from, so a re-run that
changed nothing still backs out the change before it. The command line is
rebuilt from the options ansible-playbook was started with (inventory,
limit, extra variables, become, vault), each once, its paths made absolute
so it runs as printed from any directory: the queues with their previous
counts come last, as the one extra variable that sets them (an inline extra
variable of the run that set enqueue_shards_queues - an earlier back-out's -
leaves it out). A secret given in an inline extra variable (a password of
enqueue_shards_connection, a value of enqueue_shards_environment) is masked:
the operator gives it again. Only a run that changes the count prints a
command: another one's would not change it back.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleParserError
from ansible.parsing.utils.yaml import from_yaml

from ansible_collections.awa.operations.plugins.module_utils.db.options import connection_secrets
from ansible_collections.awa.operations.plugins.module_utils.masking import MASK, masked
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.environment_file import hidden_values, shown_variables

SWITCHES = (("become", "--become"), ("become_ask_pass", "--ask-become-pass"), ("ask_vault_pass", "--ask-vault-pass"))


def previous_counts(queues: list[dict[str, Any]], read: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The run's queue entries with the count before their last recorded change, and what cannot be backed out."""
    entries, problems = [], []
    for entry in queues:
        view = read.get("queues", {}).get(entry["queue"], {})
        before = sorted({change["from_shards"] for change in view.get("last_change", {}).values()})
        if not before:
            problems.append(f"{entry['queue']}: no change of its count is recorded, so there is nothing to back out")
            continue
        if len(before) > 1:
            problems.append(f"{entry['queue']}: its physical queues had different counts before ({before}); the "
                            f"command sets {before[-1]} on all of them")
        entries.append({key: value for key, value in {**entry, "shards": before[-1]}.items()
                        if key in ("queue", "shards", "stripes") and value not in (None, "")})
    return entries, problems


def _inline(value: str) -> dict[str, Any]:
    """The variables an inline extra variable sets, read as ansible-playbook reads it (YAML, JSON among it); none for
    a file (``@FILE``), ``key=value`` or what is no mapping."""
    try:
        given = from_yaml(value, show_content=False) if value.lstrip().startswith("{") else None
    except AnsibleParserError:
        given = None
    return given if isinstance(given, dict) else {}


def inline_secrets(text: str) -> list[str]:
    """The secrets an inline extra variable gives: the passwords of enqueue_shards_connection, the values of
    enqueue_shards_environment the diff hides."""
    given = _inline(text)
    connection, environment, show = (given.get(f"enqueue_shards_{name}")
                                     for name in ("connection", "environment", "env_file_show"))
    return [*(connection_secrets(connection) if isinstance(connection, dict) else []),
            *(hidden_values(environment, shown_variables(show if isinstance(show, list) else []))
              if isinstance(environment, dict) else [])]


def _absolute(path: str) -> str:
    """A path as this run's directory reads it, made absolute; a name that is no file here (a collection's playbook,
    an inventory host list) as it is."""
    return os.path.abspath(os.path.expanduser(path)) if os.path.exists(os.path.expanduser(path)) else path


def _extra(value: str) -> str | None:
    """An extra variable as the back-out gives it again: a file's path absolute; an inline one without
    enqueue_shards_queues (the back-out sets those) - none left when that was all it set."""
    if value.startswith("@"):
        return "@" + _absolute(value[1:])
    given = _inline(value)
    rest = {name: setting for name, setting in given.items() if name != "enqueue_shards_queues"}
    return value if rest == given else json.dumps(rest) if rest else None


# ansible-playbook options that say where and as whom a run works, as (CLI argument name, flag, each value as the
# command gives it again - a file's path absolute), in the order the command gives them.
OPTIONS = (("inventory", "-i", _absolute), ("extra_vars", "-e", _extra), ("vault_ids", "--vault-id", _absolute),
           ("vault_password_files", "--vault-password-file", _absolute), ("subset", "--limit", str),
           ("remote_user", "--user", str), ("private_key_file", "--private-key", _absolute),
           ("become_user", "--become-user", str))


def backout_command(queues: list[dict[str, Any]], read: Mapping[str, Any], cli_args: dict[str, Any] | None,
                    changes: bool = True) -> str:
    """What to run to put the previous counts back, as one sentence for a stop message (no secret of the run's
    inline extra variables). Without ``changes`` (the run does not change the count: the role's rollout or wait
    entry point) no command: the same one again would not change it back.

    The command is ansible-playbook with the run's own options and playbooks,
    each once and its paths absolute, then the previous counts as the last
    extra variable; the secrets of the run's inline extra variables masked (inline_secrets).
    """
    entries, problems = previous_counts(queues, read)
    if not entries:
        return "Nothing to back out: " + "; ".join(problems) + "."
    notes = (" (" + "; ".join(problems) + ")") if problems else ""
    if not changes or not cli_args or not cli_args.get("args"):
        return (f"To back out, run your change-window playbook again with enqueue_shards_queues: "
                f"{json.dumps(entries)}{notes}.")
    words = ["ansible-playbook"]
    for name, flag, again in OPTIONS:
        given = cli_args.get(name) or ()
        values = dict.fromkeys(again(str(value)) for value in ([given] if isinstance(given, str) else given))
        words += [word for value in values if value is not None for word in (flag, masked(value, inline_secrets(value)))]
    words += [flag for name, flag in SWITCHES if cli_args.get(name)]
    words += [_absolute(str(playbook)) for playbook in cli_args["args"]]
    words += ["-e", json.dumps({"enqueue_shards_queues": entries}, separators=(", ", ": "))]
    if any(inline_secrets(str(value)) for value in cli_args.get("extra_vars") or ()):
        notes += f" ({MASK} is a secret this run was given in an extra variable: give it again)"
    return f"To back out (the previous counts, the same options): {' '.join(map(shlex.quote, words))}{notes}"
