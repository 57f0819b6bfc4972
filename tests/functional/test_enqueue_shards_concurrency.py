"""awa_enqueue_shards when runs overlap or die: serialized, all-or-nothing, re-runnable."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.errors import DatabaseError

from enqueue_shards_support import (
    Run,
    backend_waiting_on_lock,
    change,
    complete_lanes,
    lanes_below,
    ledger_rows,
    run_together,
    session_holding,
    shard_counts,
    snapshot,
    wait_until,
)


def test_concurrent_runs_with_one_target_serialize_and_exactly_one_changes(awa_db):
    results = run_together(awa_db, "race", [8, 8])

    assert sorted(result["changed"] for result in results) == [False, True]
    assert shard_counts(awa_db) == {"race": 8}
    assert complete_lanes(awa_db, "race") == lanes_below(8)
    assert len(ledger_rows(awa_db)) == 1


@pytest.mark.parametrize("targets", [[4, 8], [8, 4]], ids=["4-and-8", "8-and-4"])
def test_concurrent_runs_with_different_targets_end_in_one_of_them_on_every_stripe(awa_db, targets):
    results = run_together(awa_db, "race", targets, stripes=2)

    assert all(result["changed"] for result in results)
    final = shard_counts(awa_db)
    assert len(set(final.values())) == 1, f"the stripes disagree: {final}"
    first, second = (row for row in ledger_rows(awa_db))
    assert first["from_shards"] == {"race#0": 1, "race#1": 1}, "the first run found the original count"
    assert second["from_shards"] == dict.fromkeys(final, first["to_shards"]), "the second run saw the first's result"
    assert set(final.values()) == {second["to_shards"]}
    for queue in final:
        assert complete_lanes(awa_db, queue) >= lanes_below(max(targets))


def test_a_run_terminated_mid_apply_leaves_the_old_state_and_a_rerun_converges(awa_db):
    change(awa_db, "term", 2)
    before = snapshot(awa_db)
    with session_holding(awa_db, "SELECT 1 FROM awa.queue_meta WHERE queue = %s FOR UPDATE", "term"):
        run = Run(awa_db, "term", 8, lock_timeout=0)
        run.start()
        pid = wait_until(lambda: backend_waiting_on_lock(awa_db), 10, "the run to wait for the queue_meta row")
        waiting_in = awa_db.scalar("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,))
        assert waiting_in.startswith("INSERT INTO awa.queue_meta"), "it has provisioned and waits to switch"
        assert awa_db.scalar("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(DatabaseError) as failure:
            run.outcome()
    assert "connection was lost" in failure.value.message and "nothing was changed" in failure.value.message
    assert snapshot(awa_db) == before, "the terminated run left something behind"

    rerun = change(awa_db, "term", 8)
    assert (rerun["changed"], rerun["previous_shards"], rerun["lanes_created"]) == (True, {"term": 2}, 24)
    assert complete_lanes(awa_db, "term") == lanes_below(8)
    assert change(awa_db, "term", 8)["changed"] is False
