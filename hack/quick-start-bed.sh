#!/usr/bin/env bash
# What README.md's quick start assumes, on this machine, from a clone: an
# embedded PostgreSQL 18 with the real Awa 0.6.9 schema in a database `awa`
# (the roles awa_migrator and awa_runtime), queue `orders`, and two Awa
# applications, awa-app-1 and awa-app-2, under supervisord
# (tests/awa_testbed/quick_start.py).
#
#     bash hack/quick-start-bed.sh up     # start it; prints the export lines for your shell
#     bash hack/quick-start-bed.sh down   # stop it and delete it all
#
# `up` prints two lines on standard output - libpq's PGHOST, PGPORT and
# PGPASSWORD for awa_migrator, and a PATH with the bed's supervisorctl -
# to run in the shell that runs the quick start (or all at once:
# eval "$(bash hack/quick-start-bed.sh up)"). The bed outlives this command
# until `down`; it lives in $AWA_QUICK_START_BED (default
# /tmp/awa-quick-start-bed). It runs on the Python the demo runs on (the
# newest of 3.13, 3.12 and 3.11 found; AWA_DEMO_PYTHON=3.11 picks one).
set -euo pipefail

action=${1:-}
case "$action" in
    up|down) ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: bash hack/quick-start-bed.sh up|down" >&2; exit 2 ;;
esac
state=$(realpath -m "${AWA_QUICK_START_BED:-/tmp/awa-quick-start-bed}")

# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" demo

# The bed outlives this command: registered under a run id of its own, which
# env.sh's reaper (this run's id) leaves alone and `down` reaps.
bed_run="quick-start-bed:$state"
if [ "$action" = up ]; then
    echo "Starting what the quick start assumes in $state (PostgreSQL 18, database awa, queue orders," \
         "awa-app-1 and awa-app-2 under supervisord)..." >&2
    AWA_TESTBED_RUN_ID=$bed_run python -m awa_testbed quick-start --state "$state"
    echo "Run the two export lines it printed in your shell, then the quick start; afterwards: bash hack/quick-start-bed.sh down" >&2
else
    python -m awa_testbed down --state "$state"
    python -m awa_testbed reap --run "$bed_run" >/dev/null
    echo "The quick start's bed in $state is stopped and deleted." >&2
fi
