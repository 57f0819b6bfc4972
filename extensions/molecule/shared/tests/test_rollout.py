"""Molecule verify: what awa.operations.enqueue_shards left behind, read from the real database and processes.

Molecule runs these tests after each of three passes; ``molecule-pass.json``
in the test bed's state folder says which one and what count to expect:

* ``check``: the playbook ran with --check --diff and must have changed nothing
  (no count, lane, grant, ledger or environment file) and restarted nothing;
* ``raise``: queue demo went 1 -> 8 with a rolling restart;
* ``lower``: queue demo went 8 -> 2 and the shards 2..7 drained.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import psycopg
import pytest

STATE_DIR = Path(os.environ["AWA_TESTBED_STATE"])
QUEUE = "demo"
PRIORITIES = (1, 2, 3, 4)
ENV_LINE = "AWA_OVERRIDE_REFRESH_MS=1000"
# The role's default clock margin (seconds) between runtime hosts and the database.
CLOCK_MARGIN = 5

# Ready jobs of one lane, exactly as Awa counts them (docs/awa-internals.md §9).
READY_BEYOND_SQL = """
SELECT coalesce(sum((SELECT count(*) FROM awa.ready_entries r
         WHERE r.queue = h.queue AND r.priority = h.priority AND r.enqueue_shard = h.enqueue_shard
           AND r.lane_seq >= awa.sequence_next_value(c.seq_name)
           AND NOT EXISTS (SELECT 1 FROM awa.ready_tombstones t
                 WHERE t.queue = r.queue AND t.priority = r.priority AND t.enqueue_shard = r.enqueue_shard
                   AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot
                   AND t.ready_generation = r.ready_generation))), 0)
FROM awa.queue_enqueue_heads h JOIN awa.queue_claim_heads c USING (queue, priority, enqueue_shard)
WHERE h.queue = %s AND h.enqueue_shard >= %s
"""

LIVE_RUNTIMES_SQL = """
SELECT instance_id::text, pid, started_at, healthy FROM awa.runtime_instances
WHERE NOT shutting_down
  AND last_seen_at + make_interval(secs => GREATEST(((GREATEST(snapshot_interval_ms, 1000) / 1000) * 3)::int, 30))
      >= now()
"""


def read_json(name: str) -> dict:
    return json.loads((STATE_DIR / name).read_text(encoding="utf-8"))


@cache
def bed_state() -> dict:
    return read_json("state.json")


@cache
def molecule_pass() -> dict:
    return read_json("molecule-pass.json")


def runtimes_before() -> dict:
    return read_json(f"runtimes-{molecule_pass()['runtimes_before']}.json")


def query(statement: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(bed_state()["superuser_dsn"], autocommit=True) as conn:
        return conn.execute(statement, params).fetchall()


def scalar(statement: str, params: tuple = ()):
    rows = query(statement, params)
    return rows[0][0] if rows else None


def supervisor_pids(host) -> dict[str, int]:
    command = " ".join(bed_state()["supervisorctl"])
    return {program: int(host.check_output(f"{command} pid {program}")) for program in bed_state()["programs"]}


@pytest.fixture
def after_change() -> dict:
    """The pass, in the raise and lower passes; the check pass skips the test."""
    if molecule_pass()["pass"] == "check":
        pytest.skip("checked after a real run only")
    return molecule_pass()


@pytest.fixture
def after_check() -> dict:
    if molecule_pass()["pass"] != "check":
        pytest.skip("checked after the check-mode run only")
    return molecule_pass()


# ---- every pass ----

def test_queue_meta_holds_the_expected_count():
    stored = scalar("SELECT enqueue_shards FROM awa.queue_meta WHERE queue = %s", (QUEUE,))
    # The test bed never writes queue_meta (absent row = 1 shard), so after check mode there is none.
    assert (stored or 1) == molecule_pass()["shards"]
    if molecule_pass()["pass"] == "check":
        assert stored is None


def test_no_ready_job_is_left_at_or_above_the_count():
    # Drained after the lowering (shards 2..7); trivially true after the raise and the check.
    assert scalar(READY_BEYOND_SQL, (QUEUE, molecule_pass()["shards"])) == 0


# ---- after the check-mode run: nothing changed, nothing restarted ----

def test_check_mode_wrote_nothing(host, after_check):
    assert scalar("SELECT to_regnamespace('awa_operations')") is None, "the ledger schema was created"
    provisioned = scalar("SELECT count(*) FROM awa.queue_enqueue_heads WHERE queue = %s AND enqueue_shard > 0",
                         (QUEUE,))
    assert provisioned == 0, "lanes were provisioned"
    assert not host.file(bed_state()["env_file"]).exists, "the environment file was written"


def test_check_mode_restarted_nothing(host, after_check):
    before = runtimes_before()
    assert supervisor_pids(host) == before["pids"]
    assert {row[0] for row in query(LIVE_RUNTIMES_SQL)} == set(before["instance_ids"])


# ---- after the raise and after the lowering ----

def test_every_lane_up_to_the_highest_count_exists_with_its_sequences(after_change):
    # Lanes are never deleted: after the lowering the lanes of 8 shards remain.
    rows = query(
        "SELECT h.priority, h.enqueue_shard FROM awa.queue_enqueue_heads h "
        "JOIN awa.queue_claim_heads c USING (queue, priority, enqueue_shard) "
        "WHERE h.queue = %s AND to_regclass('awa.' || h.seq_name) IS NOT NULL "
        "AND to_regclass('awa.' || c.seq_name) IS NOT NULL", (QUEUE,))
    assert {(p, s) for p in PRIORITIES for s in range(8)} <= set(rows)


def test_runtime_role_may_use_every_lane_sequence(after_change):
    missing = query(
        "SELECT s.seq FROM (SELECT seq_name AS seq FROM awa.queue_enqueue_heads WHERE queue = %(q)s "
        "UNION SELECT seq_name FROM awa.queue_claim_heads WHERE queue = %(q)s) s "
        "WHERE NOT has_sequence_privilege(%(role)s, 'awa.' || s.seq, 'USAGE, SELECT, UPDATE')",
        {"q": QUEUE, "role": bed_state()["runtime_roles"][0]})
    assert missing == []


def test_environment_file_is_rendered_with_owner_and_mode(host, after_change):
    env_file = host.file(bed_state()["env_file"])
    assert env_file.exists
    assert (env_file.user, env_file.group, env_file.mode) == ("root", "root", 0o640)
    lines = env_file.content_string.splitlines()
    assert lines[0].startswith("# ")
    assert ENV_LINE in lines


def test_every_application_was_restarted(host, after_change):
    before = runtimes_before()
    now = supervisor_pids(host)
    live = query(LIVE_RUNTIMES_SQL)
    assert all(now[program] != pid for program, pid in before["pids"].items()), (before["pids"], now)
    assert not {row[0] for row in live} & set(before["instance_ids"]), "a runtime from before is still live"
    assert sorted(row[1] for row in live) == sorted(now.values()), "the live runtimes are the restarted programs"
    assert all(row[3] for row in live), "every live runtime is healthy"


def test_every_live_runtime_converged_on_the_recorded_change(after_change):
    change_id, changed_at, to_shards, live_at_change = query(
        "SELECT id, changed_at, to_shards, live_runtime_ids::text[] FROM awa_operations.enqueue_shards_changes "
        "WHERE %s = ANY(physical_queues) AND (from_shards ->> %s)::int IS DISTINCT FROM to_shards "
        "ORDER BY id DESC LIMIT 1", (QUEUE, QUEUE))[0]
    assert to_shards == after_change["shards"], f"change #{change_id}"
    for instance_id, pid, started_at, dummy in query(LIVE_RUNTIMES_SQL):
        assert instance_id not in live_at_change, f"runtime pid {pid} was live at change #{change_id}"
        assert started_at.timestamp() >= changed_at.timestamp() - CLOCK_MARGIN, f"runtime pid {pid}"
