# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role's inputs are read from its meta/argument_specs.yml, the one place they are declared."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.awa.operations.plugins.plugin_utils.rollout import role_spec
from ansible_collections.awa.operations.plugins.plugin_utils.rollout.input_rules import host_settings, input_problems

ROLE = Path(__file__).resolve().parents[5] / "roles" / "enqueue_shards"


def test_the_spec_read_is_the_roles_own_file():
    assert role_spec.SPEC == ROLE / "meta" / "argument_specs.yml"


def test_the_defaults_the_rules_fall_back_on_are_the_roles_defaults():
    assert role_spec.defaults() == yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))


def test_a_variable_left_out_is_judged_at_its_declared_default():
    """A host without enqueue_shards_batch_size (or any other variable with a default) is judged as Ansible runs it,
    at the spec's default: no problem, and its restart contract is the default one."""
    given = {"enqueue_shards_queues": [{"queue": "orders", "shards": 8}], "enqueue_shards_services": ["orders-worker"],
             "enqueue_shards_connection": {"login_host": "db1", "login_user": "awa_migrator", "login_db": "app"}}
    assert input_problems(given, ["queues", "rollout", "wait"]) == []
    settings = host_settings(given, "web1", ["queues", "rollout", "wait"])
    assert (settings["restart_method"], settings["restart_command"], settings["status_command"]) == ("auto", "", "")
