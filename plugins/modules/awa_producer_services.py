#!/usr/bin/python
# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# This module runs on producer hosts, on whatever Python an ansible-core the collection supports runs modules
# with - 2.7 and 3.6 with 2.16, 3.7 with 2.17 - and refuses a Python older than 3.8 with a message. Python reads
# a whole file before it runs any of it, so this one is written in syntax 2.7 parses (no annotations, no
# f-strings, no "from __future__ import annotations"), and imports the collection's module_utils, which need
# 3.8, only past that check.

DOCUMENTATION = r"""
module: awa_producer_services
short_description: Restart the Awa producer services of a host and report how each one runs
version_added: 0.3.0
description:
  - Runs on a producer host. Reports how each of O(services) runs - its state, its main pid and when its current
    process started - and the host's clock, read after every state.
  - With O(restart), restarts those services first, one after the other, and reports each one's outcome; a restart
    that fails does not stop the others. Like M(ansible.builtin.reboot), the step that acts also reads the state
    after it, so a rolling restart needs one run of this module per host of a batch.
  - With systemd (O(method=systemd), or O(method=auto) on a host systemd runs), the state comes from
    C(systemctl show) (C(ActiveState), C(MainPID), C(ActiveEnterTimestamp)) and a restart is
    C(systemctl restart). Without it, the restart contract applies - O(restart_command) restarts one service and
    the optional O(status_command) prints when its current process started.
  - Before a restart by command, in check mode too, looks up the programs of O(restart_command) and
    O(status_command) as the restart would run them (on the PATH of the user the module runs as, or by their
    path), and restarts nothing when one cannot run (RV(problems)). A service whose state cannot be read as
    configured carries a RV(services[].problem), and a run that restarts (or would restart) it fails.
  - With O(env_file), first makes the producers' environment file hold O(env_file.content), with its owner, group
    and mode, as M(ansible.builtin.copy) would (written to a temporary file and moved into place; nothing is written
    when it already matches). A file that cannot be written fails the run before any restart or read.
  - The file's values never leave the host but for the variables O(env_file.show) lists - not in the diff, the
    result, a warning or a failure message. An environment file holds secrets (a database URL with its password, a
    token), and Ansible masks a C(no_log) value only where a string holds it whole, never a line of it.
  - The role P(awa.operations.enqueue_shards#role) runs it to learn which producer hosts answer, to plan its
    restarts, and to restart each batch; it works on its own too.
requirements:
  - Python 3.8 or newer on the producer host - only its standard library; the module refuses an older Python (which
    ansible-core 2.16 and 2.17 still run modules on), naming it and what to install
author:
  - awa.operations engineers (@awa-operations)
extends_documentation_fragment:
  - awa.operations.attributes
attributes:
  check_mode:
    support: full
    details:
      - Restarts and writes nothing; reads every service and reports in RV(restarted) what it would restart and in
        RV(env_file) whether the file would change.
      - With O(restart), checks that the restart can run - the programs of the commands found, every service's state
        readable - and fails where the real run would, so a check-mode run that passes means the restart can.
  diff_mode:
    support: full
    details:
      - What changes in O(env_file), a line per variable, never the lines themselves - a unified diff would print
        each changed line and its neighbours, a database URL with its password among them. C(+NAME=...) is added,
        C(-NAME=...) removed, C(~NAME=...) changed; the value is shown only for the variables O(env_file.show) lists
        (a changed one with its previous value), every other value is C(********). The variables that keep their
        value are named on one line; comments, blank lines and other lines that are not C(NAME=value) are only
        counted (a comment may hold a secret too), and a change of layout alone is said as such.
  async:
    support: none
options:
  services:
    description:
      - The services to report on, by name (systemd units with or without C(.service), or whatever
        O(restart_command) and O(status_command) take).
      - An empty list reports only the host (its service manager and clock).
    type: list
    elements: str
    required: true
  restart:
    description:
      - The services to restart before the read, in this order. Each must be one of O(services).
    type: list
    elements: str
    default: []
  method:
    description:
      - How the services are restarted and read. V(auto) uses systemd where systemd runs the host, otherwise
        O(restart_command) and O(status_command).
    type: str
    choices: [auto, systemd, command]
    default: auto
  restart_command:
    description:
      - The command that restarts one service, run once per service without a shell (split like a shell would
        split it); C({service}) is replaced by the service name, quoted. Needed when O(restart) is set and the
        services are not restarted with systemd.
      - Its program must be on the PATH of the user the module runs as, or given by its path; otherwise nothing is
        restarted. A restart that exits non-zero is reported with its exit status and its last lines of error
        output.
      - "For example C(supervisorctl restart {service}) or C(kubectl rollout restart deployment/{service})."
    type: str
    default: ""
  status_command:
    description:
      - Without systemd, the command that tells when one service's current process started, run once per service
        like O(restart_command). It must exit 0 and print C(START) or C(START PID) - the start in unix seconds and,
        optionally, the pid of the process that runs the service (its Awa runtime, or the process of its container,
        whose descendants are read for RV(services[].reports_as)).
      - Then optionally a line per runtime of the service that runs where its processes cannot show it (a replica
        on another machine, a Kubernetes pod) - C(HOSTNAME) or C(HOSTNAME PID), what that runtime reports to Awa.
      - It exits as an init script's C(status) action does (and C(supervisorctl status)). An exit of 4 says there
        is no such service - its state is V(missing), with a RV(services[].problem). Another non-zero exit leaves
        the state V(unknown) (3 - the service is stopped or failed - or any other). An exit of 126 or 127 (the
        command, or a program it runs, cannot run) or an exit 0 with other output is a RV(services[].problem).
      - Without it, the state of each service is V(unknown).
    type: str
    default: ""
  env_file:
    description:
      - The environment file the producer services read when they start (for example a systemd
        C(EnvironmentFile)), written before any restart. Omitted - no file is written.
    type: dict
    version_added: 0.4.0
    suboptions:
      path:
        description: The file's absolute path. Its folder must exist.
        type: path
        required: true
      content:
        description:
          - The whole text of the file, C(NAME=value) lines (a systemd C(EnvironmentFile)).
          - Not logged, and never shown - the diff names the variables that change and masks their values but for
            those of O(env_file.show).
        type: str
        required: true
      show:
        description:
          - The variables whose values the diff may show, by name - values that are not secret, such as
            C(AWA_OVERRIDE_REFRESH_MS). Every other value is masked as C(********) in the diff (added, removed or
            changed); a variable's name is always shown.
        type: list
        elements: str
        default: []
        version_added: 0.4.0
      owner:
        description: The file's owner (name or uid). Omitted - left as it is (a new file belongs to the user the
          module runs as).
        type: str
      group:
        description: The file's group (name or gid). Omitted - left as it is.
        type: str
      mode:
        description: The file's mode, as a quoted octal string such as V("0640"). Omitted - left as it is.
        type: str
notes:
  - The host's clock (RV(clock)) is read after every state, so the start of a process it reports is never later
    than it; a caller that read the database's clock before this module ran can bound the skew between the two.
seealso:
  - module: awa.operations.awa_enqueue_shards_info
    description: Which Awa runtimes run, and whether they run a queue's current count.
"""

EXAMPLES = r"""
- name: How the producers of this host run
  awa.operations.awa_producer_services:
    services: [awa-producer@1, awa-producer@2]
  register: producers

- name: Restart one producer with systemd and report how it runs now
  awa.operations.awa_producer_services:
    services: [awa-producer@1]
    restart: [awa-producer@1]
  become: true

- name: Write the producers' environment file, then read how the producers run
  awa.operations.awa_producer_services:
    services: [awa-producer@1]
    env_file:
      path: /etc/awa/producer.env
      content: |
        AWA_DATABASE_URL={{ producer_database_url }}
        AWA_OVERRIDE_REFRESH_MS=1000
      # The diff shows this value; the database URL (its password) is masked.
      show: [AWA_OVERRIDE_REFRESH_MS]
      owner: root
      group: awa
      mode: "0640"
  become: true

- name: Restart through supervisord, with a status command for the start and pid
  awa.operations.awa_producer_services:
    services: [awa-app-1, awa-app-2]
    restart: [awa-app-1, awa-app-2]
    method: command
    restart_command: supervisorctl restart {service}
    status_command: /usr/local/bin/started-at {service}
"""

RETURN = r"""
service_manager:
  description: What runs the host - V(systemd), or the name of process 1.
  returned: always
  type: str
  sample: systemd
method:
  description: How the services were restarted and read - V(systemd) or V(command).
  returned: always
  type: str
  sample: systemd
hostname:
  description: The host's own name (C(socket.gethostname())), which an Awa runtime may report.
  returned: always
  type: str
  sample: fleet-1
clock:
  description: The host's clock, in unix seconds, read after every state.
  returned: always
  type: float
  sample: 1764520916.412
services:
  description: Each service of O(services), in order, as it runs after the restarts.
  returned: always
  type: list
  elements: dict
  contains:
    service:
      description: The service name.
      type: str
      sample: awa-producer@1
    state:
      description: V(running), V(failed), V(stopped), V(starting), V(missing) (systemd does not know the unit, or
        the status command exited 4 - no such service) or V(unknown) (no status command, it exited otherwise
        non-zero, or it printed something else).
      type: str
      sample: running
    started_at:
      description: When the current process started, in unix seconds on the host's clock; null when unknown.
      type: float
      sample: 1764520910.0
    main_pid:
      description: The service's main pid (systemd's C(MainPID), or the pid the status command printed); null when
        unknown.
      type: int
      sample: 4242
    detail:
      description: The service manager's own words, for messages (for example C(active/running)).
      type: str
      sample: active/running
    restarted:
      description: Whether this run restarted it.
      type: bool
      sample: true
    restart_error:
      description: Why its restart failed - the exit status and the last lines of error output; null when it did
        not fail.
      type: str
      sample: null
    problem:
      description: Why its state cannot be read as configured - systemd does not know the unit, the status command
        says there is no such service (exit 4), C(systemctl show) failed, or the status command cannot run here
        (exit 126 or 127) or printed something else than C(START) or C(START PID); null when it can be read.
      type: str
      sample: null
    reports_as:
      description:
        - What the processes of the running service report to Awa as a runtime's identity, each once - its pid in
          its own pid namespace (C(NSpid) of C(/proc/PID/status); 1 for a container's first process) and the
          C(HOSTNAME) of its environment as it started (C(/proc/PID/environ); null when it has none). The
          processes are a systemd unit's control group and the groups below it, or the pid the status command
          printed and its descendants; then a line each for the runtimes the status command printed after the
          start (C(HOSTNAME) and optionally C(PID); a null pid matches any).
        - An identity without a C(hostname) key is a process whose environment this run could not read (another
          user's, without become) - any host name. Empty when the service does not run.
      type: list
      elements: dict
      sample: [{pid: 4242, hostname: fleet-1}, {pid: 1, hostname: 3f9c2a1b7d4e}]
      version_added: 0.5.0
restarted:
  description: The services restarted (in check mode, the ones that would be).
  returned: always
  type: list
  elements: str
  sample: [awa-producer@1]
restart_failures:
  description: The services whose restart failed, each with the reason.
  returned: always
  type: list
  elements: dict
  contains:
    service:
      description: The service name.
      type: str
    message:
      description: Why the restart failed - the command's exit status and its last lines of error output (of
        standard output when it wrote no error), joined by C( / ).
      type: str
  sample: [{service: awa-producer@2, message: "exit status 1: Job for awa-producer@2.service failed because the
      control process exited with error code. / See \"systemctl status awa-producer@2.service\" and
      \"journalctl -xeu awa-producer@2.service\" for details."}]
env_file:
  description: The environment file of O(env_file) - whether this run changed it (in check mode, would change it).
  returned: when O(env_file) is set
  type: dict
  contains:
    path:
      description: The file's path.
      type: str
      sample: /etc/awa/producer.env
    changed:
      description: Whether its text, owner, group or mode changed.
      type: bool
      sample: true
    error:
      description: Why it could not be written (the run failed); absent when it was.
      type: str
      sample: "/etc/awa/producer.env was not written: there is no group awa on this host for the file"
diff:
  description: What changes in O(env_file) (in check mode, would change), in Ansible's C(prepared) form.
  returned: when diff mode is on and the text of O(env_file) changes
  type: dict
  contains:
    prepared:
      description: The file's path, then a line per variable added, removed or changed, values masked but for those of
        O(env_file.show) (see the C(diff_mode) attribute).
      type: str
      sample: "--- /etc/awa/producer.env\n+++ /etc/awa/producer.env\n~AWA_DATABASE_URL=******** (changed)\n\
        ~AWA_OVERRIDE_REFRESH_MS=500 (changed from 1000)\n unchanged: AWA_API_TOKEN\n"
problems:
  description: Why the services cannot be restarted as configured (no systemd where O(method=systemd), no
    O(restart_command) where one is needed, a program of O(restart_command) or O(status_command) that cannot run
    here); nothing is restarted while there is one. Checked only when O(restart) is set.
  returned: always
  type: list
  elements: str
  sample: ["the restart command supervisorctl restart {service} cannot run here: supervisorctl is not on the PATH
    of user root (/usr/local/bin:/usr/bin:/bin)"]
programs:
  description: The programs of O(restart_command) and O(status_command) found before a restart by command, as
    the restart runs them; empty when nothing was to be restarted by command.
  returned: always
  type: list
  elements: dict
  contains:
    command:
      description: Which command runs it - V(restart) or V(status).
      type: str
    program:
      description: The program as the command names it.
      type: str
    path:
      description: Where it was found.
      type: str
  sample: [{command: restart, program: supervisorctl, path: /usr/bin/supervisorctl}]
"""


import platform
import socket
import sys

from ansible.module_utils.basic import AnsibleModule

# The oldest Python this module runs on (the syntax and standard library of producer/).
MINIMUM_PYTHON = (3, 8)


def argument_spec():
    # type: () -> dict[str, object]
    return {
        "services": {"type": "list", "elements": "str", "required": True},
        "restart": {"type": "list", "elements": "str", "default": []},
        "method": {"type": "str", "choices": ["auto", "systemd", "command"], "default": "auto"},
        "restart_command": {"type": "str", "default": ""},
        "status_command": {"type": "str", "default": ""},
        "env_file": {"type": "dict", "options": {
            "path": {"type": "path", "required": True},
            # An environment file may hold secrets: kept out of the host's log and the task's result.
            "content": {"type": "str", "required": True, "no_log": True},
            # The diff shows only these values (environment_diff): the others are masked.
            "show": {"type": "list", "elements": "str", "default": []},
            "owner": {"type": "str"},
            "group": {"type": "str"},
            "mode": {"type": "str"},
        }},
    }


def older_python_message():
    # type: () -> str
    """Why this host's Python cannot run the module, and what to install."""
    return ("awa_producer_services needs Python %d.%d or newer on the producer host; %s runs it with %s, Python %s. "
            "Install Python 3.8 or newer there (on RHEL 8: dnf install python39; on Amazon Linux 2: "
            "amazon-linux-extras install python3.8; elsewhere your distribution's python3.8 or newer) and set "
            "ansible_python_interpreter for the host to it. Nothing was restarted or written."
            % (MINIMUM_PYTHON + (socket.gethostname(), sys.executable, platform.python_version())))


def main():
    # type: () -> None
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    if sys.version_info < MINIMUM_PYTHON:
        module.fail_json(msg=older_python_message())
    # Past the check: producer/ needs Python 3.8.
    from ansible_collections.awa.operations.plugins.module_utils.producer.run import run
    run(module)


if __name__ == "__main__":
    main()
