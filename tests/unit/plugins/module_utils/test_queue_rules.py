# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest, PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.queue_rules import (
    logical_queue,
    never_seen,
    ordering_contract,
    physical_queues,
    resolve_stripes,
    stripe_index,
    MAX_SHARDS,
    MIN_SHARDS,
    validate_count,
    validate_queue_name,
)


@pytest.mark.parametrize("name", ["orders", "o'rders", 'a "quoted" name', "with space", "ünïcødé-队列",
                                  "x); DROP TABLE awa.queue_meta; --", "q" * 255])
def test_queue_names_awa_can_store_are_accepted_literally(name):
    assert validate_queue_name(name) == name


@pytest.mark.parametrize("name, fragment", [
    ("", "non-empty"),
    ("   ", "non-empty"),
    ("q" * 256, "at most 255"),
    ("orders#1", "stripe suffix"),
    ("bad\x00name", r"U\+0000"),
    ("line\nbreak", r"U\+000A"),
    (7, "must be a string"),
    (None, "must be a string"),
])
def test_bad_queue_names_are_refused_with_what_to_do(name, fragment):
    with pytest.raises(InvalidRequest, match=fragment):
        validate_queue_name(name)


@pytest.mark.parametrize("value", [1, 2, 63, 64])
def test_shards_in_range(value):
    assert validate_count("shards", value, MIN_SHARDS, MAX_SHARDS) == value


@pytest.mark.parametrize("value", [0, -1, 65, 1000, True, False, 2.5, "8", None])
def test_shards_outside_range_or_not_integers_are_refused(value):
    with pytest.raises(InvalidRequest, match="shards must be"):
        validate_count("shards", value, MIN_SHARDS, MAX_SHARDS)


def test_physical_queues_follow_awa_stripe_names():
    assert physical_queues("q", 1) == ["q"]
    assert physical_queues("q", 3) == ["q#0", "q#1", "q#2"]


@pytest.mark.parametrize("physical, expected", [
    ("q#0", 0), ("q#12", 12), ("q", None), ("q#", None), ("q#01", None), ("q#x", None),
    ("qq#1", None), ("q#1#2", None), ("q#²", None),
])
def test_stripe_index_only_for_canonical_suffixes(physical, expected):
    assert stripe_index("q", physical) == expected


def test_logical_queue_strips_a_numeric_suffix_only():
    assert logical_queue("orders#3") == "orders"
    assert logical_queue("orders") == "orders"
    assert logical_queue("a#b") == "a#b"


def test_ordering_contract_names_the_fifo_promise():
    assert ordering_contract(1).startswith("strict FIFO")
    assert "8 shards" in ordering_contract(8)


@pytest.mark.parametrize("requested, known, expected", [
    (None, [], 1),
    (None, ["q"], 1),
    (None, ["q#0", "q#1"], 2),
    (3, [], 3),
    (2, ["q#0", "q#1", "other#5"], 2),
])
def test_stripes_are_requested_or_detected(requested, known, expected):
    assert resolve_stripes("q", requested, known).stripes == expected


@pytest.mark.parametrize("requested, known, fragment", [
    (3, ["q#0", "q#1"], "stored with 2 stripes"),
    (1, ["q#0", "q#1"], "stored with 2 stripes"),
    (None, ["q#0", "q#2"], "not q#0..q#2"),
])
def test_stripes_that_disagree_with_storage_are_errors(requested, known, fragment):
    with pytest.raises(PreconditionFailed, match=fragment):
        resolve_stripes("q", requested, known)


def test_unstriped_leftovers_of_a_striped_queue_are_a_warning():
    layout = resolve_stripes("q", None, ["q", "q#0", "q#1"])
    assert layout.stripes == 2
    assert "never claim" in layout.warnings[0]


@pytest.mark.parametrize("queue, stored, said", [
    ("ordres", ["orders", "events#0", "events#1"], "(did you mean orders?)"),
    ("order", ["orders", "orders_dlq", "events"], "(did you mean orders or orders_dlq?)"),
    ("evnets", ["orders", "events#0", "events#1"], "(did you mean events?)"),
    ("invoices", ["orders", "events"], "serving it"),
    ("orders", [], "serving it"),
], ids=["typo", "two-close", "striped", "none-close", "empty-database"])
def test_a_queue_the_database_has_never_seen_is_named_with_the_known_queues_closest_to_it(queue, stored, said):
    text = never_seen(queue, stored)
    assert text.startswith(f"the database has never seen queue {queue!r} - no awa.queue_meta row, no lanes, no jobs "
                           "and no runtime serving it")
    assert text.endswith(said)
