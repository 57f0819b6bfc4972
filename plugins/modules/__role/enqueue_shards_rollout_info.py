#!/usr/bin/python
# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: enqueue_shards_rollout_info
short_description: Internal to the role awa.operations.enqueue_shards - its reads and waits during a rollout
version_added: 0.4.0
description:
  - B(Not a public interface.) The role P(awa.operations.enqueue_shards#role) alone calls it, as
    C(awa.operations.__role.enqueue_shards_rollout_info); C(ansible-doc -l) does not list it, and its options change
    with the role in any release. In a playbook of your own, use M(awa.operations.awa_enqueue_shards_info).
  - M(awa.operations.awa_enqueue_shards_info) with the state the rollout carries from one of its tasks to the next -
    the runtimes seen before a batch's restarts (O(known_runtimes)), how many new ones the batch brings
    (O(expected_new_runtimes)), the runtimes a change leaves untouched (O(untouched_runtimes)), a pause to watch a
    batch before the read (O(delay)) - and the wait O(wait=restarted) between the batches of a rolling restart.
  - The same code as M(awa.operations.awa_enqueue_shards_info) reads, waits (from the controller, a progress line
    per poll) and returns its result; RV(new_runtimes) and RV(expected_new_runtimes) are the ones these options
    set.
author:
  - awa.operations engineers (@awa-operations)
extends_documentation_fragment:
  - awa.operations.shards_info
  - awa.operations.connection
  - awa.operations.attributes.info_module
  - awa.operations.attributes.action_group
attributes:
  async:
    support: full
    details:
      - As M(awa.operations.awa_enqueue_shards_info); the job must last longer than O(delay) and O(wait_timeout)
        together.
options:
  wait:
    description:
      - As M(awa.operations.awa_enqueue_shards_info)'s (V(none), V(converged), V(drained)), and
        V(restarted) - polls until at least O(expected_new_runtimes) live, healthy runtimes are not in
        O(known_runtimes) (between the batches of a rolling restart).
    type: str
    default: none
    choices: [none, converged, drained, restarted]
  known_runtimes:
    description:
      - Runtime instance ids seen before a restart; runtimes not in this list are returned as RV(new_runtimes).
    type: list
    elements: str
    default: []
  expected_new_runtimes:
    description:
      - How many new runtimes O(wait=restarted) waits for.
    type: int
    default: 0
  untouched_runtimes:
    description:
      - Instance ids of live runtimes that a change does not concern, left out of each queue's convergence
        (RV(awa.operations.awa_enqueue_shards_info#module:queues), RV(converged)), so O(wait=converged) does not
        wait for them. They are still listed in RV(awa.operations.awa_enqueue_shards_info#module:runtimes).
      - The role passes the runtimes of the producer services it did not restart because they declare other queues
        (C(enqueue_shards_service_queues)), and only for a raise - a producer that keeps a higher count after a
        lowering would refill the old shards.
    type: list
    elements: str
    default: []
  delay:
    description:
      - Seconds to wait before the first read, connected to nothing - the role watches a batch of restarted
        producers for its pause (C(enqueue_shards_canary_pause), C(enqueue_shards_batch_pause)), then reads how
        their runtimes run and the health readings. It does not count against O(wait_timeout).
    type: float
    default: 0
notes:
  - Its result is M(awa.operations.awa_enqueue_shards_info)'s; see that module's return values.
seealso:
  - module: awa.operations.awa_enqueue_shards_info
"""

EXAMPLES = r"""
- name: Batch | wait until the restarted services' new runtimes are live and healthy (the role's restart_batch.yml)
  awa.operations.__role.enqueue_shards_rollout_info:
    queues: [orders]
    wait: restarted
    lanes: false
    known_runtimes: "{{ rollout.known_runtimes }}"
    expected_new_runtimes: 2
    health: true
  register: batch_wait
"""

RETURN = r"""
converged:
  description: Whether every live runtime not in O(untouched_runtimes) runs with the current count of every queue read.
  returned: always
  type: bool
  sample: true
new_runtimes:
  description: Live, healthy runtimes whose instance id is not in O(known_runtimes) (all of them when it is empty),
    each as in RV(awa.operations.awa_enqueue_shards_info#module:runtimes).
  returned: always
  type: list
  elements: dict
  sample: []
expected_new_runtimes:
  description: The value of O(expected_new_runtimes).
  returned: always
  type: int
  sample: 2
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.awa.operations.plugins.module_utils.module_main import run_module
from ansible_collections.awa.operations.plugins.module_utils.advice.on_read import read
from ansible_collections.awa.operations.plugins.module_utils.info.options import ARGUMENT_RULES, argument_spec


def main() -> None:
    # disconnected: no server could be reached or the session ended; the action plugin's wait retries it.
    run_module(AnsibleModule, argument_spec(rollout=True), ARGUMENT_RULES, read, mark_disconnected=True)


if __name__ == "__main__":
    main()
