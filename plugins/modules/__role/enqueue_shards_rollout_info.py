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
    the runtimes seen before a batch's restarts (O(known_runtimes)), the services the batch restarted
    (O(restarted_services)) and how many other new runtimes it counts (O(expected_new_runtimes)), the producer
    services of the change window (O(window_services)), a pause to watch a batch before the read (O(delay)) - and
    the wait O(wait=restarted) between the batches of a rolling restart.
  - The same code as M(awa.operations.awa_enqueue_shards_info) reads, waits (from the controller, a progress line
    per poll) and returns its result; RV(new_runtimes), RV(expected_new_runtimes) and RV(converged) are the ones
    these options set.
  - Its action also takes three of the role's records, which it reads on the controller and never sends to the
    database host - C(batch) (the window's state after the plan), C(restarts) (each host's restart results in the
    batch) and C(record) (the reads and the folder of the window's record). Given C(batch), it runs a batch's whole
    step - the wait for the runtimes of the services the batch restarted, the watch for its pause, the verdict as one
    line, the window's record written - and returns the window's state after the batch as C(window_state).
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
        V(restarted) - polls until RV(new_runtimes) holds RV(expected_new_runtimes) runtimes (between the batches
        of a rolling restart).
    type: str
    default: none
    choices: [none, converged, drained, restarted]
  known_runtimes:
    description:
      - Runtime instance ids seen before a restart; no runtime in this list is returned in RV(new_runtimes).
    type: list
    elements: str
    default: []
  restarted_services:
    description:
      - The services a batch restarted, each as its restart reported it. O(wait=restarted) waits for the runtimes
        of each - a live, healthy runtime not in O(known_runtimes) that reports one of the service's identities
        (O(restarted_services[].reports_as)) and started no earlier than the service's process - and for nothing
        else. Two services may share an identity (their hosts hand out the same pids) - each takes a runtime of its
        own.
    type: list
    elements: dict
    default: []
    suboptions:
      reports_as: &reports_as
        description:
          - What the service's processes report to Awa as their runtime's identity, one C({pid, hostname}) per
            process that may run one - its pid in its own pid namespace and the C(HOSTNAME) of its environment; an
            identity without C(hostname) (its environment unread) matches any host name.
          - Empty - its runtimes cannot be told apart by pid.
        type: list
        elements: dict
        default: []
      started_at: &started_at
        description: When the service's process started, in unix seconds by its host's clock (omitted - unknown).
        type: float
      runtimes:
        description: How many Awa runtimes the service runs.
        type: int
        default: 1
  expected_new_runtimes:
    description:
      - How many more new runtimes O(wait=restarted) waits for, counted - any live, healthy runtime not in
        O(known_runtimes) and none of O(restarted_services)'s - for the restarted services whose runtimes cannot be
        told apart by pid (runtimes in child processes or containers, a status command that prints no pid).
      - With no O(restarted_services), every such runtime is returned in RV(new_runtimes).
    type: int
    default: 0
  window_services:
    description:
      - The producer services of the change window (the rollout's inventory), each its process as last read and
        whether the change concerns it. The runtimes of a service the change does not concern
        (O(window_services[].concerned=false)) are left out of each queue's convergence
        (RV(awa.operations.awa_enqueue_shards_info#module:queues), RV(converged)), so O(wait=converged) and
        O(wait=drained) do not wait for them. The role passes those of the services it did not restart because they
        declare other queues (C(enqueue_shards_service_queues)), and only for a raise - a producer that keeps a
        higher count after a lowering would refill the old shards.
      - Where every service has O(window_services[].reports_as), a live runtime that is none of theirs runs outside the
        window (another window's, on another part of the inventory; a producer outside the inventory) and is left
        out too. Where some have none (their runtimes cannot be told apart by pid, or their host could not be
        read), the runtimes outside cannot be told from theirs, and every runtime is waited for.
      - Left-out runtimes are still listed in RV(awa.operations.awa_enqueue_shards_info#module:runtimes); a drain
        wait still notes new jobs on the old shards, whoever enqueues them.
    type: list
    elements: dict
    default: []
    suboptions:
      reports_as: *reports_as
      started_at: *started_at
      concerned:
        description: Whether the change concerns the service.
        type: bool
        default: true
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
- name: Batch | wait until the restarted services' new runtimes are live and healthy (the role's 5_pickup_batch.yml)
  awa.operations.__role.enqueue_shards_rollout_info:
    queues: [orders]
    wait: restarted
    lanes: false
    known_runtimes: "{{ rollout.known_runtimes }}"
    restarted_services:
      - {reports_as: [{pid: 4711, hostname: app1}], started_at: 1764520004.0, runtimes: 1}
    health: true
  register: batch_wait
"""

RETURN = r"""
converged:
  description: Whether every live runtime the wait does not leave out (O(window_services)) runs with the current count
    of every queue read.
  returned: always
  type: bool
  sample: true
new_runtimes:
  description:
    - The runtimes of O(restarted_services), at most as many as each runs, and the other live, healthy runtimes not
      in O(known_runtimes) when O(expected_new_runtimes) counts some or no O(restarted_services) is given; each as in
      RV(awa.operations.awa_enqueue_shards_info#module:runtimes).
  returned: always
  type: list
  elements: dict
  sample: []
expected_new_runtimes:
  description: How many runtimes O(wait=restarted) waits for - those of O(restarted_services) and
    O(expected_new_runtimes).
  returned: always
  type: int
  sample: 2
window_state:
  description:
    - The window's state after a batch - the rollout with the batch's verdict, and the stop when the batch stopped the
      window; the role hands it to the next batch and to the window's end. Its other return values are then not
      returned.
  returned: when the action is given the window's state (C(batch))
  type: dict
  sample: {rollout: {restarted: [app1/orders-api], batch_index: 1}, stop: null}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.awa.operations.plugins.module_utils.module_main import run_module
from ansible_collections.awa.operations.plugins.module_utils.info_run import run
from ansible_collections.awa.operations.plugins.module_utils.info.options import ARGUMENT_RULES, argument_spec


def main() -> None:
    # disconnected: no server could be reached or the session ended; the action plugin's wait retries it.
    run_module(AnsibleModule, argument_spec(rollout=True), ARGUMENT_RULES, run, mark_disconnected=True)


if __name__ == "__main__":
    main()
