# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role's input rules: the modules' own rules, every problem at once, unknown variables named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.input_rules import (
    ROLE_OPTIONS,
    SPEC,
    given_values,
    host_settings,
    input_problems,
    input_verdict,
    producer_group_problem,
)

ROLE = Path(__file__).resolve().parents[5] / "roles" / "enqueue_shards"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
CONNECTION = {"login_host": "db1", "login_user": "awa_migrator", "login_db": "app"}


def settings(**overrides) -> dict:
    """The variables a host sees: the role's defaults plus the required ones, then ``overrides``."""
    values = {**DEFAULTS, "enqueue_shards_queues": [{"queue": "orders", "shards": 8}],
              "enqueue_shards_connection": CONNECTION, "enqueue_shards_services": ["orders-worker"]}
    values.update({f"enqueue_shards_{name}": value for name, value in overrides.items()})
    return values


def problems(scope=("queues", "rollout", "wait"), **overrides) -> list[str]:
    return input_problems(settings(**overrides), list(scope))


def test_the_known_variables_are_exactly_the_documented_ones_read_from_the_roles_own_spec():
    assert SPEC == ROLE / "meta" / "argument_specs.yml"
    specs = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    assert set(ROLE_OPTIONS) == set(specs["argument_specs"]["main"]["options"])


def test_a_variable_left_out_is_judged_at_its_declared_default():
    """A host without enqueue_shards_batch_size (or any other variable with a default) is judged as Ansible runs it,
    at the spec's default - the role's defaults/main.yml: no problem, and its restart contract is the default one."""
    assert given_values({}) == {name.removeprefix("enqueue_shards_"): value for name, value in DEFAULTS.items()}
    given = {"enqueue_shards_queues": [{"queue": "orders", "shards": 8}], "enqueue_shards_services": ["orders-worker"],
             "enqueue_shards_connection": CONNECTION}
    assert input_problems(given, ["queues", "rollout", "wait"]) == []
    settings = host_settings(given, "web1", ["queues", "rollout", "wait"])
    assert (settings["restart_method"], settings["restart_command"], settings["status_command"]) == ("auto", "", "")


def test_good_input_has_no_problem():
    assert problems() == []


@pytest.mark.parametrize("queues, expected", [
    ([], "enqueue_shards_queues must name at least one queue"),
    ([{"queue": "orders"}], "enqueue_shards_queues[0] needs queue and shards"),
    ([{"queue": "orders", "shards": 65}], "enqueue_shards_queues[0] ('orders'): shards must be between 1 and 64, got 65"),
    ([{"queue": "orders", "shards": 0}], "shards must be between 1 and 64, got 0"),
    ([{"queue": "orders#1", "shards": 2}], "contains '#'"),
    ([{"queue": "ord\u0007ers", "shards": 2}], "contains control characters (U+0007)"),
    ([{"queue": "  ", "shards": 2}], "queue must be a non-empty name"),
    ([{"queue": "q" * 256, "shards": 2}], "queue name is 256 characters long"),
    ([{"queue": "orders", "shards": 2, "stripes": 0}], "stripes must be between 1 and 64, got 0"),
    ([{"queue": "orders", "shards": 2}, {"queue": "orders", "shards": 4}], "names a queue more than once: 'orders'"),
    ([{"queue": "orders", "shards": "many"}], "shards must be an integer between 1 and 64, got 'many'"),
])
def test_queue_entries_follow_the_modules_rules(queues, expected):
    found = problems(queues=queues)
    assert any(expected in problem for problem in found), found


def test_numbers_given_as_strings_are_accepted_as_ansible_passes_them():
    assert problems(queues=[{"queue": "orders", "shards": "8", "stripes": "2"}], lock_timeout="0",
                    batch_size="2", converge_timeout="600") == []


def test_lock_timeout_zero_means_no_limit_as_in_the_module():
    assert problems(lock_timeout=0) == []
    assert problems(lock_timeout=3601) == ["enqueue_shards_lock_timeout must be between 0 and 3600 seconds, got 3601.0"]


@pytest.mark.parametrize("connection, expected", [
    ({}, "enqueue_shards_connection is empty"),
    ({"login_host": "db1"}, "enqueue_shards_connection lacks login_user and login_db"),
    ({"login_user": "awa_migrator", "login_db": " "}, "enqueue_shards_connection lacks login_db"),
    ({**CONNECTION, "login_host": "db1,db2", "login_port": "5432,5433,5434"},
     "enqueue_shards_connection: login_port gives 3 ports (5432,5433,5434) for the 2 host(s) of login_host"),
    ({**CONNECTION, "target_session_attrs": "any"},
     "enqueue_shards_connection: target_session_attrs is 'any', which lets libpq connect to a standby"),
])
def test_a_forgotten_or_partial_connection_is_refused(connection, expected):
    found = problems(connection=connection)
    assert len(found) == 1 and found[0].startswith(expected)


@pytest.mark.parametrize("queues, expected", [
    ([{"queue": "orders", "shard": 4}],
     ["enqueue_shards_queues[0] has no key shard (did you mean shards?); it takes queue, shards, stripes, new_queue"]),
    ([{"queue": "orders", "shards": 4}, {"queue": "refunds", "shards": 2, "strips": 2, "colour": "red"}],
     ["enqueue_shards_queues[1] has no key strips (did you mean stripes?); it takes queue, shards, stripes, new_queue",
      "enqueue_shards_queues[1] has no key colour; it takes queue, shards, stripes, new_queue"]),
], ids=["shard", "two-keys"])
def test_a_key_a_queue_entry_does_not_take_is_named_with_the_one_meant_and_alone(queues, expected):
    assert problems(queues=queues) == expected


@pytest.mark.parametrize("connection, expected", [
    ({**CONNECTION, "login_usr": "awa"}, "enqueue_shards_connection has no key login_usr (did you mean login_user?); "
                                         "it takes login_user, login_password, login_host, login_port, "
                                         "login_unix_socket, login_db, ssl_mode, ca_cert, ssl_cert, ssl_key, "
                                         "target_session_attrs, connect_params, session_role"),
    ({**CONNECTION, "ssl_mode": "requir"}, "enqueue_shards_connection: value of ssl_mode must be one of: allow, "
                                           "disable, prefer, require, verify-ca, verify-full, got: requir"),
    ({**CONNECTION, "connect_params": "sslmode"}, "enqueue_shards_connection: argument 'connect_params' is of type "
                                                  "str and we were unable to convert to dict: dictionary requested, "
                                                  "could not parse JSON or key=value"),
], ids=["misspelt-key", "choice", "type"])
def test_the_connection_s_keys_and_values_follow_the_modules_options(connection, expected):
    """Ansible's check of the spec no longer looks inside the mapping: the modules' own argument spec does."""
    assert problems(connection=connection) == [expected]


@pytest.mark.parametrize("name, value, expected", [
    ("pickup", "restrat", "enqueue_shards_pickup must be one of restart, refresh, got 'restrat' (did you mean "
                          "restart?)"),
    ("restart_method", "sytemd", "enqueue_shards_restart_method must be one of auto, systemd, command, got 'sytemd' "
                                 "(did you mean systemd?)"),
])
def test_a_misspelt_choice_is_named_with_the_one_meant(name, value, expected):
    assert problems(**{name: value}) == [expected]
    assert problems(scope=("queues",), **{name: value}) == [], "only the rollout uses it"


def test_runtime_roles_follow_the_modules_rules():
    assert problems(runtime_roles=["awa_runtime", "awa_runtime"]) == [
        "enqueue_shards_queues[0] ('orders'): runtime_roles lists a role twice: ['awa_runtime', 'awa_runtime']"]


def test_a_mistyped_variable_is_named_with_the_right_one():
    found = input_problems({**settings(), "enqueue_shards_batchsize": 2}, ["queues"])
    assert found == ["enqueue_shards_batchsize is not a variable of the role awa.operations.enqueue_shards (did you "
                     "mean enqueue_shards_batch_size?): it would be ignored; `ansible-doc -t role "
                     "awa.operations.enqueue_shards` lists them"]


@pytest.mark.parametrize("typo, meant", [
    ("enqueue_shards_queue", "enqueue_shards_queues"),
    ("enqueue_shards_conection", "enqueue_shards_connection"),
    ("enqueue_shards_runtime_role", "enqueue_shards_runtime_roles"),
    ("enqueue_shards_restart_cmd", "enqueue_shards_restart_command"),
    ("enqueue_shards_service", "enqueue_shards_services"),
], ids=["queue", "conection", "runtime_role", "restart_cmd", "service"])
def test_a_misspelt_required_variable_is_named_first_with_the_one_meant_then_that_it_is_missing(typo, meant):
    given = {name: value for name, value in settings().items() if name != meant}
    found = input_problems({**given, typo: given.get(meant, [{"queue": "orders", "shards": 8}])}, ["queues", "rollout"])
    assert found[0].startswith(f"{typo} is not a variable of the role awa.operations.enqueue_shards (did you mean "
                               f"{meant}?)"), found


def test_a_name_close_to_no_variable_gets_no_guess():
    found = input_problems({**settings(), "enqueue_shards_xyzzy": 1}, ["queues"])
    assert found == ["enqueue_shards_xyzzy is not a variable of the role awa.operations.enqueue_shards: it would be "
                     "ignored; `ansible-doc -t role awa.operations.enqueue_shards` lists them"]


def test_each_service_s_runtimes_are_a_whole_number_for_a_service_of_the_host():
    assert problems(services=["api", "web"], service_runtimes={"api": 3, "web": 0}) == []
    assert problems(services=["api"], service_runtimes={"api": -1, "ghost": 2, "web": "two"}) == [
        "enqueue_shards_service_runtimes names services that enqueue_shards_services does not list: ghost, web",
        "enqueue_shards_service_runtimes must give each service a whole number of runtimes (0: it only enqueues, and "
        "is done once it started after the change): api, web"]
    assert problems(service_runtimes=[3]) == [
        "enqueue_shards_service_runtimes must map services to how many Awa runtimes each runs, e.g. {api: 3, web: 0}, "
        "got [3]"]


def test_every_rollout_problem_is_named_at_once():
    found = problems(batch_size=0, batch_pause=-1, canary_pause="soon", max_fail_percentage=150, max_deadlocks=-2,
                     max_failed_jobs="many", runtimes_per_service=1.5, services=[], restart_method="supervisord",
                     env_file="relative/path", env_file_mode="rw-r-----", env_file_show=["AWA_REGION", "region-1"],
                     environment={"BAD-NAME": "x", "OK": "a\nb"},
                     restart_timeout=-1, wait_sleep=0)
    assert found == [
        "enqueue_shards_batch_size: 0 is not a whole number of at least 1. Give a whole number of hosts (2), a "
        'percentage of them ("25%"), or a list of either ([1, "25%", "100%"], the last entry repeated)',
        "enqueue_shards_batch_pause must be seconds between 0 and 3600, got -1",
        "enqueue_shards_canary_pause must be seconds between 0 and 3600, got 'soon' (null: the same as "
        "enqueue_shards_batch_pause)",
        "enqueue_shards_max_fail_percentage must be a percentage of the producer hosts from 0 to 100, got 150",
        "enqueue_shards_max_deadlocks must be a whole number of at least 0, or null for no limit, got -2",
        "enqueue_shards_max_failed_jobs must be a whole number of at least 0, or null for no limit, got 'many'",
        "enqueue_shards_runtimes_per_service must be a whole number of at least 1, got 1.5",
        "enqueue_shards_services is empty: name the producer services of this host, or use enqueue_shards_pickup: "
        "refresh",
        "enqueue_shards_restart_method must be one of auto, systemd, command, got 'supervisord'",
        "enqueue_shards_env_file must be an absolute path, got relative/path",
        "enqueue_shards_env_file_mode must be a quoted octal mode such as \"0640\", got 'rw-r-----'",
        "enqueue_shards_env_file_show must be a list of variable names (letters, digits, _), got ['AWA_REGION', "
        "'region-1']",
        "enqueue_shards_environment names must be variable names (letters, digits, _): BAD-NAME",
        "enqueue_shards_environment values must be single lines: OK",
        "enqueue_shards_restart_timeout must be between 0 and 86400 seconds, got -1.0",
        "enqueue_shards_wait_sleep must be between 0.1 and 3600 seconds, got 0.0",
    ]


def test_a_connection_problem_never_quotes_a_password_written_into_login_host():
    connection = {**CONNECTION, "login_host": "postgres://awa:pw-s3cret@db1,", "login_password": "pw-2"}
    assert problems(connection=connection) == [
        "enqueue_shards_connection: login_host lists an empty host name ('postgres://awa:********@db1,'): name "
        "every host, separated by commas without a trailing one. Nothing was read or written."]


def test_an_environment_that_is_not_a_dict_is_refused_without_its_value():
    # Written as one line, the environment would hold the file's secrets: the message names only its type.
    found = problems(environment="AWA_DATABASE_URL=postgres://app:pw-s3cret@db/awa")
    assert found == ["enqueue_shards_environment must be a dict of NAME: value, got a str"]


def test_with_several_services_the_commands_must_name_the_service():
    # Whether a host can restart at all is known once it answers (verdicts.reachability).
    assert problems() == []
    two = {"services": ["a", "b"], "restart_command": "supervisorctl restart all", "status_command": "started"}
    assert problems(**two) == [
        "enqueue_shards_restart_command runs once per service, so it must contain {service} when a host has more "
        "than one service: supervisorctl restart all",
        "enqueue_shards_status_command runs once per service, so it must contain {service} when a host has more "
        "than one service: started"]
    assert problems(services=["a", "b"], restart_command="supervisorctl restart {service}") == []


def test_each_hosts_settings_carry_its_services_and_restart_contract_and_problems_are_told_together():
    web = host_settings(settings(services=["web-1"], restart_command="supervisorctl restart {service}"), "web1",
                        ["queues", "rollout"])
    assert web == {"host": "web1", "problems": [], "services": ["web-1"], "service_queues": {},
                   "service_runtimes": {"web-1": 1}, "restart_method": "auto",
                   "restart_command": "supervisorctl restart {service}", "status_command": "", "runtime_hostname": ""}
    with_file = host_settings(settings(services=["web-1"], env_file="/etc/awa/producer.env", runtime_hostname="web1"),
                              "web1", ["queues"])
    assert with_file["runtime_hostname"] == "web1", "the HOSTNAME its environment file gives the services"
    replicas = host_settings(settings(services=["api", "web"], runtimes_per_service=2,
                                      service_runtimes={"web": 0}), "web1", ["queues"])
    assert replicas["service_runtimes"] == {"api": 2, "web": 0}
    typo = host_settings({**settings(), "enqueue_shards_batchsize": 2}, "web2", ["queues"])
    assert input_verdict([web]) == {"ok": True, "message": "The variables of 1 producer host(s) are valid."}
    found = input_verdict([web, typo, dict(typo, host="web3")])
    assert not found["ok"]
    assert found["message"].startswith("Invalid input for web2, web3, nothing was changed: enqueue_shards_batchsize "
                                       "is not a variable of the role")


def test_refresh_needs_no_services_and_only_the_scope_asked_for_is_checked():
    assert problems(pickup="refresh", services=[]) == []
    assert problems(scope=("queues",), batch_size=0, converge_timeout=-5) == []
    assert problems(scope=("queues", "wait"), converge_timeout=-5) == [
        "enqueue_shards_converge_timeout must be between 0 and 86400 seconds, got -5.0"]


def test_an_unknown_scope_is_a_programming_error():
    with pytest.raises(ValueError):
        input_problems(settings(), ["everything"])


def test_batch_sizes_pauses_and_gate_limits_as_operators_write_them():
    assert problems(batch_size=[1, "25%", "100%"], batch_pause=30, canary_pause=None, max_fail_percentage="34",
                    max_deadlocks=0, max_failed_jobs="5", max_retried_jobs=None) == []


def test_an_empty_or_misspelled_producer_group_is_named():
    assert producer_group_problem({"all": ["a"], "awa_producers": ["a"]}, "awa_producers") == ""
    missing = producer_group_problem({"all": ["a"], "ungrouped": [], "awa_producer": ["a"], "db": []}, "awa_producers")
    assert missing == ("The inventory group awa_producers is not in the inventory, so the change window would run on "
                       "no producer host and change nothing: nothing was changed. Put the hosts that run the producer "
                       "services in awa_producers (did you mean awa_producer?); the inventory's groups: awa_producer, "
                       "db.")
    assert producer_group_problem({"all": [], "awa_producers": []}, "awa_producers").startswith(
        "The inventory group awa_producers is empty")


@pytest.mark.parametrize("mode", ["640", "0640", "2750", "02750"])
def test_every_mode_awa_producer_services_writes_is_taken(mode):
    # The role refuses before the change only what the module would refuse after it (a setgid folder mode too).
    assert problems(env_file="/etc/awa/producer.env", env_file_mode=mode) == []


@pytest.mark.parametrize("mode", ["0o640", "640 ", "99999", 640])
def test_a_mode_the_module_would_refuse_is_refused_before_the_change(mode):
    assert problems(env_file="/etc/awa/producer.env", env_file_mode=mode) == [
        f'enqueue_shards_env_file_mode must be a quoted octal mode such as "0640", got {mode!r}']


def test_a_value_of_another_type_is_said_in_a_line_alone_without_a_password():
    # Ansible's own check of the entry point says it with the whole spec, a line of some 20,000 characters.
    found = problems(repair="sure", runtime_roles={"awa_runtime": True}, converge_timeout="an hour",
                     connection={**CONNECTION, "login_password": "pw-s3cret"})

    # (Ansible lists the valid booleans in no fixed order; every core's words, as ansible-core 2.19 says them.)
    assert sorted(problem.split(" Valid booleans")[0] for problem in found) == [
        "argument 'enqueue_shards_converge_timeout' is of type str and we were unable to convert to float: str cannot "
        "be converted to a float",
        "argument 'enqueue_shards_repair' is of type str and we were unable to convert to bool: The value 'sure' is not "
        "a valid boolean.",
        "argument 'enqueue_shards_runtime_roles' is of type dict and we were unable to convert to list: dict cannot be "
        "converted to a list"]
    assert all(len(problem) < 300 and "pw-s3cret" not in problem for problem in found), found
    # A rule's own words where it has some; a number written as a string is a number, as Ansible converts it.
    assert problems(canary_pause="soon") == ["enqueue_shards_canary_pause must be seconds between 0 and 3600, got "
                                             "'soon' (null: the same as enqueue_shards_batch_pause)"]
    assert problems(canary_pause="30", converge_timeout="600") == []
