# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The producers' environment file: merged over the base, quoted as systemd reads it."""

from __future__ import annotations

import shlex

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.environment_file import (
    environment_lines,
    hidden_values,
    shown_variables,
)


def test_one_variable_is_added_to_the_base_not_replacing_it():
    assert environment_lines({"AWA_MARK": "r1"}) == ["AWA_MARK=r1", "AWA_OVERRIDE_REFRESH_MS=1000"]


def test_the_runtime_host_name_is_written_as_hostname_unless_empty_and_an_override_wins():
    assert environment_lines({}, "app-1.example.com") == ["AWA_OVERRIDE_REFRESH_MS=1000", "HOSTNAME=app-1.example.com"]
    assert environment_lines({}, "") == environment_lines({}) == ["AWA_OVERRIDE_REFRESH_MS=1000"]
    assert environment_lines({"HOSTNAME": None}, "app-1") == ["AWA_OVERRIDE_REFRESH_MS=1000"]


def test_a_base_variable_can_be_overridden_or_left_out():
    assert environment_lines({"AWA_OVERRIDE_REFRESH_MS": 250}) == ["AWA_OVERRIDE_REFRESH_MS=250"]
    assert environment_lines({"AWA_OVERRIDE_REFRESH_MS": None}) == []


def test_values_that_need_it_are_double_quoted_and_read_back_unchanged():
    value = 'a "quoted" $HOME and a \\ backslash'
    [line] = environment_lines({"NOTE": value, "AWA_OVERRIDE_REFRESH_MS": None})
    name, dummy, text = line.partition("=")
    # systemd's EnvironmentFile unquotes double quotes with backslash escapes, as a POSIX shell does.
    assert (name, shlex.split(text)[0]) == ("NOTE", value)
    assert environment_lines({"ON": True, "PORT": 5432, "AWA_OVERRIDE_REFRESH_MS": None}) == ["ON=true", "PORT=5432"]


def test_the_diff_shows_the_roles_own_values_and_those_the_operator_lists_no_other():
    assert shown_variables([]) == ["AWA_OVERRIDE_REFRESH_MS", "HOSTNAME"]
    assert shown_variables(["AWA_REGION", "AWA_OVERRIDE_REFRESH_MS"]) == ["AWA_OVERRIDE_REFRESH_MS", "AWA_REGION",
                                                                          "HOSTNAME"]


def test_the_values_never_printed_are_those_not_shown_as_the_file_holds_them():
    environment = {"AWA_API_TOKEN": 'tok "x"', "AWA_REGION": "eu-1", "AWA_POOL": 10, "AWA_GONE": None}
    assert sorted(hidden_values(environment, shown_variables(["AWA_REGION"]))) == ['"tok \\"x\\""', "10", 'tok "x"']
