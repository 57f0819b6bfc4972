# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parts of the read (read.py): how depth reads are split into transactions."""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.module_utils.info import read
from ansible_collections.awa.operations.plugins.module_utils.schema.lanes import QueueState

from ansible_collections.awa.operations.tests.unit.plugins.module_utils.observed import grid


def test_depth_reads_are_chunked_by_lane_count_keeping_queues_whole(monkeypatch):
    monkeypatch.setattr(read, "DEPTH_LANES_PER_TRANSACTION", 64)
    lanes = grid("a", 8, 8) + grid("b", 8, 8) + grid("c", 16, 16) + grid("d", 1, 1)  # 32, 32, 64, 4 lanes
    state = QueueState(enqueue_shards={}, lanes=lanes)
    assert read.depth_chunks(["a", "b", "c", "d"], state) == [["a", "b"], ["c"], ["d"]]
    assert read.depth_chunks([], state) == []
