"""A live result of awa_enqueue_shards_info, held against its declaration (module_utils/info/result.py).

One read on PostgreSQL 17 and 18 of a queue in which every part of the
result has something to say: a lowering recorded in the ledger (4 -> 2) with
ready jobs left on the old shards, a runtime that was live at the change (a
straggler), a runtime role lacking a grant, and advice from a window of
load. Every key and every value's type must be as declared: a key renamed
in ``info.views`` or a column that comes back as another type fails here.

With ``AWA_RECORD_FIXTURES=1`` the reads are also written to
tests/unit/plugins/module_utils/fixtures/info-live-pg<major>.json, which the
unit test of the declaration holds against the RETURN documentation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from awa_testbed.environment import wait_for_live_runtimes

from ansible_collections.awa.operations.plugins.module_utils.db.connection import open_connection
from ansible_collections.awa.operations.plugins.module_utils.info_run import add_advice, advise_queues
from ansible_collections.awa.operations.plugins.module_utils.info.result import ShardsInfo

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.declared import value_problems

from enqueue_shards_support import change, info

QUEUE = "declared"
FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "plugins" / "module_utils" / "fixtures"


def test_a_live_read_with_advice_is_the_declared_result(awa_db, fleet, pg_major):
    awa_db.setup_least_privilege(runtime_count=2)
    runtime1, runtime2 = awa_db.roles["runtime1"].name, awa_db.roles["runtime2"].name
    # Live through the change, on another queue: a straggler of this one, and nothing claims its jobs.
    worker = fleet.worker("w", ["elsewhere"], role="runtime1")
    wait_for_live_runtimes(awa_db, [worker.pid], 30)
    change(awa_db, QUEUE, 4, role="migrator", runtime_roles=[runtime1])
    fleet.producer("p", QUEUE, role="runtime1", mode="enqueue_many_copy", keyed=True, batch=10, count=40,
                   rate=0).wait(60)
    change(awa_db, QUEUE, 2, role="migrator", runtime_roles=[runtime1])

    read = info(awa_db, role="migrator", queue=QUEUE, runtime_roles=[runtime1, runtime2])
    with open_connection(awa_db.login_args("migrator")) as conn:
        add_advice(read, advise_queues(conn, read, 1.0, 5.0))

    view = read["queues"][QUEUE]
    assert view["stragglers"] and view["last_change"] and view["grants"]["missing"] and view["depth_beyond_count"]
    assert any(lane["oldest_ready_age_seconds"] for lane in view["lanes"]) and read["advice"][QUEUE]["evidence"]
    assert value_problems(read, ShardsInfo) == []
    if os.environ.get("AWA_RECORD_FIXTURES"):
        (FIXTURES / f"info-live-pg{pg_major}.json").write_text(json.dumps(read, indent=1) + "\n", encoding="utf-8")
