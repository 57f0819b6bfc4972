#!/usr/bin/python
# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: enqueue_shards_report_file
short_description: Internal to the role awa.operations.enqueue_shards - writes a change window's JSON report
version_added: 0.4.0
description:
  - B(Not a public interface.) The role P(awa.operations.enqueue_shards#role) alone calls it, as
    C(awa.operations.__role.enqueue_shards_report_file), to write the record of each run
    (C(enqueue_shards_report_dir)); C(ansible-doc -l) does not list it, and it changes with the role in any release.
  - Writes O(report) as JSON to the window's file in O(dir) on the controller (see the notes), readable by its owner
    only (mode C(0600)), and returns its path. The role writes the record as the window goes - after the change,
    after each batch, at the end - so an interrupted window leaves the record of its last step.
  - It runs on the controller, whatever host the task is for or delegated to, without a module run on any host - the
    same record as M(ansible.builtin.copy) with C(delegate_to=localhost) would write, for none of its cost.
author:
  - awa.operations engineers (@awa-operations)
extends_documentation_fragment:
  - awa.operations.attributes
attributes:
  check_mode:
    support: full
    details:
      - Writes the report in check mode too - a dry run's record - and changes nothing else.
  diff_mode:
    support: none
  async:
    support: none
options:
  report:
    description:
      - The record to write, any value JSON can hold.
    type: raw
    required: true
  dir:
    description:
      - The directory on the controller to write the file in, relative to the directory C(ansible-playbook) runs in;
        it must exist. C(~) is expanded.
    type: path
    default: "."
  window:
    description:
      - What tells this change window from another of the same run of C(ansible-playbook) - the role passes when its
        preflight read the queues. Every write of one window goes to one file, which it replaces whole.
    type: str
    default: ""
notes:
  - The file is C(enqueue_shards-<UTC time the run of ansible-playbook started>-<digest>.json), the digest of the
    controller's host name, the run and O(window) - one file per window, never another run's or another window's,
    whenever they started.
seealso:
  - module: ansible.builtin.copy
    description: Copies content to a file on a managed host.
"""

EXAMPLES = r"""
- name: Write the window's record next to the playbook
  awa.operations.__role.enqueue_shards_report_file:
    report: "{{ {'queues': change.queues, 'summary': summary_lines} }}"
    dir: "{{ playbook_dir }}/reports"
  register: written

- name: Name it
  ansible.builtin.debug:
    msg: "The run's report: {{ written.path }}"
"""

RETURN = r"""
path:
  description: The absolute path of the file written.
  returned: always
  type: str
  sample: /srv/windows/enqueue_shards-20261203T101500Z.json
"""
