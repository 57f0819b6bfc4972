# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a wait says: the progress line of each poll, and the message of a timeout."""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.module_utils import shards_info_wait


def test_a_timeout_names_every_straggler_and_what_to_do():
    straggler = {"instance_id": "i-1", "hostname": None, "pid": 42, "seconds_since_start": 90.0,
                 "reason": "it was already running when the count changed (change #3)"}
    info = {"queues": {"orders": {"converged": False, "runtimes_converged": 1, "runtimes_live": 2,
                                  "stragglers": [straggler], "drained": False, "depth_beyond_count": 5}}}
    message = shards_info_wait.timeout_message("drained", info, 61.2)
    assert message.startswith("Timed out after 61s waiting until drained. orders: 1 of 2 live runtimes")
    assert "pid 42 on host (unreported) (instance i-1, up 90s)" in message
    assert "To finish: restart the runtimes named" in message


def test_a_drain_timeout_on_a_paused_queue_says_to_resume_it():
    info = {"queues": {"orders": {"converged": True, "runtimes_converged": 2, "runtimes_live": 2, "stragglers": [],
                                  "drained": False, "depth_beyond_count": 150, "paused": True,
                                  "enqueue_shards": {"orders": 2}}}}
    message = shards_info_wait.timeout_message("drained", info, 30.0)
    assert "orders: 150 ready jobs remain on shards at or above the count, and the queue is paused" in message
    assert message.endswith("To finish: resume the queue (awa queue resume orders) when the pause is over.")
    assert shards_info_wait.progress_line(info) == (
        "orders: 2/2 runtimes on 2 shards, 150 ready beyond the count (paused: nothing drains until it is resumed)")
