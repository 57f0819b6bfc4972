# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""enqueue_shards_batch_size, written as Ansible's serial."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.serial import (
    batch_size_problem,
    split,
)


@pytest.mark.parametrize("spec, total, sizes", [
    (1, 3, [1, 1, 1]),
    (2, 5, [2, 2, 1]),
    ("2", 3, [2, 1]),
    (10, 3, [3]),
    ("25%", 8, [2, 2, 2, 2]),
    ("25%", 3, [1, 1, 1]),            # rounded down, never below one host
    ("100%", 5, [5]),
    ([1, "25%", "100%"], 8, [1, 2, 5]),
    ([1, "50%"], 5, [1, 2, 2]),       # the last entry repeats
    ([1, 2], 6, [1, 2, 2, 1]),
    (3, 0, []),
])
def test_sizes_follow_serial(spec, total, sizes):
    assert [len(batch) for batch in split(list(range(total)), spec)] == sizes


@pytest.mark.parametrize("spec", [0, -1, 1.5, "0%", "101%", "abc", [], [1, "x"], True, None, {"a": 1}])
def test_bad_values_are_refused_with_the_accepted_forms(spec):
    problem = batch_size_problem(spec)
    assert problem is not None and 'a percentage of them ("25%")' in problem
    with pytest.raises(ValueError):
        split(["h1", "h2", "h3"], spec)


def test_hosts_are_cut_into_batches_of_the_sizes_in_order():
    assert split(["h1", "h2", "h3", "h4", "h5"], [1, "50%"]) == [["h1"], ["h2", "h3"], ["h4", "h5"]]
