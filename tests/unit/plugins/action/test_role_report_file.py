# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role's internal report writer: the file it writes on the controller, and what it says when it cannot."""

from __future__ import annotations

import json
import os
import re
import stat
import time
from types import SimpleNamespace

import pytest
import yaml

from ansible_collections.awa.operations.plugins.action.__role import enqueue_shards_report_file as plugin
from ansible_collections.awa.operations.plugins.modules.__role import enqueue_shards_report_file as documentation
from ansible_collections.awa.operations.tests.unit.plugins.doc_fragments.test_fragments_match_specs import normalized

REPORT = {"queues": {"orders": {"before": 1, "after": 4}}, "services": ["fleet-01/awa-producer@1"]}


def run(args: dict, check_mode: bool = False) -> dict:
    task = SimpleNamespace(args=args, async_val=0, check_mode=check_mode,
                           action="awa.operations.__role.enqueue_shards_report_file")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/tmp/unused"))
    # shared_loader_obj: a required argument before ansible-core 2.19.
    action = plugin.ActionModule(task, connection, play_context=None, loader=None, templar=None, shared_loader_obj=None)
    return action.run(task_vars={})


def test_the_options_are_the_documented_ones():
    # The module file is documentation only, so ansible-test cannot hold it against the action's spec.
    assert normalized(yaml.safe_load(documentation.DOCUMENTATION)["options"]) == normalized(plugin.ARGUMENT_SPEC)


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check mode"])
def test_the_report_is_written_as_json_for_its_owner_only_and_named_in_the_result(tmp_path, check_mode):
    result = run({"report": REPORT, "dir": str(tmp_path)}, check_mode=check_mode)

    assert result["changed"] and not result.get("failed")
    written = tmp_path / os.path.basename(result["path"])
    # Named by when this run (here: pytest's parent process) started, and a digest of host, run and window.
    started = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(plugin.process_start(os.getppid())))
    assert re.fullmatch(rf"enqueue_shards-{started}-[0-9a-f]{{8}}\.json", written.name), written.name
    assert json.loads(written.read_text(encoding="utf-8")) == REPORT
    assert stat.S_IMODE(written.stat().st_mode) == 0o600


def test_one_window_writes_one_file_and_two_windows_or_runs_never_the_same():
    first = plugin.report_path("/reports", "2026-12-07T02:09:25.120000+00:00", run=os.getpid())
    assert plugin.report_path("/reports", "2026-12-07T02:09:25.120000+00:00", run=os.getpid()) == first
    # Another window of the same run, the same window's start in another run (started the same second), another host.
    assert plugin.report_path("/reports", "2026-12-07T02:09:25.380000+00:00", run=os.getpid()) != first
    assert plugin.report_path("/reports", "2026-12-07T02:09:25.120000+00:00", run=os.getppid()) != first


def test_a_report_written_over_an_older_file_of_the_same_second_is_only_its_owners(tmp_path):
    path = plugin.report_path(str(tmp_path), "")
    with open(path, "w", encoding="utf-8") as older:
        older.write("an older and longer record" * 100)
    os.chmod(path, 0o644)

    assert plugin.write_report(REPORT, str(tmp_path), "") == {"changed": True, "path": path}

    assert json.loads(open(path, encoding="utf-8").read()) == REPORT
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_missing_directory_fails_naming_it_and_what_to_do(tmp_path):
    missing = tmp_path / "reports"

    result = run({"report": REPORT, "dir": str(missing)})

    assert result["failed"]
    assert result["msg"] == (f"The report's directory {missing} does not exist on the controller: create it or name "
                             "another (the role's enqueue_shards_report_dir; an empty string there writes no report)")
    assert not missing.exists()


def test_an_unwritable_file_fails_with_the_reason(tmp_path):
    # Root writes through file modes; a directory in the report's place cannot be opened for writing by anyone.
    os.mkdir(plugin.report_path(str(tmp_path), ""))

    result = run({"report": REPORT, "dir": str(tmp_path)})

    assert result["failed"] and result["msg"].startswith("Could not write the report ")
    assert result["msg"].endswith(": Is a directory")
