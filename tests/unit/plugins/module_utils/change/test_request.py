# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The request, validated before anything touches the database."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request, validate_requests


@pytest.mark.parametrize("roles", [[""], ["a", "a"], [None]])
def test_bad_runtime_roles_are_refused(roles):
    with pytest.raises(InvalidRequest, match="runtime_roles"):
        validate_request("q", 2, None, roles)


def test_validate_requests_checks_every_entry_like_a_single_change():
    requests = validate_requests([{"queue": "orders", "shards": 8}, {"queue": "events", "shards": 4, "stripes": 2},
                                  {"queue": "refunds", "shards": 2, "new_queue": True}],
                                 runtime_roles=["awa_runtime"])
    assert [(r.queue, r.shards, r.stripes, r.runtime_roles, r.new_queue) for r in requests] == [
        ("orders", 8, None, ("awa_runtime",), False), ("events", 4, 2, ("awa_runtime",), False),
        ("refunds", 2, None, ("awa_runtime",), True)]


def test_a_new_queue_is_never_the_default_and_only_a_boolean_asks_for_one():
    assert validate_request("orders", 8).new_queue is False
    assert validate_request("orders", 8, new_queue=True).new_queue is True
    for value in ("yes", "no", 1):
        with pytest.raises(InvalidRequest, match=f"new_queue must be true or false, got {value!r}"):
            validate_request("orders", 8, new_queue=value)


@pytest.mark.parametrize("entries, message", [
    ([], "non-empty list"),
    ("orders", "non-empty list"),
    ([{"queue": "orders"}], "needs queue and shards"),
    ([{"queue": "orders", "shards": 65}], "between 1 and 64"),
    ([{"queue": "orders", "shards": 8}, {"queue": "orders", "shards": 4}], "more than once: 'orders'"),
])
def test_validate_requests_refuses_a_bad_list(entries, message):
    with pytest.raises(InvalidRequest, match=message):
        validate_requests(entries)
