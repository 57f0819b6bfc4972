"""The change-window playbook on an inventory whose groups have other names than awa_producers and awa_db_controller.

``awa_producers_group`` (a variable of the playbook: with -e or in an
import_playbook's vars) names the group of the producer hosts, and
``enqueue_shards_db_group`` (a variable of the role) the group whose first
host runs the modules. The test bed's database (PostgreSQL 18) and its two
Awa applications on this machine; the inventory names the producer host's
group app_servers and the database controller's group db_clients.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from enqueue_shards_support import ansible_command, shard_counts
from rollout_support import PLAYBOOK, REPO, failure_message

# The change window on the floor core too (conftest.py, --floor-python).
pytestmark = pytest.mark.floor

INVENTORY = """\
all:
  children:
    app_servers:
      hosts:
        localhost:
    db_clients:
      hosts:
        db-client:
          ansible_connection: local
          ansible_python_interpreter: "{{ ansible_playbook_python }}"
"""
WRAPPER = f"""\
- name: The change window on the group app_server (a typo of app_servers)
  ansible.builtin.import_playbook: {PLAYBOOK}
  vars:
    awa_producers_group: app_server
"""


def renamed_inventory(folder: Path) -> Path:
    """The inventory above, with the test bed's variables (extensions/testbed/group_vars) beside it."""
    inventory = folder / "renamed" / "inventory.yml"
    inventory.parent.mkdir(parents=True, exist_ok=True)
    inventory.write_text(INVENTORY, encoding="utf-8")
    shutil.copytree(REPO / "extensions" / "testbed" / "group_vars", inventory.parent / "group_vars",
                    dirs_exist_ok=True)
    return inventory


def test_the_playbook_runs_on_groups_named_by_its_variables(testbed, testbed_db):
    inventory = renamed_inventory(testbed)
    queues = '{"enqueue_shards_queues": [{"queue": "demo", "shards": 4}]}'
    process = ansible_command("ansible-playbook", "-i", str(inventory), str(PLAYBOOK), "-e", queues,
                              "-e", "awa_producers_group=app_servers", "-e", "enqueue_shards_db_group=db_clients",
                              "--check", env_extra={"AWA_TESTBED_STATE": str(testbed)})
    output = process.stdout + process.stderr
    assert process.returncode == 0, output
    # The producer play ran on app_servers' host, and every database step on db_clients' first host.
    assert "PLAY [Change window | validate, reach, preflight, the change, the producers' environment file and the plan]" in output
    assert "[localhost -> db-client]" in output, output
    assert "Change | set enqueue_shards, provision lanes, grant, record in the ledger" in output
    assert shard_counts(testbed_db).get("demo", 1) == 1, "check mode changed nothing"


def test_a_misspelled_group_in_an_import_playbook_stops_before_anything(tmp_path):
    inventory = renamed_inventory(tmp_path)
    wrapper = tmp_path / "change_window.yml"
    wrapper.write_text(WRAPPER, encoding="utf-8")
    process = ansible_command("ansible-playbook", "-i", str(inventory), str(wrapper),
                              "-e", '{"enqueue_shards_queues": [{"queue": "demo", "shards": 4}]}',
                              env_extra={"AWA_TESTBED_STATE": str(tmp_path / "no-test-bed")})
    output = process.stdout + process.stderr
    assert process.returncode == 2, output
    assert failure_message(process.stdout) == (
        "The inventory group app_server is not in the inventory, so the change window would run on no producer host "
        "and change nothing: nothing was changed. Put the hosts that run the producer services in app_server "
        "(did you mean app_servers?); the inventory's groups: app_servers, db_clients.")
    assert "PLAY [Change enqueue_shards and roll it out to every producer]" not in output
