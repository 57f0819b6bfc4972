# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each shared argument spec and its doc fragment must describe the same options."""

from __future__ import annotations

import yaml

from ansible_collections.awa.operations.plugins.doc_fragments.connection import ModuleDocFragment as ConnectionDoc
from ansible_collections.awa.operations.plugins.module_utils.db.options import connection_argument_spec

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
