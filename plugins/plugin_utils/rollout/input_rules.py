# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role enqueue_shards's input rules: every problem with its variables, named at once.

meta/argument_specs.yml declares the variables - their names, types and
defaults, read from it here (``SPEC``) rather than typed a second time. This
checks their types as Ansible would, what a spec cannot express (ranges,
rules between variables, typos in variable names), and what Ansible's check
would refuse by printing the whole spec, one line of 18 KB: the keys of a
queue entry and of the connection, and the values of the variables with
choices (``KEYS``, ``CHOICES``), each misspelt one named with the one meant.
Queue entries, the connection, runtime roles, the lock timeout and the wait
bounds are checked with the modules' own rules, so the role and the modules
can never disagree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.yaml import yaml_load

from ansible_collections.awa.operations.plugins.module_utils.db.options import (
    CONNECTION_OPTIONS, DEFAULT_LOCK_TIMEOUT, connection_argument_spec, connection_secrets, libpq_params,
    validate_targets)
from ansible_collections.awa.operations.plugins.module_utils.wording import did_you_mean
from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
# The modes awa_producer_services takes: the role refuses before the change what the module would refuse after it.
from ansible_collections.awa.operations.plugins.module_utils.producer.managed_file import OCTAL_MODE
from ansible_collections.awa.operations.plugins.module_utils.masking import masked
from ansible_collections.awa.operations.plugins.module_utils.producer.commands import SERVICE_PLACEHOLDER
from ansible_collections.awa.operations.plugins.module_utils.producer.services import METHODS
from ansible_collections.awa.operations.plugins.module_utils.change.request import ENTRY_KEYS, validate_request
from ansible_collections.awa.operations.plugins.module_utils.info.options import DEFAULT_WAIT_SLEEP, validate_read_options
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.serial import batch_size_problem
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.summary import grouped
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.verdicts import max_fail_percentage_problem

PREFIX = "enqueue_shards_"
# plugins/plugin_utils/rollout/ -> the collection -> the role's spec, the one list of its variables, read once when
# the role's filters are loaded: every variable (the main entry point lists them all) with its declaration.
SPEC = Path(__file__).resolve().parents[3] / "roles" / "enqueue_shards" / "meta" / "argument_specs.yml"
ROLE_OPTIONS: dict[str, dict[str, Any]] = (
    yaml_load(SPEC.read_text(encoding="utf-8"))["argument_specs"]["main"]["options"])

# What each entry point validates: the queues and the database always, the rollout and the waits when they run; last,
# each scope's numbers that a module bounds, each with the info module's option whose rule checks it
# (validate_read_options' parameter).
SCOPES = {"queues": {"lock_timeout": "lock_timeout"}, "rollout": {"restart_timeout": "timeout", "wait_sleep": "sleep"},
          "wait": {"converge_timeout": "timeout", "drain_timeout": "timeout", "wait_sleep": "sleep"}}

ENVIRONMENT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# The keys the mapping variables take and the values of the variables with choices, which the spec leaves to this
# check (the variables' descriptions list them): the modules' own queue entries and connection options.
KEYS = {"queues": ENTRY_KEYS, "connection": tuple(CONNECTION_OPTIONS)}
CHOICES = {"pickup": ("restart", "refresh"), "restart_method": METHODS}


def _number(value: object) -> float | None:
    """A number given as a number or a numeric string (role variables are not converted); None otherwise."""
    try:
        return None if isinstance(value, bool) else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _within(low: float, high: float = float("inf"), whole: bool = False, null: bool = False) -> Callable[[Any], bool]:
    """A rule: a number from ``low`` to ``high`` (a whole one when ``whole``), or null when ``null``."""
    def valid(value: object) -> bool:
        number = _number(value)
        return (null and value is None) or number is not None and low <= number <= high and (
            not whole or number.is_integer())
    return valid


def _names(value: object) -> bool:
    """Whether ``value`` is a list of names (of services, of queues)."""
    return isinstance(value, list) and all(isinstance(name, str) and name.strip() for name in value)


def _runtime_count(count: object) -> bool:
    return isinstance(count, int) and not isinstance(count, bool) and count >= 0


# The variables that map this host's services to a value each: what they map to, whether a value is valid, what each
# service must be given.
PER_SERVICE: dict[str, tuple[str, Callable[[Any], bool], str]] = {
    "service_queues": ("the queues they enqueue into, e.g. {orders-worker: [orders]}", _names,
                       "a list of queue names (an empty list: it enqueues into none of them)"),
    "service_runtimes": ("how many Awa runtimes each runs, e.g. {api: 3, web: 0}", _runtime_count,
                         "a whole number of runtimes (0: it only enqueues, and is done once it started after the "
                         "change)")}

# The variables the role checks itself, each with its rule and what to give instead (formatted with the value given;
# a choice's with the one meant).
# A batch may be watched an hour before the next one: a canary soak longer than that is its own window.
PAUSE = "must be seconds between 0 and 3600, got {!r}"
GATE_LIMITS = ("max_deadlocks", "max_failed_jobs", "max_retried_jobs")
RULES: dict[str, tuple[Callable[[Any], object], str]] = {
    "ledger_schema": (lambda schema: isinstance(schema, str) and schema.strip(),
                      "must name a schema, e.g. awa_operations"),
    "batch_pause": (_within(0, 3600), PAUSE),
    "canary_pause": (_within(0, 3600, null=True), PAUSE + " (null: the same as enqueue_shards_batch_pause)"),
    **dict.fromkeys(GATE_LIMITS, (
        _within(0, whole=True, null=True), "must be a whole number of at least 0, or null for no limit, got {!r}")),
    "runtimes_per_service": (_within(1, whole=True), "must be a whole number of at least 1, got {!r}"),
    "env_file": (lambda path: not path or str(path).startswith("/"), "must be an absolute path, got {}"),
    "env_file_mode": (lambda mode: isinstance(mode, str) and OCTAL_MODE.match(mode),
                      'must be a quoted octal mode such as "0640", got {!r}'),
    "env_file_show": (lambda show: isinstance(show or [], list) and all(
        isinstance(name, str) and ENVIRONMENT_NAME.match(name) for name in show or []),
        "must be a list of variable names (letters, digits, _), got {!r}"),
    # Not the value itself: it may hold the file's secrets.
    "environment": (lambda environment: isinstance(environment or {}, dict),
                    "must be a dict of NAME: value, got a {.__class__.__name__}"),
    **{name: (choices.__contains__, f"must be one of {', '.join(choices)}, got {{!r}}")
       for name, choices in CHOICES.items()}}

# The variables host_settings carries to the steps that run once for every host (validate.yml's _enqueue_shards_host):
# the services and their runtimes, and those carried as text (CARRIED).
CARRIED = ("restart_method", "restart_command", "status_command", "runtime_hostname")
HOST_SETTINGS = ("services", *PER_SERVICE, "runtimes_per_service", *CARRIED)


def given_values(settings: dict[str, Any]) -> dict[str, Any]:
    """The variables given over the defaults the spec declares (those Ansible gives a role; defaults/main.yml holds
    the same), by their names without the prefix, as plain values: the argument validator deep-copies them, and a
    role variable's lazy containers would copy Ansible's templar."""
    defaults = {name: option["default"] for name, option in ROLE_OPTIONS.items() if "default" in option}
    plain: dict[str, Any] = json.loads(json.dumps({**defaults, **settings}, default=str))
    return {name.removeprefix(PREFIX): value for name, value in plain.items()}


def _integer(value: object) -> object:
    """An integral number as int (role variables may be strings or floats); anything else unchanged."""
    number = _number(value)
    return int(number) if number is not None and number.is_integer() else value


def _listing(problem: str, names: Iterable[object]) -> list[str]:
    """``problem: a, b`` for the names, sorted; nothing without a name."""
    listed = sorted(map(str, names))
    return [f"{problem}: {', '.join(listed)}"] if listed else []


def rule_problems(given: dict[str, Any], names: Iterable[str]) -> list[str]:
    """Each of ``names`` its rule (RULES) refuses, said with what to give instead (a misspelt choice with the one
    meant)."""
    return [f"{PREFIX}{name} {RULES[name][1].format(given[name])}"
            f"{did_you_mean(str(given[name]), CHOICES.get(name, ()), limit=1)}"
            for name in names if not RULES[name][0](given[name])]


def _refusals(check: Callable[..., object], *args: Any, **kwargs: Any) -> list[str]:
    """What a module's rule says when ``check`` refuses ``args`` and ``kwargs``: its message, or nothing."""
    try:
        check(*args, **kwargs)
    except InvalidRequest as exc:
        return [exc.message]
    return []


def bound_problems(given: dict[str, Any], bounds: dict[str, str]) -> list[str]:
    """Each number of ``bounds`` checked with its module's rule (the option it maps to), the message naming the
    role's variable; a value given that is no number is the type check's."""
    others = {"timeout": 0.0, "sleep": DEFAULT_WAIT_SLEEP, "lock_timeout": DEFAULT_LOCK_TIMEOUT}
    numbers = {name: -1 if given[name] is None else _number(given[name]) for name in bounds}
    return [f"{PREFIX}{name} {refusal.split(' ', 1)[1]}" for name, number in numbers.items() if number is not None
            for refusal in _refusals(validate_read_options, **{**others, bounds[name]: number})]


def spec_problems(spec: dict[str, Any], given: dict[str, Any], secrets: list[str]) -> list[str]:
    """Ansible's messages for the values of ``given`` (plain ones) that ``spec`` refuses, secrets masked, said alike
    on every core (before 2.19 a type is ``<class 'str'>``, and a sentence may end in two spaces)."""
    return [masked(re.sub(r"<class '(\w+)'>", r"\1", re.sub(r" {2,}", " ", message)), secrets)
            for message in ArgumentSpecValidator(spec).validate(given).error_messages]


def unknown_key_problems(where: str, given: dict[Any, Any], known: tuple[str, ...]) -> list[str]:
    """``where has no key shard (did you mean shards?)``: each key of a mapping variable it does not take."""
    return [f"{where} has no key {key}{did_you_mean(str(key), known, limit=1)}; it takes {', '.join(known)}"
            for key in given if key not in known]


def queue_problems(queues: object, runtime_roles: object) -> list[str]:
    """Each entry checked like awa_enqueue_shards checks it (an entry with a key it does not take: only that), then
    names given twice."""
    if not isinstance(queues, list) or not queues:
        return ["enqueue_shards_queues must name at least one queue, e.g. [{queue: orders, shards: 8}]"]
    problems: list[str] = []
    names: list[str] = []
    for index, entry in enumerate(queues):
        where = f"enqueue_shards_queues[{index}]"
        unknown = unknown_key_problems(where, entry, KEYS["queues"]) if isinstance(entry, dict) else []
        if unknown or not isinstance(entry, dict) or "queue" not in entry or "shards" not in entry:
            problems += unknown or [f"{where} needs queue and shards (stripes and new_queue are optional), got "
                                    f"{entry!r}"]
            continue
        refused = _refusals(validate_request, entry["queue"], _integer(entry["shards"]), _integer(entry.get("stripes")),
                            runtime_roles, new_queue=False if entry.get("new_queue") is None else entry["new_queue"])
        problems += [f"{where} ({entry['queue']!r}): {refusal}" for refusal in refused]
        names += [] if refused else [entry["queue"]]
    return problems + _listing("enqueue_shards_queues names a queue more than once",
                               {repr(name) for name in names if names.count(name) > 1})


def connection_problems(connection: object, secrets: list[str]) -> list[str]:
    """The connection checked with the modules' rules: its keys (a misspelt one named, and only that), the two it
    needs, their values (the modules' argument spec), the hosts and ports libpq pairs."""
    if not isinstance(connection, dict) or not connection:
        return ["enqueue_shards_connection is empty: give the connection options of Awa's migrator role "
                "(at least login_user and login_db, and login_host or login_unix_socket). Without them the "
                "modules would connect as postgres over the local socket, and lanes a superuser creates can "
                "only be fixed by a superuser"]
    unknown = unknown_key_problems("enqueue_shards_connection", connection, KEYS["connection"])
    missing = [name for name in ("login_user", "login_db") if not str(connection.get(name) or "").strip()]
    if unknown or missing:
        return unknown or [f"enqueue_shards_connection lacks {' and '.join(missing)}: name the role to connect as "
                           "(Awa's migrator, which owns the lane tables or is a member of their owner) and the "
                           "database holding the Awa schema"]
    # Once its values pass: the hosts and ports as given, and a target the change accepts (the database host's
    # environment is not known here: the modules check what comes from it when they connect). A host may quote a
    # password.
    problems = spec_problems(connection_argument_spec(), connection, secrets) or _refusals(
        lambda: validate_targets(libpq_params(connection, writes=True, environ={}), writes=True, environ={}))
    return [f"enqueue_shards_connection: {masked(problem, secrets)}" for problem in problems]


def rollout_problems(given: dict[str, Any]) -> list[str]:
    """The pickup, the batches (serial's forms), their pauses, the share of hosts that may be left out, the gates'
    limits, each service's runtimes, queues and commands, then the environment file (the numbers a module
    bounds: input_problems).

    Whether a host can restart at all (systemd, or a restart command) is known
    only once it answers: verdicts.reachability says it.
    """
    share = max_fail_percentage_problem(given["max_fail_percentage"])
    problems = [*rule_problems(given, ("pickup",)), *filter(None, [batch_size_problem(given["batch_size"])]),
                *rule_problems(given, ("batch_pause", "canary_pause")), *([share] if isinstance(share, str) else []),
                *rule_problems(given, [*GATE_LIMITS, "runtimes_per_service"])]
    services = given["services"] or []
    if not _names(services):
        problems.append(f"enqueue_shards_services must be a list of service names, got {services!r}")
    elif len(set(services)) != len(services):
        problems.append(f"enqueue_shards_services lists a service twice: {services}")
    elif given["pickup"] == "restart" and not services:
        problems.append("enqueue_shards_services is empty: name the producer services of this host, or use "
                        "enqueue_shards_pickup: refresh")
    for name, (maps_to, valid, each) in PER_SERVICE.items():
        declared = given[name] or {}
        if not isinstance(declared, dict):
            problems.append(f"{PREFIX}{name} must map services to {maps_to}, got {declared!r}")
            continue
        problems += _listing(f"{PREFIX}{name} names services that enqueue_shards_services does not list",
                             (service for service in declared if service not in services))
        problems += _listing(f"{PREFIX}{name} must give each service {each}",
                             (service for service, value in declared.items() if not valid(value)))
    if given["pickup"] == "restart":
        # The restart and status commands run once per service: with several services they must name {service}.
        problems += [f"{PREFIX}{name} runs once per service, so it must contain {{service}} when a host has more "
                     f"than one service: {command}" for name in ("restart_command", "status_command")
                     for command in [str(given[name] or "").strip()]
                     if command and SERVICE_PLACEHOLDER not in command and len(services) > 1]
        problems += rule_problems(given, ("restart_method",))
    # The environment file: (the values are plain: null, text, a number, a list or a dict.)
    problems += rule_problems(given, ("env_file", "env_file_mode", "env_file_show", "environment"))
    environment = given["environment"] if isinstance(given["environment"], dict) else {}
    return problems + _listing(
        "enqueue_shards_environment names must be variable names (letters, digits, _)",
        (name for name in environment if not ENVIRONMENT_NAME.match(name))) + _listing(
        "enqueue_shards_environment values must be strings or numbers (null leaves a default out)",
        (name for name, value in environment.items() if isinstance(value, (dict, list)))) + _listing(
        "enqueue_shards_environment values must be single lines",
        (name for name, value in environment.items() if isinstance(value, str) and set(value) & set("\n\r\0")))


def input_problems(settings: dict[str, Any], scope: list[str]) -> list[str]:
    """Every problem with the role's variables for the entry point's ``scope``, each saying what to do.

    ``settings`` maps variable names to values (every ``enqueue_shards_*``
    variable defined for the host). A value of another type than
    meta/argument_specs.yml declares is said in a line (spec_problems):
    Ansible's own check of the role's entry point says the same in a line of
    some 20,000 characters (its whole spec) - the change window's playbook
    leaves it to this one (rolespec_validate: false).
    """
    if not set(scope) <= set(SCOPES):
        raise ValueError(f"unknown validation scope {sorted(set(scope) - set(SCOPES))}; known: {SCOPES}")
    given = given_values(settings)
    connection = given.get("connection")
    secrets = connection_secrets(connection) if isinstance(connection, dict) else []
    problems = [f"{name} is not a variable of the role awa.operations.enqueue_shards"
                f"{did_you_mean(name, sorted(ROLE_OPTIONS), compared=lambda known: known[len(PREFIX):], limit=1)}: "
                "it would be ignored; `ansible-doc -t role awa.operations.enqueue_shards` lists them"
                for name in sorted(settings) if name.startswith(PREFIX) and name not in ROLE_OPTIONS]
    problems += [*queue_problems(given.get("queues"), given["runtime_roles"]),
                 *connection_problems(connection, secrets), *rule_problems(given, ("ledger_schema",)),
                 *(rollout_problems(given) if "rollout" in scope else []),
                 *bound_problems(given, {name: option for each in scope for name, option in SCOPES[each].items()})]
    # A variable of another type (its declared type and elements alone), unless a rule above said so in its own words.
    declared = {name: {key: option[key] for key in ("type", "elements") if key in option}
                for name, option in ROLE_OPTIONS.items()}
    named = set(re.findall(PREFIX + r"\w+", " ".join(problems)))
    typed = spec_problems(declared, {name: given.get(name.removeprefix(PREFIX)) for name in declared}, secrets)
    problems += [message for message in typed if not named & set(re.findall(PREFIX + r"\w+", message))]
    return list(dict.fromkeys(problems))


def host_settings(settings: dict[str, Any], host: str, scope: list[str]) -> dict[str, Any]:
    """What the rollout needs of one producer host's variables, and every problem with them.

    Computed on each host (its own variables, whatever their precedence), so
    the steps that run once for all hosts - the plan, each batch's restarts -
    read each host's services and restart contract from here.
    """
    given = given_values(settings)
    services = [str(name) for name in given["services"]] if isinstance(given["services"], list) else []
    maps = {name: given[name] if isinstance(given[name], dict) else {} for name in PER_SERVICE}
    # Each service's runtimes: its own (enqueue_shards_service_runtimes), else enqueue_shards_runtimes_per_service.
    runtimes = {name: maps["service_runtimes"].get(name, _integer(given["runtimes_per_service"])) for name in services}
    carried = {name: "" if given[name] is None else str(given[name]) for name in CARRIED}
    # The HOSTNAME its environment file gives the services' processes (none when the role writes no file).
    carried["runtime_hostname"] *= bool(given["env_file"])
    return {"host": host, "problems": input_problems(settings, scope), "services": services, **maps,
            "service_runtimes": {name: count for name, count in runtimes.items() if _runtime_count(count)}, **carried}


def input_verdict(hosts: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether every host's variables are valid; otherwise one message, hosts with the same problems together."""
    by_problems = grouped((tuple(host["problems"]), host["host"]) for host in hosts if host["problems"])
    return {"ok": not by_problems, "message": " || ".join(
        f"Invalid input for {', '.join(names)}, nothing was changed: {' | '.join(problems)}"
        for problems, names in by_problems.items()) or f"The variables of {len(hosts)} producer host(s) are valid."}


def producer_group_problem(groups: dict[str, Any], group: str) -> str:
    """Why the inventory group of the producer hosts would make the play do nothing; empty when it has hosts."""
    hosts = groups.get(group)
    others = sorted(name for name in groups if name not in ("all", "ungrouped"))
    return "" if hosts else (
        f"The inventory group {group} {'is empty' if hosts is not None else 'is not in the inventory'}, so the change "
        f"window would run on no producer host and change nothing: nothing was changed. Put the hosts that run the "
        f"producer services in {group}{did_you_mean(group, others, limit=1)}"
        + (f"; the inventory's groups: {', '.join(others)}" if others else "; the inventory has no groups") + ".")
