# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The advice rule, on windows recorded from real Awa 0.6.9 load (fixtures/window_*.json) and on plain numbers.

Each fixture is one window the module's sampler saw (tests/functional,
PostgreSQL 17 and 18): the lane lock keys, every lane's cursors at both ends,
and every sample of pg_stat_activity joined to pg_locks (idle backends left out).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ansible_collections.awa.operations.plugins.module_utils.advice import gains, load_window, rule
from ansible_collections.awa.operations.plugins.module_utils.advice.rule import QueueLoad, advise, queue_load
from ansible_collections.awa.operations.plugins.module_utils.advice.load_window import ContentionTally
from ansible_collections.awa.operations.plugins.module_utils.advice.load_window import LoadWindow

FIXTURES = Path(__file__).parents[1] / "fixtures"
MAJORS = (17, 18)
# Where shards pay off (the shape of Awa's ADR-025 sweep), and where they do not (this project's 2-core runs).
GAINFUL = {"gains": {"insert": {str(n): {"1": 1.0, "2": 1.6, "4": 2.75, "8": 2.8} for n in (1, 2, 4, 8, 16)},
                     "copy_keyed": {"2": {"1": 1.0, "2": 1.5, "4": 1.6}}}}
FLAT = {"gains": {path: {str(n): {"1": 1.0, "2": 1.05, "4": 1.1, "8": 1.08} for n in (1, 2, 4, 8, 16)}
                  for path in ("insert", "copy", "copy_keyed")},
        "limits": {"insert": {"8": rule.NOTIFY_LIMIT}}}


def recorded(name: str, major: int) -> LoadWindow:
    data = json.loads((FIXTURES / f"window_{name}_pg{major}.json").read_text(encoding="utf-8"))
    keys = {(classid, objid): (kind, tuple(lane)) for classid, objid, kind, lane in data["lane_keys"]}
    tally = ContentionTally()
    for rows in data["samples"]:
        tally.add([load_window.classify(tuple(row), keys) for row in rows])

    def cursors(pairs):
        return {tuple(lane): tuple(values) for lane, values in pairs}

    return LoadWindow(data["seconds"], tally, cursors(data["cursors_before"]), cursors(data["cursors_after"]))


def advised(name: str, major: int, queue: str, shards: int, measured: dict) -> dict:
    window = recorded(name, major)
    return advise(queue_load(queue, [queue], shards, window), window.tally, measured)


# ---- recorded windows --------------------------------------------------------------------------


@pytest.mark.parametrize("major", MAJORS)
def test_eight_sql_inserters_on_one_lane_wait_on_its_lock_and_get_raise_where_shards_pay(major):
    verdict = advised("contended_insert", major, "busy", 1, GAINFUL)

    evidence = verdict["evidence"]
    assert evidence["lane_lock_waiters"] >= rule.CONTENDED
    assert evidence["path"] == "insert" and evidence["concurrent_enqueuers"] >= 4
    assert evidence["enqueued_per_s"] > 0 and set(evidence["enqueued_by_shard"]) == {"0"}
    # Never past the point where gains stop: 4 is within 5% of 8's x2.8.
    assert (verdict["verdict"], verdict["to"]) == ("raise", 4)
    assert verdict["message"].startswith("busy: raise enqueue_shards 1 -> 4. ")
    assert "x2.75 at 4 shards over 1" in verdict["message"]
    assert "hash mod 1 to hash mod 4" in verdict["ordering"]


@pytest.mark.parametrize("major", MAJORS)
def test_the_same_contention_gets_will_not_help_where_no_count_measured_the_minimum_gain(major):
    verdict = advised("contended_insert", major, "busy", 1, FLAT)

    assert verdict["verdict"] == "will_not_help" and verdict["to"] == 1
    assert verdict["limit"] in (rule.NOTIFY_LIMIT, rule.WAL_LIMIT)
    assert f"no count measured x{rule.MIN_GAIN} over 1" in verdict["message"]
    assert verdict["ordering"] == "Nothing changes: jobs keep their order per shard over 1 shard(s)."


@pytest.mark.parametrize("major", MAJORS)
def test_copy_producers_without_a_key_land_on_shard_0_of_4_and_the_finding_says_why(major):
    verdict = advised("copy_one_shard", major, "bulk", 4, GAINFUL)

    assert (verdict["verdict"], verdict["to"]) == ("keep", 4)
    assert verdict["evidence"]["busiest_shard_share"] == 1.0 and verdict["evidence"]["path"] == "copy"
    assert {shard for shard, jobs in verdict["evidence"]["enqueued_by_shard"].items() if jobs} == {"0"}
    assert any("went to shard 0 of 4" in finding and "enqueue_many_copy without an ordering_key" in finding
               for finding in verdict["findings"])


@pytest.mark.parametrize("major", MAJORS)
def test_an_idle_queue_is_kept_even_with_more_shards_than_it_needs(major):
    verdict = advised("idle", major, "idle", 2, FLAT)

    assert (verdict["verdict"], verdict["to"]) == ("keep", 2)
    assert verdict["evidence"]["enqueued_per_s"] == 0 and "nothing to judge" in verdict["message"]


@pytest.mark.parametrize("major", MAJORS)
def test_the_recorded_samples_classify_the_lane_lock_waits_to_the_queue(major):
    tally = recorded("contended_insert", major).tally

    assert set(tally.lane_waiters) == {"busy"} and tally.lane_statements["busy"]["insert"] > 0
    assert tally.hidden == 0 and tally.peak_enqueuers >= 4 and tally.enqueue_statements["insert"] > 0


# ---- the rule on plain numbers ------------------------------------------------------------------


def load(shards: int = 1, enqueued: dict | None = None, waiters: float = 0.0, lag: tuple = (0, 0),
         claimed: int = 100) -> QueueLoad:
    return QueueLoad("q", shards, 10.0, {0: 100} if enqueued is None else enqueued, claimed, lag[0], lag[1],
                     waiters, {"insert": 10} if waiters else {})


def tally(samples: int = 100, notify: int = 0, wal: int = 0, active: int = 0, on_cpu: int = 0, peak: int = 8,
          hidden: int = 0) -> ContentionTally:
    return ContentionTally(samples=samples, notify_waiters=notify, wal_waiters=wal, enqueuers_active=active,
                           enqueuers_on_cpu=on_cpu, peak_enqueuers=peak, hidden=hidden)


def test_raise_stops_where_the_measured_gains_stop():
    assert rule.raise_target({1: 1.0, 2: 1.6, 4: 2.75, 8: 2.8}, 1) == 4
    assert rule.raise_target({1: 1.0, 2: 1.6, 4: 2.75, 8: 2.8}, 2) == 4  # x1.72 over 2
    assert rule.raise_target({1: 1.0, 2: 1.6, 4: 2.75, 8: 2.8}, 4) is None  # x1.02 over 4
    assert rule.raise_target({1: 1.0, 2: 1.2, 4: 1.29}, 1) is None  # under x1.3 everywhere
    assert rule.raise_target({1: 1.0, 2: 1.4, 4: 1.3}, 1) == 2  # 4 is worse than 2
    assert rule.raise_target({1: 1.0, 2: 1.6, 4: 2.75, 8: 2.8}, 3) == 4  # 3 is judged by column 2


def test_the_table_row_is_the_largest_measured_load_at_or_below_the_observed_one():
    table = {"1": {"1": 1.0}, "4": {"1": 1.0, "2": 2.0}, "16": {"1": 1.0, "2": 3.0}}
    assert rule.measured_row(table, 3)[0] == 1
    assert rule.measured_row(table, 12)[0] == 4
    assert rule.measured_row(table, 40)[0] == 16
    assert rule.measured_row({}, 4) is None
    # A table given as YAML in advise_gains has integer keys.
    assert rule.measured_row({4: {1: 1, 2: 2}}, 5) == (4, {1: 1.0, 2: 2.0})


def test_lower_after_a_drain_when_the_lanes_are_quiet_and_the_extra_shards_measured_nothing():
    verdict = advise(load(shards=8, enqueued={0: 30, 3: 40, 7: 30}), tally(), FLAT)

    assert (verdict["verdict"], verdict["to"]) == ("lower", 1)
    assert verdict["message"].startswith("q: lower enqueue_shards 8 -> 1 (after a drain).")
    assert "wait until the shards 1 and above have drained" in verdict["ordering"]


def test_quiet_lanes_where_the_shards_measured_a_gain_are_kept():
    assert advise(load(shards=4, enqueued={0: 50, 1: 50}), tally(), GAINFUL)["verdict"] == "keep"


@pytest.mark.parametrize(("counts", "limit"), [
    ({"notify": 80}, rule.NOTIFY_LIMIT),
    ({"wal": 70, "notify": 10}, rule.WAL_LIMIT),
    ({"active": 100, "on_cpu": 80}, rule.CPU_LIMIT),
])
def test_commit_waits_and_cpu_are_limits_sharding_does_not_lift(counts, limit):
    verdict = advise(load(), tally(**counts), GAINFUL)

    assert (verdict["verdict"], verdict["limit"]) == ("will_not_help", limit)
    assert verdict["message"].startswith(f"q: sharding will not help: the limit is {limit}.")


def test_contended_copy_producers_are_told_that_the_copy_paths_lane_locks_are_the_limit():
    table = {"gains": {"copy_keyed": {"8": {"1": 1.0, "2": 0.63, "8": 0.33}}},
             "limits": {"copy_keyed": {"8": rule.COPY_LANES_LIMIT}}}
    contended = QueueLoad("q", 1, 10.0, {0: 20000}, 20000, 0, 0, 6.4, {"copy": 10})

    verdict = advise(contended, tally(), table)

    assert (verdict["verdict"], verdict["limit"], verdict["evidence"]["path"]) == (
        "will_not_help", rule.COPY_LANES_LIMIT, "copy_keyed")
    assert "each enqueue_many_copy call reserves and locks every lane it writes" in verdict["message"]


@pytest.mark.parametrize(("path", "peak", "verdict", "to", "limit"), [
    ("insert", 16, "raise", 8, None),  # x1.34 / x1.32 / x1.53: 8 is the only count within 5% of the best
    ("insert", 8, "will_not_help", 1, rule.NOTIFY_LIMIT),  # at most x1.09
    ("copy", 8, "will_not_help", 1, rule.COPY_LANES_LIMIT),  # copy at S=1 is judged as copy_keyed: x0.33-0.63
])
def test_the_shipped_table_gives_the_verdicts_docs_performance_md_states(path, peak, verdict, to, limit):
    contended = QueueLoad("q", 1, 10.0, {0: 3000}, 3000, 0, 0, 4.0, {path: 10})

    advised = advise(contended, tally(peak=peak), gains.MEASURED)

    assert (advised["verdict"], advised["to"], advised["limit"]) == (verdict, to, limit), advised["message"]


def test_a_backlog_that_grows_while_claims_lag_names_the_claimers():
    verdict = advise(load(enqueued={0: 1000}, claimed=400, lag=(10, 610)), tally(), GAINFUL)

    assert (verdict["verdict"], verdict["limit"]) == ("will_not_help", rule.CLAIMERS_LIMIT)
    assert "add workers or slots" in verdict["message"]


def test_hidden_backends_are_a_finding_that_names_the_grant():
    verdict = advise(load(), tally(hidden=5), GAINFUL)

    assert any("grant it pg_monitor" in finding for finding in verdict["findings"])


def test_without_visible_statements_the_load_is_the_waiters_plus_the_holder():
    assert advise(load(waiters=3.4), tally(peak=0), GAINFUL)["evidence"]["concurrent_enqueuers"] == 4


def test_contention_without_a_measurement_of_the_path_keeps_the_count_and_says_so():
    verdict = advise(load(waiters=2.0), tally(), {"gains": {"copy": {"2": {"1": 1.0}}}})

    assert verdict["verdict"] == "keep" and "no measurement of the insert path" in verdict["message"]


# ---- the classification of one sample row -----------------------------------------------------


def test_a_sample_row_is_named_by_its_wait_its_lock_and_its_lane():
    keys = {(1, 2): (load_window.RESERVATION, ("q", 2, 0))}
    row = ("active", "Lock", "advisory", "advisory", 5, 1, 2, "SELECT * FROM awa.insert_job_compat(")
    assert load_window.classify(row, keys) == load_window.BackendSample(
        "Lock:advisory", load_window.RESERVATION, ("q", 2, 0), "insert")
    notify = ("active", "Lock", "object", "object", 0, load_window.PG_DATABASE_OID, 0, "COMMIT")
    assert load_window.classify(notify, keys).lock == load_window.NOTIFY
    hidden = (None, None, None, None, None, None, None, "<insufficient privilege>")
    assert load_window.classify(hidden, keys) == load_window.BackendSample(load_window.HIDDEN)
    assert load_window.split_key(-1) == (0xFFFFFFFF, 0xFFFFFFFF)


@pytest.mark.parametrize("major", MAJORS)
def test_a_raise_names_the_measured_gain_it_was_decided_by(major):
    verdict = advised("contended_insert", major, "busy", 1, GAINFUL)
    producers = verdict["evidence"]["measured_row"]["producers"]
    assert (verdict["verdict"], verdict["shards"], verdict["limit"]) == ("raise", 1, None) and producers >= 4
    gain = float(re.search(r"measured x(\d+\.\d+) at 4 shards over 1", verdict["message"]).group(1))
    assert gain >= rule.MIN_GAIN and f"with {producers} producer(s) on the insert path" in verdict["message"]
