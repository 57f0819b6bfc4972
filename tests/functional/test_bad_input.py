"""Property-based: any queue name and shard value, applied to a real Awa database.

Every input is either applied literally and correctly, or refused with a clear
message and nothing written; the Awa schema itself is never damaged. (The
Ansible type-conversion layer in front of this is covered, without a
database, by tests/unit/plugins/modules/test_awa_enqueue_shards.py.)
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest

from enqueue_shards_support import CATALOG_SQL, change, complete_lanes, lanes_below, refused

SQL_FRAGMENTS = ["'", '"', "\\", ";", "--", "/*", "$$", "%s", "%(x)s", "{}", "DROP TABLE awa.queue_meta",
                 "\u00a0", "\t", " ", "队列", "é", "\U0001f680", "#"]
queue_names = st.one_of(
    st.text(min_size=1, max_size=1000),
    st.text(st.characters(exclude_categories=("Cc", "Cs"), exclude_characters="#"), min_size=1, max_size=300),
    st.lists(st.sampled_from(SQL_FRAGMENTS + ["q", "orders"]), min_size=1, max_size=30).map("".join),
)
# Valid counts are drawn often enough that many examples are really applied.
shard_values = st.one_of(st.integers(min_value=1, max_value=64), st.integers(min_value=-5, max_value=70),
                         st.integers(), st.text(max_size=4), st.floats(allow_nan=True), st.none(), st.booleans())

DEFINITIONS_SQL = """
SELECT p.oid::regprocedure::text, md5(pg_get_functiondef(p.oid)) FROM pg_proc AS p
WHERE p.pronamespace = 'awa'::regnamespace AND p.prokind = 'f' ORDER BY 1
"""


def awa_schema(db) -> tuple:
    """Awa's own objects: relations (not lane sequences) and function bodies."""
    relations = [row for row in db.query(CATALOG_SQL)
                 if row[0] == "awa" and not (row[2] or "").startswith(("queue_enqueue_seq_", "queue_claim_seq_"))]
    return relations, db.query(DEFINITIONS_SQL)


@pytest.fixture
def schema_before(awa_db) -> tuple:
    return awa_schema(awa_db)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          database=None)
@given(queue=queue_names, shards=shard_values)
def test_any_input_is_applied_literally_or_refused_cleanly(awa_db, schema_before, queue, shards):
    valid_shards = isinstance(shards, int) and not isinstance(shards, bool) and 1 <= shards <= 64
    try:
        result = change(awa_db, queue, shards)
    except InvalidRequest:
        event("refused")
        error = refused(awa_db, queue, shards)
        assert not valid_shards or "queue" in error.message, error.message
        assert error.message.startswith(("queue", "shards")), error.message
    else:
        event("applied")
        assert valid_shards
        assert result["queue"] == queue and result["physical_queues"] == [queue]
        effective = awa_db.scalar("SELECT coalesce((SELECT enqueue_shards FROM awa.queue_meta WHERE queue = %s), 1)",
                                  (queue,))
        assert effective == shards
        assert complete_lanes(awa_db, queue) >= lanes_below(shards)
    assert awa_schema(awa_db) == schema_before, "the Awa schema changed"
