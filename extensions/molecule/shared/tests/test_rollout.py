"""Molecule verify: what awa.operations.enqueue_shards left behind, read from the real database and processes.

Molecule runs these tests after each of three passes; ``molecule-pass.json``
in the test bed's state folder says which one and what count to expect:

* ``check``: the playbook ran with --check --diff and must have changed nothing
  (no count, lane, grant, ledger or environment file) and restarted nothing;
* ``raise``: queue demo went 1 -> 8 with a rolling restart;
* ``lower``: queue demo went 8 -> 2 and the shards 2..7 drained.
"""

from __future__ import annotations

import pytest
from awa_testbed import queue_facts
from awa_testbed.verify_state import bed_state, molecule_pass, read_json

QUEUE = "demo"
PRIORITIES = (1, 2, 3, 4)
ENV_LINE = "AWA_OVERRIDE_REFRESH_MS=1000"
# The role's default clock margin (seconds) between runtime hosts and the database.
CLOCK_MARGIN = 5


def runtimes_before() -> dict:
    return read_json(f"runtimes-{molecule_pass()['runtimes_before']}.json")


def query(statement: str, params: tuple = ()) -> list[tuple]:
    return queue_facts.query(bed_state()["superuser_dsn"], statement, params)


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
    assert queue_facts.ready_beyond(bed_state()["superuser_dsn"], QUEUE, molecule_pass()["shards"]) == 0


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
    assert {r.instance_id for r in queue_facts.live_runtimes(bed_state()["superuser_dsn"])} == set(before["instance_ids"])


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
    live = queue_facts.live_runtimes(bed_state()["superuser_dsn"])
    assert all(now[program] != pid for program, pid in before["pids"].items()), (before["pids"], now)
    assert not {r.instance_id for r in live} & set(before["instance_ids"]), "a runtime from before is still live"
    assert sorted(r.pid for r in live) == sorted(now.values()), "the live runtimes are the restarted programs"
    assert all(r.healthy for r in live), "every live runtime is healthy"


def test_every_live_runtime_converged_on_the_recorded_change(after_change):
    change = queue_facts.last_count_change(bed_state()["superuser_dsn"], QUEUE)
    assert change.to_shards == after_change["shards"], f"change #{change.change_id}"
    for runtime in queue_facts.live_runtimes(bed_state()["superuser_dsn"]):
        assert queue_facts.converged_on(change, runtime, CLOCK_MARGIN), f"runtime pid {runtime.pid}"
