# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which installations a change or a read accepts."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.errors import PreconditionFailed
from ansible_collections.awa.operations.plugins.module_utils.schema.installation import check_installation

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.observed import installation


@pytest.mark.parametrize("changes, fragment", [
    ({"has_awa_schema": False}, "no Awa schema"),
    ({"has_enqueue_shards": False, "schema_version": 11}, "schema version 11"),
    ({"storage_state": "canonical", "storage_engine": "canonical"}, "storage_auto_finalize_if_fresh"),
    ({"missing_roles": ["ghost"]}, "ghost"),
])
def test_installations_we_cannot_change_are_refused(changes, fragment):
    with pytest.raises(PreconditionFailed, match=fragment):
        check_installation(installation(**changes), ("ghost",))


def test_untested_schema_versions_only_warn():
    assert "untested" in check_installation(installation(schema_version=47))[1][0]
