"""Each verify of the fleet scenario runs the tests of the pass that just ran (``molecule-pass.json``).

A test marked ``@pytest.mark.passes("raise", "return")`` runs after those
passes; an unmarked one after every pass. The others are deselected, not
skipped: a verify's report lists what it checked.
"""

from __future__ import annotations

import pytest
from awa_testbed.verify_state import molecule_pass


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "passes(*names): the passes of the scenario after which the test runs")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    current = molecule_pass()["pass"]
    selected, deselected = [], []
    for item in items:
        marker = item.get_closest_marker("passes")
        (selected if marker is None or current in marker.args else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
