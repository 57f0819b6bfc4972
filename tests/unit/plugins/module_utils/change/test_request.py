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
    requests = validate_requests([{"queue": "orders", "shards": 8}, {"queue": "events", "shards": 4, "stripes": 2}],
                                 runtime_roles=["awa_runtime"])
    assert [(r.queue, r.shards, r.stripes, r.runtime_roles) for r in requests] == [
        ("orders", 8, None, ("awa_runtime",)), ("events", 4, 2, ("awa_runtime",))]


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
