# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role enqueue_shards's input rules: every problem with its variables, named at once.

meta/argument_specs.yml declares the variables - their names, types and
defaults, read from it (role_spec). This checks their types as Ansible
would, what a spec cannot express (ranges, rules between variables, typos in
variable names), and what Ansible's check would refuse by printing the whole
spec, one line of 18 KB: the keys of a queue entry and of the connection,
and the values of the variables with choices (``KEYS``, ``CHOICES``), each
misspelt one named with the one meant. Queue entries, the connection,
runtime roles, the lock timeout and the wait bounds are checked with the
modules' own rules, so the role and the modules can never disagree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.awa.operations.plugins.module_utils.db.options import (
    CONNECTION_OPTIONS,
    DEFAULT_LOCK_TIMEOUT,
    connection_argument_spec,
    connection_secrets,
    libpq_params,
    validate_lock_timeout,
    validate_targets,
)
from ansible_collections.awa.operations.plugins.module_utils.wording import did_you_mean
from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
# The modes awa_producer_services takes: the role refuses before the change what the module would refuse after it.
from ansible_collections.awa.operations.plugins.module_utils.producer.managed_file import OCTAL_MODE
from ansible_collections.awa.operations.plugins.module_utils.masking import masked
from ansible_collections.awa.operations.plugins.module_utils.producer.commands import SERVICE_PLACEHOLDER
from ansible_collections.awa.operations.plugins.module_utils.producer.services import METHODS
from ansible_collections.awa.operations.plugins.module_utils.change.request import ENTRY_KEYS, validate_request
from ansible_collections.awa.operations.plugins.module_utils.info.options import DEFAULT_WAIT_SLEEP, validate_read_options
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import role_spec
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.serial import batch_size_problem
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.verdicts import max_fail_percentage_problem

PREFIX = "enqueue_shards_"

# Seconds a batch may be watched before the next one (an hour: a canary soak longer than that is its own window).
MAX_PAUSE = 3600
GATE_LIMITS = ("max_deadlocks", "max_failed_jobs", "max_retried_jobs")

# What each entry point validates: the queues and the database always, the rollout and the waits when they run.
SCOPES = ("queues", "rollout", "wait")

ENVIRONMENT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# The keys the mapping variables take and the values of the variables with choices, which the spec leaves to this
# check (the variables' descriptions list them): the modules' own queue entries and connection options.
KEYS = {"queues": ENTRY_KEYS, "connection": tuple(CONNECTION_OPTIONS)}
PICKUPS = ("restart", "refresh")
CHOICES = {"pickup": PICKUPS, "restart_method": METHODS}


def _number(value: object) -> float | None:
    """A number given as a number or a numeric string (role variables are not converted); None otherwise."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _number_or_typed(settings: dict[str, Any], name: str) -> bool:
    """Whether a number's range is this rule's to check: a value given that is no number is type_problems'."""
    value = settings.get(PREFIX + name)
    return value is None or _number(value) is not None


def _checked(rule: Callable[[], object]) -> list[str]:
    """The message of the rule's InvalidRequest, if it raises one."""
    try:
        rule()
    except InvalidRequest as exc:
        return [exc.message]
    return []


def unknown_variable_problems(settings: dict[str, Any]) -> list[str]:
    known = role_spec.known_variables()
    unknown = sorted(name for name in settings if name.startswith(PREFIX) and name not in known)
    return [f"{name} is not a variable of the role awa.operations.enqueue_shards"
            f"{did_you_mean(name, sorted(known), compared=lambda known: known[len(PREFIX):], limit=1)}: it "
            "would be ignored; `ansible-doc -t role awa.operations.enqueue_shards` lists them" for name in unknown]


def type_problems(settings: dict[str, Any]) -> list[str]:
    """Each variable whose value is not of the type meta/argument_specs.yml declares, in a line: Ansible's own check
    of the role's entry point says the same in a line of some 20,000 characters (its whole spec) - the change
    window's playbook leaves it to this one (rolespec_validate: false)."""
    declared = {name: {key: option[key] for key in ("type", "elements") if key in option}
                for name, option in role_spec.options().items()}
    # Plain values: the validator deep-copies them, and a role variable's lazy containers would copy Ansible's templar.
    given = json.loads(json.dumps({name: value for name, value in settings.items() if name in declared}, default=str))
    connection = given.get(PREFIX + "connection")
    secrets = connection_secrets(connection) if isinstance(connection, dict) else []
    return spec_problems(declared, given, secrets)


def spec_problems(spec: dict[str, Any], given: dict[str, Any], secrets: list[str]) -> list[str]:
    """Ansible's messages for the values of ``given`` that ``spec`` refuses, secrets masked, said alike on every
    core (before 2.19 a type is ``<class 'str'>``, and a sentence may end in two spaces)."""
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
        if unknown:
            problems += unknown
            continue
        if not isinstance(entry, dict) or "queue" not in entry or "shards" not in entry:
            problems.append(f"{where} needs queue and shards (stripes and new_queue are optional), got {entry!r}")
            continue
        try:
            validate_request(entry["queue"], _integer(entry["shards"]), _integer(entry.get("stripes")),
                             runtime_roles or (), new_queue=False if entry.get("new_queue") is None else entry["new_queue"])
        except InvalidRequest as exc:
            problems.append(f"{where} ({entry['queue']!r}): {exc.message}")
            continue
        names.append(entry["queue"])
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        problems.append(f"enqueue_shards_queues names a queue more than once: {', '.join(map(repr, repeated))}")
    return problems


def _integer(value: object) -> object:
    """An integral number as int (role variables may be strings or floats); anything else unchanged."""
    number = _number(value)
    if number is not None and number.is_integer():
        return int(number)
    return value


def connection_problems(connection: object) -> list[str]:
    """The connection checked with the modules' rules: its keys (a misspelt one named, and only that), the two it
    needs, their values (the modules' argument spec), the hosts and ports libpq pairs."""
    if isinstance(connection, dict) and connection:
        unknown = unknown_key_problems("enqueue_shards_connection", connection, KEYS["connection"])
        if unknown:
            return unknown
    if not isinstance(connection, dict) or not connection:
        return ["enqueue_shards_connection is empty: give the connection options of Awa's migrator role "
                "(at least login_user and login_db, and login_host or login_unix_socket). Without them the "
                "modules would connect as postgres over the local socket, and lanes a superuser creates can "
                "only be fixed by a superuser"]
    missing = [name for name in ("login_user", "login_db") if not str(connection.get(name) or "").strip()]
    if missing:
        return [f"enqueue_shards_connection lacks {' and '.join(missing)}: name the role to connect as (Awa's "
                "migrator, which owns the lane tables or is a member of their owner) and the database holding "
                "the Awa schema"]
    secrets = connection_secrets(connection)
    # Plain values, as type_problems reads them.
    plain = json.loads(json.dumps(connection, default=str))
    values = spec_problems(connection_argument_spec(), plain, secrets)
    if values:
        return [f"enqueue_shards_connection: {message}" for message in values]
    # The hosts and ports as given, and a target the change accepts (the database host's environment is not
    # known here: the modules check what comes from it when they connect). A host may quote a password.
    return ["enqueue_shards_connection: " + masked(message, secrets)
            for message in _checked(lambda: validate_targets(libpq_params(connection, writes=True, environ={}),
                                                             writes=True, environ={}))]


def database_problems(settings: dict[str, Any]) -> list[str]:
    problems = connection_problems(settings.get(PREFIX + "connection"))
    lock_timeout = _number(settings.get(PREFIX + "lock_timeout"))
    if _number_or_typed(settings, "lock_timeout"):
        problems += _checked(lambda: validate_lock_timeout(lock_timeout if lock_timeout is not None else -1))
    schema = settings.get(PREFIX + "ledger_schema")
    if not isinstance(schema, str) or not schema.strip():
        problems.append("enqueue_shards_ledger_schema must name a schema, e.g. awa_operations")
    return [problem.replace("lock_timeout", PREFIX + "lock_timeout", 1) if problem.startswith("lock_timeout")
            else problem for problem in problems]


def _services_problems(settings: dict[str, Any], restarts: bool) -> list[str]:
    services = settings.get(PREFIX + "services") or []
    problems = []
    if not isinstance(services, list) or not all(isinstance(name, str) and name.strip() for name in services):
        return [f"enqueue_shards_services must be a list of service names, got {services!r}"]
    if len(set(services)) != len(services):
        problems.append(f"enqueue_shards_services lists a service twice: {services}")
    if restarts and not services:
        problems.append("enqueue_shards_services is empty: name the producer services of this host, or use "
                        "enqueue_shards_pickup: refresh")
    return problems


def _command_problems(settings: dict[str, Any]) -> list[str]:
    """The restart and status commands run once per service: with several services they must name {service}.

    Whether a host can restart at all (systemd, or a restart command) is known
    only once it answers: verdicts.reachability says it.
    """
    services = settings.get(PREFIX + "services") or []
    problems = []
    for name in ("restart_command", "status_command"):
        command = str(settings.get(PREFIX + name) or "").strip()
        if command and SERVICE_PLACEHOLDER not in command and len(services) > 1:
            problems.append(f"enqueue_shards_{name} runs once per service, so it must contain {{service}} when a "
                            f"host has more than one service: {command}")
    return problems + choice_problems(settings, ("restart_method",))


def choice_problems(settings: dict[str, Any], names: tuple[str, ...]) -> list[str]:
    """Each of the variables ``names`` (without the prefix) that is not one of its CHOICES, with the one meant."""
    problems = []
    for name in names:
        value, choices = settings.get(PREFIX + name), CHOICES[name]
        if value not in choices:
            problems.append(f"enqueue_shards_{name} must be one of {', '.join(choices)}, got {value!r}"
                            f"{did_you_mean(str(value), choices, limit=1)}")
    return problems


def _per_service_problems(settings: dict[str, Any], name: str, maps_to: str, valid: Callable[[Any], bool],
                          each: str) -> list[str]:
    """A variable that maps this host's services to a value each (service_queues, service_runtimes): a mapping, of
    services enqueue_shards_services lists, each value ``valid``."""
    variable = PREFIX + name
    declared = settings.get(variable) or {}
    if not isinstance(declared, dict):
        return [f"{variable} must map services to {maps_to}, got {declared!r}"]
    services = settings.get(PREFIX + "services") or []
    unknown = sorted(str(service) for service in declared if service not in services)
    wrong = sorted(str(service) for service, value in declared.items() if not valid(value))
    return ([f"{variable} names services that enqueue_shards_services does not list: {', '.join(unknown)}"]
            if unknown else []) + ([f"{variable} must give each service {each}: {', '.join(wrong)}"] if wrong else [])


def _service_declarations_problems(settings: dict[str, Any]) -> list[str]:
    """The queues each service declares it enqueues into, and the runtimes it runs (0: it only enqueues)."""
    return _per_service_problems(
        settings, "service_queues", "the queues they enqueue into, e.g. {orders-worker: [orders]}",
        lambda queues: isinstance(queues, list) and all(isinstance(q, str) and q.strip() for q in queues),
        "a list of queue names (an empty list: it enqueues into none of them)") + _per_service_problems(
        settings, "service_runtimes", "how many Awa runtimes each runs, e.g. {api: 3, web: 0}",
        lambda count: isinstance(count, int) and not isinstance(count, bool) and count >= 0,
        "a whole number of runtimes (0: it only enqueues, and is done once it started after the change)")


def _environment_file_problems(settings: dict[str, Any]) -> list[str]:
    problems = []
    path = str(settings.get(PREFIX + "env_file") or "")
    if path and not path.startswith("/"):
        problems.append(f"enqueue_shards_env_file must be an absolute path, got {path}")
    mode = settings.get(PREFIX + "env_file_mode")
    if not isinstance(mode, str) or not OCTAL_MODE.match(mode):
        problems.append(f'enqueue_shards_env_file_mode must be a quoted octal mode such as "0640", got {mode!r}')
    show = settings.get(PREFIX + "env_file_show") or []
    if not isinstance(show, list) or not all(isinstance(name, str) and ENVIRONMENT_NAME.match(name) for name in show):
        problems.append(f"enqueue_shards_env_file_show must be a list of variable names (letters, digits, _), got "
                        f"{show!r}")
    environment = settings.get(PREFIX + "environment") or {}
    if not isinstance(environment, dict):
        # Not the value itself: it may hold the file's secrets.
        return problems + [f"enqueue_shards_environment must be a dict of NAME: value, got a "
                           f"{type(environment).__name__}"]
    bad_names = sorted(str(name) for name in environment if not ENVIRONMENT_NAME.match(str(name)))
    if bad_names:
        problems.append(f"enqueue_shards_environment names must be variable names (letters, digits, _): "
                        f"{', '.join(bad_names)}")
    not_scalar = sorted(str(name) for name, value in environment.items()
                        if value is not None and not isinstance(value, (str, int, float, bool)))
    if not_scalar:
        problems.append(f"enqueue_shards_environment values must be strings or numbers (null leaves a default "
                        f"out): {', '.join(not_scalar)}")
    multi_line = sorted(str(name) for name, value in environment.items() if isinstance(value, str)
                        and ("\n" in value or "\r" in value or "\0" in value))
    if multi_line:
        problems.append(f"enqueue_shards_environment values must be single lines: {', '.join(multi_line)}")
    return problems


def batch_problems(settings: dict[str, Any]) -> list[str]:
    """Batch size (serial's forms), pauses, the share of hosts that may be left out, and the gates' limits."""
    problems = [problem for problem in [batch_size_problem(settings.get(PREFIX + "batch_size"))] if problem]
    for name in ("batch_pause", "canary_pause"):
        value = settings.get(PREFIX + name)
        seconds = _number(value)
        if value is None and name == "canary_pause":
            continue
        if seconds is None or not 0 <= seconds <= MAX_PAUSE:
            problems.append(f"enqueue_shards_{name} must be seconds between 0 and {MAX_PAUSE}, got {value!r}"
                            + (" (null: the same as enqueue_shards_batch_pause)" if name == "canary_pause" else ""))
    share = max_fail_percentage_problem(settings.get(PREFIX + "max_fail_percentage"))
    if isinstance(share, str):
        problems.append(share)
    for name in GATE_LIMITS:
        value = settings.get(PREFIX + name)
        limit = _number(value)
        if value is not None and (limit is None or limit < 0 or not limit.is_integer()):
            problems.append(f"enqueue_shards_{name} must be a whole number of at least 0, or null for no limit, "
                            f"got {value!r}")
    return problems


def producer_group_problem(groups: dict[str, Any], group: str) -> str:
    """Why the inventory group of the producer hosts would make the play do nothing; empty when it has hosts."""
    hosts = groups.get(group)
    if hosts:
        return ""
    others = sorted(name for name in groups if name not in ("all", "ungrouped"))
    reason = "is empty" if hosts is not None else "is not in the inventory"
    return (f"The inventory group {group} {reason}, so the change window would run on no producer host and change "
            f"nothing: nothing was changed. Put the hosts that run the producer services in {group}"
            + did_you_mean(group, others, limit=1)
            + (f"; the inventory's groups: {', '.join(others)}" if others else "; the inventory has no groups") + ".")


def rollout_problems(settings: dict[str, Any]) -> list[str]:
    restarts = settings.get(PREFIX + "pickup") == "restart"
    problems = choice_problems(settings, ("pickup",)) + batch_problems(settings)
    value = _number(settings.get(PREFIX + "runtimes_per_service"))
    if value is None or value < 1 or not value.is_integer():
        problems.append("enqueue_shards_runtimes_per_service must be a whole number of at least 1, got "
                        f"{settings.get(PREFIX + 'runtimes_per_service')!r}")
    problems += _services_problems(settings, restarts)
    problems += _service_declarations_problems(settings)
    if restarts:
        problems += _command_problems(settings)
    problems += _environment_file_problems(settings)
    problems += _wait_problems(settings, ("restart_timeout",))
    return problems


def _wait_problems(settings: dict[str, Any], timeouts: tuple[str, ...]) -> list[str]:
    """The info module's own wait bounds, for each timeout the entry point uses."""
    sleep = _number(settings.get(PREFIX + "wait_sleep"))
    problems = []
    for name in [name for name in timeouts if _number_or_typed(settings, name)]:
        timeout = _number(settings.get(PREFIX + name))
        for message in _checked(lambda: validate_read_options(-1 if timeout is None else timeout, DEFAULT_WAIT_SLEEP,
                                                              DEFAULT_LOCK_TIMEOUT)):
            problems.append(message.replace("wait_timeout", PREFIX + name, 1))
    if _number_or_typed(settings, "wait_sleep"):
        problems += [message.replace("wait_sleep", PREFIX + "wait_sleep", 1) for message in _checked(
            lambda: validate_read_options(0, -1 if sleep is None else sleep, DEFAULT_LOCK_TIMEOUT))]
    return problems


def with_defaults(settings: dict[str, Any]) -> dict[str, Any]:
    """The variables given, over the defaults meta/argument_specs.yml declares (those Ansible gives a role)."""
    return {**role_spec.defaults(), **settings}


def input_problems(settings: dict[str, Any], scope: list[str]) -> list[str]:
    """Every problem with the role's variables for the entry point's ``scope``, each saying what to do.

    ``settings`` maps variable names to values (every ``enqueue_shards_*``
    variable defined for the host).
    """
    unknown_scopes = sorted(set(scope) - set(SCOPES))
    if unknown_scopes:
        raise ValueError(f"unknown validation scope {unknown_scopes}; known: {SCOPES}")
    problems = unknown_variable_problems(settings)
    typed = type_problems(settings)
    settings = with_defaults(settings)
    problems += queue_problems(settings.get(PREFIX + "queues"), settings.get(PREFIX + "runtime_roles"))
    problems += database_problems(settings)
    if "rollout" in scope:
        problems += rollout_problems(settings)
    if "wait" in scope:
        problems += _wait_problems(settings, ("converge_timeout", "drain_timeout"))
    # A variable of another type, unless a rule above said so in its own words.
    named = set(re.findall(PREFIX + r"\w+", " ".join(problems)))
    problems += [message for message in typed if not named & set(re.findall(PREFIX + r"\w+", message))]
    return list(dict.fromkeys(problems))


def _text(value: object) -> str:
    return "" if value is None else str(value)


# The variables host_settings carries to the steps that run once for every host (validate.yml's _enqueue_shards_host).
HOST_SETTINGS = ("services", "service_queues", "service_runtimes", "runtimes_per_service", "restart_method",
                 "restart_command", "status_command", "runtime_hostname")


def host_settings(settings: dict[str, Any], host: str, scope: list[str]) -> dict[str, Any]:
    """What the rollout needs of one producer host's variables, and every problem with them.

    Computed on each host (its own variables, whatever their precedence), so
    the steps that run once for all hosts - the plan, each batch's restarts -
    read each host's services and restart contract from here.
    """
    problems = input_problems(settings, scope)
    settings = with_defaults(settings)
    services = settings.get(PREFIX + "services") or []
    services = [str(name) for name in services] if isinstance(services, list) else []
    declared = settings.get(PREFIX + "service_queues") or {}
    carried = {name: _text(settings.get(PREFIX + name)) for name in HOST_SETTINGS[4:]}
    # The HOSTNAME its environment file gives the services' processes (none when the role writes no file).
    carried["runtime_hostname"] *= bool(settings.get(PREFIX + "env_file"))
    # Each service's runtimes: its own (enqueue_shards_service_runtimes), else enqueue_shards_runtimes_per_service.
    runtimes = {**dict.fromkeys(services, _integer(settings.get(PREFIX + "runtimes_per_service"))),
                **(settings.get(PREFIX + "service_runtimes") or {})}
    return {"host": host, "problems": problems, "services": services,
            "service_queues": declared if isinstance(declared, dict) else {},
            "service_runtimes": {name: count for name, count in runtimes.items()
                                 if isinstance(count, int) and not isinstance(count, bool) and name in services},
            **carried}


def input_verdict(hosts: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether every host's variables are valid; otherwise one message, hosts with the same problems together."""
    by_problems: dict[tuple[str, ...], list[str]] = {}
    for host in hosts:
        if host["problems"]:
            by_problems.setdefault(tuple(host["problems"]), []).append(host["host"])
    if not by_problems:
        return {"ok": True, "message": f"The variables of {len(hosts)} producer host(s) are valid."}
    return {"ok": False, "message": " || ".join(
        f"Invalid input for {', '.join(names)}, nothing was changed: {' | '.join(problems)}"
        for problems, names in by_problems.items())}
