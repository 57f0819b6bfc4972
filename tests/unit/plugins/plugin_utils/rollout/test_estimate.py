# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long a window should take, said before it runs: from the pauses and timeouts, and an earlier window's record."""

from __future__ import annotations

import json
import os

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.estimate import estimate, measured

TIMING = {"canary_pause": 60, "batch_pause": 10, "restart_timeout": 120, "converge_timeout": 300,
          "drain_timeout": 1800, "report_dir": ""}


def test_without_a_record_the_estimate_counts_the_pauses_and_a_default_batch_within_the_timeouts():
    found = estimate(4, TIMING, lowering=False)
    # The canary's pause and two batch pauses (none after the last); 15 s a batch, 30 s for the rest.
    assert found["least"] == 80 and found["seconds"] == 30 + 4 * 15 + 80
    assert found["most"] == 4 * (120 + 60) + 80 + 300 + 120
    assert estimate(4, TIMING, lowering=True)["most"] == found["most"] + 1800, "a lowering's drain wait counts"
    assert found["least"] <= found["seconds"] <= found["most"]


def test_an_earlier_window_s_record_gives_its_batches_seconds_and_the_rest(tmp_path):
    older, newer = tmp_path / "enqueue_shards-a.json", tmp_path / "enqueue_shards-b.json"
    older.write_text(json.dumps({"batches": [{"seconds": 99}], "outcome": {"total_seconds": 200}}), encoding="utf-8")
    newer.write_text(json.dumps({"batches": [{"seconds": 4}, {"seconds": 8}, {"seconds": 6}],
                                 "outcome": {"total_seconds": 40}}), encoding="utf-8")
    os.utime(older, (1, 1))
    assert measured(str(tmp_path)) == ([4.0, 8.0, 6.0], 22.0)
    found = estimate(10, dict(TIMING, report_dir=str(tmp_path)), lowering=False)
    assert found["seconds"] == 22 + 10 * 6 + 60 + 8 * 10
    assert "6s a batch, as the last window's record measured" in found["line"]


def test_hundreds_of_batches_are_said_before_the_change():
    assert "500 batches in a row: set enqueue_shards_batch_size to restart more hosts at once" in estimate(
        500, TIMING, lowering=False)["line"]
