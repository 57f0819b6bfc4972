# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module's input handling: Ansible's type conversion, then ours. No database needed:
every refusal happens before a connection is opened."""

from __future__ import annotations

import json
import math

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.awa.operations.tests.unit.plugins.module_args import patch_module_args
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.awa.operations.plugins.module_utils.errors import InvalidRequest
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request
from ansible_collections.awa.operations.plugins.modules import awa_enqueue_shards
from ansible_collections.awa.operations.tests.unit.plugins.module_utils.infinite_ints import (
    core_takes_integral_floats,
    infinite_int_refusal,
)

SQL_FRAGMENTS = ["'; DROP TABLE awa.queue_meta; --", '"', "\\", "$$", "%s", "{}", "\u00a0", "队列", "e\u0301"]
queue_names = st.one_of(
    st.text(min_size=0, max_size=1000),
    st.lists(st.sampled_from(SQL_FRAGMENTS + [" ", "q", "#"]), min_size=1, max_size=20).map("".join),
)
shard_values = st.one_of(st.integers(), st.text(max_size=5), st.floats(allow_nan=True), st.none(), st.booleans(),
                         st.sampled_from(["8", "8.0", " 8", "0x8", "1e1"]))


def converted(queue: object, shards: object) -> tuple[dict | None, list[str]]:
    """What Ansible makes of the raw options (argument_spec types), and its error messages."""
    spec = awa_enqueue_shards.argument_spec()
    try:
        result = ArgumentSpecValidator(spec).validate({"queue": queue, "shards": shards})
    except OverflowError:
        # ansible-core's int check crashes on infinities (a float, or a string such as "INF") up to 2.21;
        # build_module turns that into a clear failure (test_the_module_refuses_bad_input_before_connecting).
        assert math.isinf(float(shards))
        return None, ["shards must be a finite integer"]
    return result.validated_parameters, [str(error) for error in result.errors]


@settings(max_examples=200, deadline=None)
@given(queue=queue_names, shards=shard_values)
def test_every_input_is_either_accepted_literally_or_refused_with_a_clear_message(queue, shards):
    params, errors = converted(queue, shards)
    if errors:
        assert any("queue" in error or "shards" in error for error in errors), errors
        return
    try:
        request = validate_request(params["queue"], params["shards"])
    except InvalidRequest as refusal:
        assert refusal.message.startswith(("queue", "shards")), refusal.message
        return
    assert request.queue == queue, "accepted names are used exactly as given"
    assert 1 <= request.shards <= 64 and isinstance(request.shards, int) and not isinstance(request.shards, bool)


# ansible-core 2.16 and 2.17 take no float for an integer option (a type error names it); 2.18 on take 8.0.
INTEGRAL_FLOAT = 8 if core_takes_integral_floats() else None


@pytest.mark.parametrize("shards, accepted", [
    ("8", 8), (8.0, INTEGRAL_FLOAT), ("8.0", INTEGRAL_FLOAT), (True, None), (8.5, None), ("eight", None), (None, None), (65, None), (0, None),
])
def test_ansible_conversions_of_shards(shards, accepted):
    params, errors = converted("orders", shards)
    outcome = None
    if not errors:
        try:
            outcome = validate_request(params["queue"], params["shards"]).shards
        except InvalidRequest:
            outcome = None
    assert outcome == accepted


@pytest.mark.parametrize("args, message", [
    ({"queue": "orders", "shards": 65}, "shards must be between 1 and 64, got 65"),
    ({"queue": "orders", "shards": float("inf")}, infinite_int_refusal("shards")),
    ({"queue": "orders", "shards": True}, "shards must be an integer between 1 and 64, got True"),
    ({"queue": "a#1", "shards": 2}, "set 'stripes' instead"),
    ({"queue": "orders", "shards": 2, "lock_timeout": -1}, "lock_timeout must be between 0 and 3600"),
    ({"queue": "orders", "shards": 2, "runtime_roles": ["a", "a"]}, "lists a role twice"),
    ({"queue": "orders", "shards": 2, "login_host": "127.0.0.1,127.0.0.2", "login_port": "1,1,1"},
     "login_port gives 3 ports (1,1,1) for the 2 host(s) of login_host (127.0.0.1,127.0.0.2): give one port per host"),
    ({"queue": "orders", "shards": 2, "target_session_attrs": "prefer-standby"},
     "target_session_attrs is 'prefer-standby', which lets libpq connect to a standby, but a change writes"),
    ({"queues": [{"queue": "orders", "shards": 2}], "new_queue": True}, "mutually exclusive: new_queue|queues"),
    ({"queues": [{"queue": "orders", "shards": 2, "new_queue": "maybe"}]}, "new_queue"),
])
def test_the_module_refuses_bad_input_before_connecting(module_result, args, message):
    # login_port 1 would refuse a connection: reaching it would give another message.
    with patch_module_args({"login_host": "127.0.0.1", "login_port": 1, **args}):
        with pytest.raises(SystemExit):
            awa_enqueue_shards.main()
    result = module_result()
    assert result["failed"] and message in result["msg"]


@pytest.mark.parametrize("connection", [
    {"login_password": "pw-s3cret", "connect_params": {"sslpassword": "key-s3cret"}},
    {"connect_params": {"password": "pw-s3cret", "connect_timeout": 3}},
    {"login_db": "postgresql://awa:pw-s3cret@127.0.0.1:1/app"},
    {"connect_params": {"dbname": "host=127.0.0.1 port=1 password='pw-s3cret' dbname=app"}},
    {"login_host": "postgres://awa:pw-s3cret@127.0.0.1"},
], ids=["login_password", "connect_params", "uri-in-login_db", "conninfo-in-connect_params", "uri-in-login_host"])
def test_a_password_is_in_no_part_of_the_result_however_it_is_given(module_result, connection):
    # Nothing listens on port 1. ansible-core 2.19 returns the invocation (connect_params among it), which -vvv prints.
    with patch_module_args({"login_host": "127.0.0.1", "login_port": 1, "queue": "orders", "shards": 2, **connection}):
        with pytest.raises(SystemExit):
            awa_enqueue_shards.main()
    result = module_result()
    assert result["failed"] and result["msg"].startswith("could not connect to database")
    assert "s3cret" not in json.dumps(result)
