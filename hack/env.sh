# Sourced (not run) by hack/test.sh, hack/demo.sh and benchmarks/run.sh:
#
#     source "$(dirname "${BASH_SOURCE[0]}")/../hack/env.sh" KIND
#
# The environment of one run: $root (the checkout, also the working
# directory), the project venv on PATH (created by hack/bootstrap.sh), the
# test bed and benchmarks importable, a run id for the test bed's reaper, and
# a work folder $work holding this checkout as the collection awa.operations
# (ANSIBLE_COLLECTIONS_PATH). On exit it calls the caller's on_exit function,
# if there is one, then stops whatever the run left running and removes $work.
# shellcheck shell=bash

run_kind=${1:?"usage: source hack/env.sh KIND"}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1

venv=$(bash hack/bootstrap.sh)
export PATH="$venv/bin:$PATH"
export PYTHONPATH="$root/tests:$root${PYTHONPATH:+:$PYTHONPATH}"
export ANSIBLE_NOCOLOR=1 PY_COLORS=0 NO_COLOR=1
AWA_TESTBED_RUN_ID="$run_kind-$$-$(date +%s)"
export AWA_TESTBED_RUN_ID

work=$(mktemp -d "/tmp/awa-$run_kind.XXXXXX")
mkdir -p "$work/collections/ansible_collections/awa"
ln -s "$root" "$work/collections/ansible_collections/awa/operations"
export ANSIBLE_COLLECTIONS_PATH="$work/collections"

finish_run() {
    if declare -F on_exit >/dev/null; then on_exit || true; fi
    python -m awa_testbed reap --run "$AWA_TESTBED_RUN_ID" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap finish_run EXIT
trap 'exit 130' INT TERM
