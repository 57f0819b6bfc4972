# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The change window's reads: the last read of each queue, and the summary and record made of it."""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.record import (
    after_change,
    inventory,
    last_read,
    last_views,
    record_window,
    window_summary,
)
# The recorded reads and the window 4 -> 6 that the record's tests use.
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout.test_record import (
    CONVERGED,
    DEMO_TO_6,
    REAL,
    UNCONVERGED,
    converged_at_6,
)

SKIPPED = {"skipped": True, "changed": False}
NO_ROLLOUT = {"rollout": None, "stop": None}
REAL_RUN = {"queues": DEMO_TO_6, "check_mode": False}


def test_the_queues_after_the_change_are_the_changes_else_the_pickups_own_read():
    change = dict(REAL, observed=UNCONVERGED)
    assert after_change({"change": change, "now": SKIPPED}) == UNCONVERGED
    assert after_change({"change": None, "now": CONVERGED}) == CONVERGED
    assert after_change({}) == {}


def test_the_last_read_is_the_newest_that_ran_and_each_queue_is_as_it_last_read():
    drained = converged_at_6()
    reads = {"change": dict(REAL, observed=UNCONVERGED), "converged": CONVERGED, "drained": drained}
    assert last_read(reads) is not drained and last_read(reads) == drained
    assert last_read(dict(reads, drained=SKIPPED)) == CONVERGED
    # Check mode: the waits did not run, the read with the change is the last.
    assert last_read(dict(reads, converged=SKIPPED, drained=None)) == UNCONVERGED
    assert last_read({"before": CONVERGED}) == {}, "a run started past the change and the waits read nothing after it"
    assert last_views(dict(reads, drained=SKIPPED)) == CONVERGED["queues"]


def test_the_inventory_is_the_rollouts_services_with_the_last_reads_runtimes():
    rollout = {"hosts": [{"host": "app1", "services": []}], "pid_hosts": ["app1"], "concerned_queues": ["demo"]}
    assert inventory(rollout, CONVERGED) == {
        "hosts": rollout["hosts"], "runtimes": CONVERGED["runtimes"], "pid_hosts": ["app1"], "queues": ["demo"]}
    assert inventory(None, {}) == {"hosts": [], "runtimes": [], "pid_hosts": [], "queues": None}


def test_the_summary_says_the_window_from_its_last_read_and_judges_it_in_a_real_run_only():
    reads = {"before": {"read_at": "2026-11-30T16:55:20.000000+00:00"}, "change": dict(REAL, observed=UNCONVERGED),
             "converged": converged_at_6()}
    done = window_summary(reads, NO_ROLLOUT, REAL_RUN, {"args": ["play.yml"]})
    assert done["verdict"] == {"ok": True, "message": (
        "Every queue runs the count asked, converged (and drained after a lowering).")}
    assert any(line.startswith("The window: 2026-11-30 16:55:20 -> ") for line in done["lines"]), done["lines"]
    assert done["lines"][-1].startswith("To back out (the previous counts, the same options): ansible-playbook")
    # Resumed past the change: the count in force is not the one asked, and nothing of it is this run's to back out.
    resumed = window_summary({"converged": CONVERGED}, NO_ROLLOUT, REAL_RUN, None)
    assert not resumed["verdict"]["ok"] and "demo holds enqueue_shards 4, not the 6 asked" in resumed["verdict"]["message"]
    assert not any("To back out" in line for line in resumed["lines"])
    planned = window_summary({"change": dict(REAL, observed=UNCONVERGED)}, NO_ROLLOUT,
                             {"queues": DEMO_TO_6, "check_mode": True}, None)
    assert planned["verdict"] is None


def test_the_record_reads_where_the_queues_stand_after_a_stop():
    stopped = {"rollout": None, "stop": {"task": "Wait | until every live runtime runs with the new count",
                                         "message": "timed out", "hosts": []}}
    reads = {"before": {"read_at": "2026-11-30T16:55:20.000000+00:00"}, "change": dict(REAL, observed=UNCONVERGED),
             "converged": dict(UNCONVERGED, failed=True), "at_stop": converged_at_6()}
    ended = record_window(reads, stopped, REAL_RUN, None)
    assert ended["outcome"]["ended"] == CONVERGED["read_at"] and ended["outcome"]["queues"]["demo"]["converged"]
    assert not ended["ok"] and ended["message"].startswith("timed out.")
    # A read after the stop that failed leaves the record with the last read before it.
    unread = record_window(dict(reads, at_stop={"failed": True, "msg": "no connection"}), stopped, REAL_RUN, None)
    assert unread["outcome"]["ended"] == UNCONVERGED["read_at"] and not unread["outcome"]["queues"]["demo"]["converged"]
