"""awa_enqueue_shards_info's advice (advise: true) on real load, on PostgreSQL 17 and 18.

Real awa-pg 0.6.9 producers and worker runtimes load a queue while the
module watches it: a queue whose SQL-insert producers contend on its one
lane (behind a session that holds the lane's lock most of the time, so the
waits do not depend on how busy the CPU is: lane_holder.py), an idle queue,
and copy-path producers that land on one shard of four. What is asserted is
the verdict and the evidence an operator reads, never a rate or a time.
"""

from __future__ import annotations

import secrets

from psycopg import sql

from ansible_collections.awa.operations.plugins.module_utils.advice import rule
from ansible_collections.awa.operations.plugins.module_utils.db.connection import open_connection
from ansible_collections.awa.operations.plugins.module_utils.info_run import add_advice, advise_queues

from awa_testbed import queue_facts
from awa_testbed.awadb import DbRole

from enqueue_shards_support import ansible_command, change, info, wait_until
from lane_holder import LaneHolder

WINDOW = 3.0
# A gains table of a machine where shards pay off (the shape of Awa's ADR-025 sweep): with it, contention at
# S=1 must be advised to raise, to the smallest count near the best gain.
GAINFUL = {"gains": {"insert": {str(n): {"1": 1.0, "2": 1.6, "4": 2.75, "8": 2.8} for n in (1, 2, 4, 8, 16)}}}


def advise(db, queue: str, measured: dict | None = None, role: str | None = None) -> dict:
    read = info(db, role, queue=queue)
    with open_connection(db.login_args(role)) as conn:
        add_advice(read, advise_queues(conn, read, WINDOW, 5.0, measured))
    return read


def enqueued(db, queue: str) -> int:
    return queue_facts.enqueued(db.dsn(), queue)


def contend(fleet, queue: str) -> None:
    """SQL inserters on the queue's lane, as fast as they can, behind a session that holds its lock most of the time
    (lane_holder.py): they wait on the lane's lock in every sample, however busy the 2 cores are."""
    fleet.producer("contender", queue, mode="insert", rate=0, concurrency=4, connections=4, record_enqueued=False)
    fleet.attach(LaneHolder(fleet.db.dsn(), queue).start())


def loaded(db, queue: str, jobs: int = 200) -> None:
    wait_until(lambda: enqueued(db, queue) >= jobs, 60, f"{jobs} jobs enqueued into {queue}")


def test_contention_on_one_lane_is_advised_by_the_measured_table(awa_db, fleet):
    change(awa_db, "busy", 1)
    fleet.worker("w", ["busy=64"])
    contend(fleet, "busy")
    loaded(awa_db, "busy")

    gainful = advise(awa_db, "busy", GAINFUL)["advice"]["busy"]
    shipped = advise(awa_db, "busy")["advice"]["busy"]

    for verdict in (gainful, shipped):
        evidence = verdict["evidence"]
        assert evidence["path"] == "insert" and evidence["enqueued_by_shard"] == {"0": evidence["enqueued_by_shard"]["0"]}
        assert evidence["lane_lock_waiters"] >= rule.CONTENDED, verdict
        assert evidence["concurrent_enqueuers"] >= 2
    assert (gainful["verdict"], gainful["to"]) == ("raise", 4), gainful["message"]
    assert gainful["message"].startswith("busy: raise enqueue_shards 1 -> 4.")
    assert "per-key FIFO does not hold" in gainful["ordering"]
    # The shipped table is this project's measurement: raise only where it measured x1.3 at this load.
    row = {int(s): gain for s, gain in shipped["evidence"]["measured_row"]["gains"].items()}
    if rule.raise_target(row, 1) is None:
        assert shipped["verdict"] == "will_not_help" and shipped["limit"], shipped["message"]
        assert shipped["message"].startswith(f"busy: sharding will not help: the limit is {shipped['limit']}.")
    else:
        assert (shipped["verdict"], shipped["to"]) == ("raise", rule.raise_target(row, 1))


# What docs/enqueue_shards_info.md ("Advising a shard count") tells operators to grant a monitoring role.
MONITOR_GRANTS = """
GRANT CONNECT ON DATABASE {database} TO {monitor};
GRANT USAGE ON SCHEMA awa TO {monitor};
GRANT SELECT ON ALL TABLES IN SCHEMA awa TO {monitor};
GRANT SELECT ON ALL SEQUENCES IN SCHEMA awa TO {monitor};
GRANT USAGE ON SCHEMA awa_operations TO {monitor};
GRANT SELECT ON ALL TABLES IN SCHEMA awa_operations TO {monitor};
"""


def test_a_monitoring_role_advises_with_pg_monitor_and_is_told_the_grant_without_it(awa_db, fleet):
    change(awa_db, "watched", 1)
    monitor = DbRole(f"{awa_db.name}_monitor", secrets.token_urlsafe(12))
    awa_db.roles["monitor"] = monitor
    names = {"database": sql.Identifier(awa_db.name), "monitor": sql.Identifier(monitor.name)}
    awa_db.query(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(names["monitor"], sql.Literal(monitor.password)))
    awa_db.query(sql.SQL(MONITOR_GRANTS).format(**names))
    fleet.worker("w", ["watched=64"])
    contend(fleet, "watched")
    loaded(awa_db, "watched")

    unprivileged = advise(awa_db, "watched", GAINFUL, role="monitor")
    awa_db.query(sql.SQL("GRANT pg_monitor TO {}").format(names["monitor"]))
    privileged = advise(awa_db, "watched", GAINFUL, role="monitor")

    # pg_locks is readable by any role: the lane-lock waits are seen either way.
    for read in (unprivileged, privileged):
        assert read["advice"]["watched"]["evidence"]["lane_lock_waiters"] >= rule.CONTENDED
        assert read["advice"]["watched"]["evidence"]["enqueued_by_shard"]["0"] > 0
    assert unprivileged["advice"]["watched"]["evidence"]["hidden_backend_samples"] > 0
    assert any("grant it pg_monitor" in finding for finding in unprivileged["findings"])
    assert privileged["advice"]["watched"]["evidence"]["hidden_backend_samples"] == 0
    assert not any("pg_monitor" in finding for finding in privileged["findings"])
    assert (privileged["advice"]["watched"]["verdict"], privileged["advice"]["watched"]["to"]) == ("raise", 4)


def test_an_idle_queue_is_kept(awa_db, fleet):
    change(awa_db, "idle", 2)
    fleet.worker("w", ["idle=4"])

    verdict = advise(awa_db, "idle")["advice"]["idle"]

    assert (verdict["verdict"], verdict["to"]) == ("keep", 2)
    assert verdict["evidence"]["enqueued_per_s"] == 0 and verdict["evidence"]["lane_lock_waiters"] == 0
    assert "nothing to judge" in verdict["message"]


def test_copy_producers_without_a_key_land_on_one_shard_and_the_advice_says_why(awa_db, fleet):
    change(awa_db, "bulk", 4)
    fleet.worker("w", ["bulk=64"])
    fleet.producer("p", "bulk", mode="enqueue_many_copy", batch=20, rate=0, concurrency=2, connections=2,
                   record_enqueued=False)
    loaded(awa_db, "bulk")

    read = advise(awa_db, "bulk")
    verdict = read["advice"]["bulk"]

    assert verdict["verdict"] == "keep", verdict["message"]
    assert {s for s, n in verdict["evidence"]["enqueued_by_shard"].items() if n} == {"0"}
    assert verdict["evidence"]["busiest_shard_share"] == 1
    finding = next(f for f in read["findings"] if "went to shard 0 of 4" in f)
    assert "enqueue_many_copy without an ordering_key always writes shard 0" in finding
    assert any(line.startswith("advice: bulk: keep enqueue_shards 4.") for line in read["summary_lines"])


def test_the_module_advises_from_a_playbook_and_refuses_advice_with_a_wait(awa_db, tmp_path):
    change(awa_db, "quiet", 1)
    connection = awa_db.login_args()
    playbook = tmp_path / "advise.yml"
    playbook.write_text(f"""
- hosts: localhost
  gather_facts: false
  module_defaults:
    group/awa.operations.awa: {connection!r}
  tasks:
    - name: Advise
      awa.operations.awa_enqueue_shards_info:
        queue: quiet
        advise: true
        advise_window: 1
      register: advised
    - name: Show
      ansible.builtin.debug:
        msg: "VERDICT={{{{ advised.advice.quiet.verdict }}}} TO={{{{ advised.advice.quiet.to }}}}"
    - name: Advise and wait
      awa.operations.awa_enqueue_shards_info:
        queue: quiet
        advise: true
        wait: converged
""", encoding="utf-8")

    process = ansible_command("ansible-playbook", str(playbook))

    assert "VERDICT=keep TO=1" in process.stdout, process.stdout + process.stderr
    assert "give advise or wait=converged, not both (run them as two tasks)" in process.stdout + process.stderr
    assert process.returncode != 0
