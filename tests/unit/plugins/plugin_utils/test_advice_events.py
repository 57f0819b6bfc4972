# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which advice the event source awa.operations.shard_advice turns into events, and its arguments.

The advice is the rule's own, on windows recorded from real Awa 0.6.9 load
(module_utils fixtures): contention at S=1 advised to raise to 4 where
shards pay off, an idle queue kept. The ledger's last change is the one a real
read returned right after a change of demo 4 -> 6 (fixtures/info-unconverged.json).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.plugin_utils.advice_events import (
    ERROR_KEY,
    EVENT_KEY,
    AdviceGate,
    advice_event,
    database_time,
    error_event,
    events_for_window,
    recorded_move,
    source_options,
)
from ansible_collections.awa.operations.tests.unit.plugins.module_utils.advice.test_rule import GAINFUL, advised
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.recorded import load

RAISE = advised("contended_insert", 18, "busy", 1, GAINFUL)  # raise 1 -> 4
KEEP = advised("idle", 18, "busy", 1, GAINFUL)
HOUR = 3600.0


def at_count(advice: dict, shards: int, to: int) -> dict:
    """The same advice for a queue that now has ``shards`` (after an event was acted on)."""
    return dict(advice, shards=shards, to=to)


# A real read right after demo was changed 4 -> 6 (by the role): its ledger row is 19 ms older than the read.
CHANGED = load("info-unconverged")
DEMO_RAISE = at_count(RAISE, 6, 12)
DEMO_LOWER = dict(RAISE, verdict="lower", shards=6, to=3)


def read_later(read: dict, seconds: float) -> dict:
    """The same read, ``seconds`` later by the database's clock (the ledger unchanged)."""
    later = datetime.fromisoformat(read["read_at"]) + timedelta(seconds=seconds)
    return dict(read, read_at=later.isoformat())


def test_the_recorded_windows_give_the_verdicts_these_tests_rely_on():
    assert (RAISE["verdict"], RAISE["shards"], RAISE["to"]) == ("raise", 1, 4)
    assert KEEP["verdict"] == "keep"


def test_a_raise_becomes_an_event_only_after_stable_windows_and_moves_one_step():
    gate = AdviceGate(stable=3, cooldown=HOUR)

    first, second = gate.admit("busy", RAISE, 0.0), gate.admit("busy", RAISE, 300.0)
    event = gate.admit("busy", RAISE, 600.0)

    assert first is None and second is None
    assert event is not None
    advice = event[EVENT_KEY]
    assert (advice["queue"], advice["verdict"], advice["shards"], advice["to"], advice["advised_to"]) == (
        "busy", "raise", 1, 2, 4)
    assert advice["actionable"] is True and advice["windows"] == 3
    assert advice["message"] == RAISE["message"] and advice["evidence"] == RAISE["evidence"]


def test_a_quiet_window_breaks_the_streak():
    gate = AdviceGate(stable=2, cooldown=0.0)

    assert gate.admit("busy", RAISE, 0.0) is None
    assert gate.admit("busy", KEEP, 1.0) is None
    assert gate.admit("busy", RAISE, 2.0) is None
    assert gate.admit("busy", RAISE, 3.0) is not None


def test_a_changed_count_starts_a_new_streak():
    gate = AdviceGate(stable=2, cooldown=0.0)

    assert gate.admit("busy", RAISE, 0.0) is None
    # Somebody changed the count to 2 in between: the windows at 1 say nothing about 2.
    assert gate.admit("busy", at_count(RAISE, 2, 4), 1.0) is None
    event = gate.admit("busy", at_count(RAISE, 2, 4), 2.0)
    assert event is not None and (event[EVENT_KEY]["shards"], event[EVENT_KEY]["to"]) == (2, 4)


def test_after_an_event_the_queue_waits_out_the_cooldown_and_twice_it_to_reverse():
    gate = AdviceGate(stable=1, cooldown=HOUR)
    assert gate.admit("busy", RAISE, 0.0) is not None
    raised_again = at_count(RAISE, 2, 4)
    lower = dict(RAISE, verdict="lower", shards=2, to=1)

    assert gate.admit("busy", raised_again, HOUR - 1) is None
    assert gate.admit("busy", lower, HOUR + 1) is None  # the opposite direction waits two cooldowns
    assert gate.admit("busy", lower, 2 * HOUR + 1) is not None
    assert gate.admit("busy", raised_again, 2 * HOUR + 2) is None  # and now a raise is the reversal
    # Another queue is not held by this one's events.
    assert gate.admit("other", RAISE, 1.0) is not None


def test_keep_and_will_not_help_are_never_actionable_but_every_window_shows_them():
    gate = AdviceGate(stable=1, cooldown=0.0)
    will_not_help = dict(RAISE, verdict="will_not_help", to=1, limit="NOTIFY at commit")
    read = {"read_at": "2026-11-30T17:00:00+00:00", "queues": {}}

    quiet = events_for_window(gate, read, {"a": KEEP, "b": will_not_help}, every_window=False)
    shown = events_for_window(gate, read_later(read, 1), {"a": KEEP, "b": will_not_help, "c": RAISE},
                              every_window=True)

    assert quiet == []
    assert [(e[EVENT_KEY]["queue"], e[EVENT_KEY]["verdict"], e[EVENT_KEY]["actionable"]) for e in shown] == [
        ("a", "keep", False), ("b", "will_not_help", False), ("c", "raise", True)]
    assert shown[1][EVENT_KEY]["limit"] == "NOTIFY at commit" and shown[1][EVENT_KEY]["to"] == 1


def test_the_ledgers_last_change_is_the_latest_over_the_physical_queues_and_its_direction():
    assert recorded_move(CHANGED["queues"]["demo"]) == (database_time("2026-11-30T16:55:37.497001+00:00"), "raise")
    striped = {"last_change": {
        "q#0": {"id": 7, "changed_at": "2026-11-30T10:00:00+00:00", "from_shards": 4, "to_shards": 2},
        "q#1": {"id": 9, "changed_at": "2026-11-30T11:00:00+01:00", "from_shards": None, "to_shards": 1},
    }}
    # 11:00+01:00 is 10:00 UTC as well: the later id decides; no queue_meta row before it is Awa's default, 1.
    assert recorded_move(striped) == (database_time("2026-11-30T10:00:00+00:00"), "lower")
    assert recorded_move({"last_change": {}}) is None and recorded_move({}) is None


def test_a_change_recorded_by_hand_holds_a_source_that_never_saw_it_for_the_cooldown():
    # A new gate: a source that was restarted, or never asked for the change.
    gate = AdviceGate(stable=1, cooldown=HOUR)

    assert events_for_window(gate, CHANGED, {"demo": DEMO_RAISE}, every_window=False) == []
    assert events_for_window(gate, read_later(CHANGED, HOUR - 1), {"demo": DEMO_RAISE}, every_window=False) == []
    event = events_for_window(gate, read_later(CHANGED, HOUR), {"demo": DEMO_RAISE}, every_window=False)
    assert [(e[EVENT_KEY]["queue"], e[EVENT_KEY]["shards"], e[EVENT_KEY]["to"]) for e in event] == [("demo", 6, 12)]


def test_reversing_a_change_recorded_by_hand_waits_twice_the_cooldown():
    gate = AdviceGate(stable=1, cooldown=HOUR)

    assert events_for_window(gate, read_later(CHANGED, 2 * HOUR - 1), {"demo": DEMO_LOWER}, every_window=False) == []
    event = events_for_window(gate, read_later(CHANGED, 2 * HOUR), {"demo": DEMO_LOWER}, every_window=False)
    assert [e[EVENT_KEY]["verdict"] for e in event] == ["lower"]


def test_the_held_windows_still_count_toward_stable_and_every_window_shows_them_held():
    gate = AdviceGate(stable=2, cooldown=HOUR)

    held = events_for_window(gate, read_later(CHANGED, 10), {"demo": DEMO_RAISE}, every_window=True)
    assert [(e[EVENT_KEY]["verdict"], e[EVENT_KEY]["actionable"]) for e in held] == [("raise", False)]
    assert events_for_window(gate, read_later(CHANGED, HOUR - 1), {"demo": DEMO_RAISE}, every_window=False) == []
    # Two windows in a row, the second past the cooldown: admitted at once.
    assert len(events_for_window(gate, read_later(CHANGED, HOUR), {"demo": DEMO_RAISE}, every_window=False)) == 1


def test_the_sources_own_event_holds_until_its_change_is_recorded_and_then_the_ledger_does():
    gate = AdviceGate(stable=1, cooldown=HOUR)
    before = dict(CHANGED, queues={"demo": dict(CHANGED["queues"]["demo"], last_change={})})

    assert len(events_for_window(gate, read_later(before, 0), {"demo": DEMO_RAISE}, every_window=False)) == 1
    # The playbook has not recorded its change yet: the source's memory holds the queue.
    assert events_for_window(gate, read_later(before, 60), {"demo": DEMO_RAISE}, every_window=False) == []
    # Restarted (a new gate) once the playbook recorded the change: the ledger holds the queue.
    restarted = AdviceGate(stable=1, cooldown=HOUR)
    assert events_for_window(restarted, read_later(CHANGED, HOUR - 1), {"demo": DEMO_RAISE},
                             every_window=False) == []


@pytest.mark.parametrize(("verdict", "shards", "advised_to", "step"), [
    ("raise", 1, 8, 2), ("raise", 2, 4, 4), ("raise", 4, 6, 6), ("raise", 48, 64, 64),
    ("lower", 8, 1, 4), ("lower", 3, 1, 2), ("lower", 2, 1, 1), ("lower", 8, 6, 6),
])
def test_an_event_moves_one_step_at_most_double_or_half(verdict, shards, advised_to, step):
    event = advice_event("busy", dict(RAISE, verdict=verdict, shards=shards, to=advised_to), actionable=True, windows=1)
    assert (event[EVENT_KEY]["to"], event[EVENT_KEY]["advised_to"]) == (step, advised_to)


def test_arguments_get_the_defaults_and_the_connection_options_of_the_modules():
    options = source_options({"connection": {"login_host": "db", "login_password": "s3cret"}, "queues": ["orders"]})

    assert (options.window, options.interval, options.stable, options.cooldown) == (10.0, 300.0, 3, 3600.0)
    assert options.connection["login_host"] == "db" and options.connection["login_port"] == 5432
    assert options.connection["login_password"] == "s3cret" and options.queues == ["orders"]
    assert source_options({}).queues is None


@pytest.mark.parametrize(("args", "message"), [
    ({"queue": "orders", "login_host": "db"}, "unknown argument(s) login_host, queue of awa.operations.shard_advice"),
    ({"connection": "postgres://db"}, "connection must be a mapping of the modules' connection options"),
    ({"connection": {"host": "db"}}, "unknown connection option(s) host; the options are ca_cert, connect_params"),
    ({"queues": "orders"}, "queues must be a non-empty list of queue names"),
    ({"queues": []}, "queues must be a non-empty list of queue names"),
    ({"queues": ["a#1"]}, "contains '#'"),
    ({"stable": 0}, "stable must be a whole number of windows between 1 and 1000, got 0"),
    ({"stable": "3"}, "stable must be a whole number"),
    ({"window": 0.5}, "window must be a number of seconds between 1 and 600, got 0.5"),
    ({"window": 30, "interval": 10}, "interval must be a number of seconds between 30 and 86400, got 10"),
    ({"cooldown": -1}, "cooldown must be a number of seconds between 0 and 2.592e+06"),
    ({"lock_timeout": True}, "lock_timeout must be a number of seconds"),
    ({"every_window": "yes"}, "every_window must be true or false"),
    ({"gains": {"insert": {}}}, "advise_gains must be a gains table"),
])
def test_bad_arguments_are_refused_with_what_to_give(args, message):
    with pytest.raises(InvalidRequest) as refused:
        source_options(args)
    assert message in refused.value.message


def test_an_unreadable_window_is_an_error_event_saying_when_it_is_tried_again():
    assert error_event("could not connect", 300.0) == {
        ERROR_KEY: {"message": "could not connect", "retry_in_seconds": 300.0}}
