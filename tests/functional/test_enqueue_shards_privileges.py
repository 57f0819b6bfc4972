"""Least privilege: the module run by Awa's migrator role, for two runtime roles.

Roles as in Awa's docs/security.md (owner, migrator, runtime1, runtime2), plus
the CREATE on schema awa that Awa 0.6.9's lane triggers need (docs/awa-internals.md §7).
"""

from __future__ import annotations

from psycopg import sql

from ansible_collections.awa.operations.plugins.module_utils.errors import PreconditionFailed

from enqueue_shards_support import (
    change,
    complete_lanes,
    completed_shards,
    lanes_below,
    ledger_rows,
    refused,
    sequence_owners,
)

# Jobs over 97 ordering keys: every shard of the queue gets some.
KEYED = {"mode": "enqueue_many_copy", "keyed": True, "batch": 20, "rate": 0}


def test_the_migrator_provisions_lanes_both_runtime_roles_use_including_one_a_runtime_created(awa_db, fleet):
    awa_db.setup_least_privilege(runtime_count=2)
    roles = {key: awa_db.roles[key].name for key in ("migrator", "runtime1", "runtime2")}
    runtime_roles = [roles["runtime1"], roles["runtime2"]]

    # runtime1 enqueues first: it creates lane (priority 2, shard 0) lazily, as its own.
    fleet.producer("first", "lp", role="runtime1", rate=0, count=5).wait(30)
    assert sequence_owners(awa_db, "lp") == {roles["runtime1"]}

    not_member = refused(awa_db, "lp", 4, role="migrator", runtime_roles=runtime_roles)
    assert isinstance(not_member, PreconditionFailed)
    assert f"other roles own them: {roles['runtime1']} (1 lanes)" in not_member.message
    assert f"GRANT <owner> TO {roles['migrator']}" in not_member.message

    awa_db.query(sql.SQL("GRANT {} TO {}").format(sql.Identifier(roles["runtime1"]), sql.Identifier(roles["migrator"])))
    result = change(awa_db, "lp", 4, role="migrator", runtime_roles=runtime_roles)

    # 15 new lanes x 2 sequences x 2 roles, and runtime2 on runtime1's lane's 2 sequences.
    assert (result["changed"], result["lanes_created"], result["grants_added"]) == (True, 15, 62)
    assert result["diff"]["after"]["lp"]["missing_grants"] == 0
    assert complete_lanes(awa_db, "lp") == lanes_below(4)
    assert ledger_rows(awa_db)[-1]["changed_by"] == roles["migrator"]
    assert not awa_db.scalar("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (roles["migrator"],))
    assert change(awa_db, "lp", 4, role="migrator", runtime_roles=runtime_roles)["changed"] is False

    # Each runtime role enqueues on every shard, and each alone claims everything.
    for runtime in ("runtime1", "runtime2"):
        fleet.producer(f"{runtime}-producer", "lp", role=runtime, count=80, **KEYED).wait(60)
    fleet.worker("runtime2-worker", ["lp=4"], role="runtime2")
    first_round = fleet.enqueued_tags("lp")
    fleet.wait_all_completed(first_round, timeout=60)
    fleet.members["runtime2-worker"].stop()
    fleet.producer("runtime1-again", "lp", role="runtime1", count=80, **KEYED).wait(60)
    fleet.worker("runtime1-worker", ["lp=4"], role="runtime1")
    counts = fleet.wait_all_completed(fleet.enqueued_tags("lp"), timeout=60)

    assert fleet.producer_errors() == []
    assert set(counts.values()) == {1}
    by_worker = dict(awa_db.query("SELECT worker, count(*) FROM testbed.completions GROUP BY 1"))
    assert by_worker == {"runtime2-worker": len(first_round), "runtime1-worker": 80}
    assert completed_shards(awa_db, "lp") == {0, 1, 2, 3}
    assert awa_db.scalar("SELECT count(*) FROM testbed.completions WHERE starts_with(tag, 'first-') "
                         "AND worker = 'runtime2-worker'") == 5, "runtime2 claimed from runtime1's own lane"


def test_awa_0_6_9_runtimes_also_need_create_on_schema_awa(awa_db, fleet):
    """With only the grants of Awa's docs/security.md, runtimes cannot enqueue even on
    lanes the module provisioned and granted: 0.6.9's head trigger runs CREATE SEQUENCE
    IF NOT EXISTS for every insert (docs/awa-internals.md §7)."""
    awa_db.setup_least_privilege(runtime_count=1, awa_0_6_9_schema_create=False)
    runtime = awa_db.roles["runtime1"].name
    result = change(awa_db, "docs", 2, role="migrator", runtime_roles=[runtime])
    # Awa's default privileges give the runtime USAGE, SELECT on the migrator's new
    # sequences; the module adds the UPDATE that setval needs, on all 16.
    assert result["grants_added"] == 16
    assert awa_db.scalar(
        "SELECT bool_and(has_sequence_privilege(%s, c.oid, 'USAGE, SELECT, UPDATE')) FROM pg_class AS c "
        "WHERE c.relkind = 'S' AND c.relnamespace = 'awa'::regnamespace AND c.relname ~ '^queue_(enqueue|claim)_seq_'",
        (runtime,))

    fleet.producer("documented", "docs", role="runtime1", rate=0, count=2).wait(30)
    errors = fleet.producer_errors()
    assert len(errors) == 2 and all("permission denied for schema awa" in message for dummy, dummy2, message in errors)

    awa_db.query(sql.SQL("GRANT CREATE ON SCHEMA awa TO {}").format(sql.Identifier(runtime)))
    fleet.producer("with-create", "docs", role="runtime1", rate=0, count=2).wait(30)
    assert len(fleet.producer_errors()) == 2, "with CREATE on the schema it enqueues"
    assert len(fleet.enqueued_tags("docs")) == 2


def test_the_ledger_can_live_in_a_schema_an_administrator_prepared(awa_db):
    """No CREATE on the database: an administrator creates schema awa_operations for the migrator."""
    awa_db.setup_least_privilege(runtime_count=1)
    migrator = awa_db.roles["migrator"].name
    awa_db.query(sql.SQL("REVOKE CREATE ON DATABASE {} FROM {}").format(
        sql.Identifier(awa_db.name), sql.Identifier(awa_db.roles["owner"].name)))
    refusal = refused(awa_db, "orders", 2, role="migrator")
    assert f"GRANT CREATE ON DATABASE {awa_db.name} TO {migrator}" in refusal.message

    awa_db.query(sql.SQL("CREATE SCHEMA awa_operations AUTHORIZATION {}").format(sql.Identifier(migrator)))
    result = change(awa_db, "orders", 2, role="migrator")

    assert result["changed"] and result["ledger"]["id"] == 1
    assert [row["changed_by"] for row in ledger_rows(awa_db)] == [migrator]
