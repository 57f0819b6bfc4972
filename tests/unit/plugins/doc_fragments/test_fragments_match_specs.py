# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each shared argument spec and its doc fragment must describe the same options."""

from __future__ import annotations

import yaml

from ansible_collections.awa.operations.plugins.doc_fragments.connection import ModuleDocFragment as ConnectionDoc
from ansible_collections.awa.operations.plugins.doc_fragments.shards_info import ModuleDocFragment as ShardsInfoDoc
from ansible_collections.awa.operations.plugins.module_utils.info import options as shards_info_options
from ansible_collections.awa.operations.plugins.module_utils.db.options import connection_argument_spec
from ansible_collections.awa.operations.plugins.modules.__role import enqueue_shards_rollout_info

COMPARED = ("type", "default", "choices", "aliases", "elements")


def normalized(options: dict) -> dict:
    return {name: {key: option.get(key) for key in COMPARED if option.get(key) not in (None, [])}
            for name, option in options.items()}


def test_connection_fragment_matches_the_connection_spec():
    documented = yaml.safe_load(ConnectionDoc.DOCUMENTATION)["options"]
    spec = {name: {key: value for key, value in option.items() if key != "no_log"}
            for name, option in connection_argument_spec().items()}
    assert normalized(documented) == normalized(spec)


def test_the_password_and_the_key_path_are_never_logged():
    spec = connection_argument_spec()
    assert {name for name, option in spec.items() if option.get("no_log")} == {"login_password", "ssl_key"}


def test_the_info_fragment_matches_the_public_info_spec_without_the_connection():
    documented = yaml.safe_load(ShardsInfoDoc.DOCUMENTATION)["options"]
    spec = {name: option for name, option in shards_info_options.argument_spec().items()
            if name not in connection_argument_spec()}
    assert normalized(documented) == normalized(spec)


def test_the_role_s_read_documents_exactly_what_it_adds_to_the_fragment():
    """The rollout's options and the wait that includes restarted; the rest comes from the fragment."""
    added = yaml.safe_load(enqueue_shards_rollout_info.DOCUMENTATION)["options"]
    spec = shards_info_options.argument_spec(rollout=True)
    assert normalized(added) == normalized({name: spec[name] for name in [*shards_info_options.ROLLOUT_OPTIONS, "wait"]})
    public_waits = shards_info_options.argument_spec()["wait"]["choices"]
    assert spec["wait"]["choices"] == [*public_waits, shards_info_options.ROLLOUT_WAIT]
