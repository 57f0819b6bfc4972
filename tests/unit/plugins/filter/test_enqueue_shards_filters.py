# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role's private filters are exactly the ones its tasks and the collection's playbooks call."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from ansible_collections.awa.operations.plugins.filter.__role.enqueue_shards import FilterModule

COLLECTION = Path(__file__).resolve().parents[4]
# A filter is called after a pipe (a task that names awa.operations.__role.* runs one of the role's own modules).
CALLED = re.compile(r"\|\s*awa\.operations\.__role\.(enqueue_shards_\w+)")


def test_every_filter_the_role_calls_is_registered_and_every_registered_one_is_called():
    texts = [path.read_text(encoding="utf-8") for folder in ("roles", "playbooks")
             for path in (COLLECTION / folder).rglob("*") if path.suffix in (".yml", ".j2")]
    called = {name for text in texts for name in CALLED.findall(text)}
    assert called == set(FilterModule().filters())


def test_the_only_filter_plugins_are_the_role_s_in_a_folder_ansible_doc_skips():
    """ansible-doc skips folders whose names start with two underscores; Galaxy refuses such file names, so the folder
    carries them (tests/functional/test_public_interface.py runs ansible-doc)."""
    files = sorted(path.relative_to(COLLECTION / "plugins" / "filter").as_posix()
                   for path in (COLLECTION / "plugins" / "filter").rglob("*.py"))
    assert files == ["__role/enqueue_shards.py"]


def test_the_role_s_filters_import_no_database_driver():
    """Every task that calls a filter imports this file again in its worker, on every host: psycopg would add 0.15 s
    of the controller's CPU to each (docs/performance.md, section 6). Asked of a Python of its own, whose modules
    start empty."""
    code = ("import sys; import ansible_collections.awa.operations.plugins.filter.__role.enqueue_shards; "
            "print(sorted(name for name in sys.modules if name.split('.')[0] in ('psycopg', 'psycopg_binary')))")
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)})
    assert imported.stdout.strip() == "[]"


def test_a_rollout_not_planned_yet_reads_alike_on_every_core():
    """Before the plan, ansible-core 2.16 to 2.18 hand the filters the rollout's null as '' (later cores as None): the
    window's services and record are those of no rollout either way."""
    filters = FilterModule().filters()
    assert filters["enqueue_shards_window_services"]("") == filters["enqueue_shards_window_services"](None)
    reads = {"before": None, "change": None, "now": None, "converged": None, "drained": None}
    asked = {"queues": [{"queue": "demo", "shards": 2}], "check_mode": True}
    recorded = [filters["enqueue_shards_record"](reads, {"rollout": rollout, "stop": stopped}, asked)
                for rollout, stopped in (("", ""), (None, None))]
    assert recorded[0] == recorded[1]


def test_every_play_host_s_values_are_gathered_once_in_the_views_the_steps_read():
    filters = FilterModule().filters()
    hostvars = {"web1": {"_enqueue_shards_host": {"host": "web1"}, "__enqueue_shards_reach": {"services": {}},
                         "__enqueue_shards_restart": {"changed": True}},
                "web2": {"_enqueue_shards_host": {"host": "web2"}, "ansible_failed_task": {"name": "Batch | restart"},
                         "ansible_failed_result": {"msg": "gone"}}}
    gathered = filters["enqueue_shards_play_hosts"](hostvars, ["web1", "web2"])
    assert gathered["settings"] == [{"host": "web1"}, {"host": "web2"}]
    assert gathered["probes"] == [{"services": {}}, {}]
    assert gathered["reads"] == [[{"host": "web1"}, {"services": {}}, {}], [{"host": "web2"}, {}, {}]]
    assert gathered["restarts"] == {"web1": {"changed": True}, "web2": {}}
    stopped = {"task": "Batch | restart", "message": "gone", "hosts": ["web2"]}
    assert gathered["stopped"] == stopped
    # The first stop is kept.
    assert filters["enqueue_shards_stop"]({"rollout": "", "stop": ""}, stopped) == {"rollout": None, "stop": stopped}
    assert filters["enqueue_shards_stop"]({"rollout": None, "stop": stopped}, {"task": "later"})["stop"] == stopped


def test_the_plays_of_the_batches_take_the_plan_s_hosts_and_none_before_it_or_after_a_stop():
    restart_plays = FilterModule().filters()["enqueue_shards_restart_plays"]
    planned = {"rollout": {"batch_hosts": [["web1"], ["web2", "web3"]]}, "stop": None}
    assert restart_plays({"localhost": {"_enqueue_shards_window_state": planned}}) == {
        "hosts": ["web1", "web2", "web3"], "serial": [1, 2]}
    none = {"hosts": [], "serial": [1]}
    assert restart_plays({}) == none, "--list-tasks: no hostvars"
    assert restart_plays({"localhost": {"_enqueue_shards_window_state": {"rollout": "", "stop": ""}}}) == none
    assert restart_plays({"localhost": {"_enqueue_shards_window_state": {**planned, "stop": {"task": "x"}}}}) == none
