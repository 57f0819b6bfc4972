# Sourced (not run) by the scripts in hack/ and by benchmarks/run.sh, or by
# hand (KIND dev) for a shell with the project's environment:
#
#     source "$(dirname "${BASH_SOURCE[0]}")/../hack/env.sh" KIND
#
# The environment of one run: $root (the checkout, also the working
# directory), the project venv on PATH (created by hack/bootstrap.sh), the
# test bed and benchmarks importable, a run id for the test bed's reaper, and
# a work folder $work holding this checkout as the collection awa.operations
# (ANSIBLE_COLLECTIONS_PATH). On exit it runs the functions the caller
# registered with `at_exit FUNCTION` (below), then stops whatever the run left
# running (the test bed's reaper, by run id) and removes $work.
# stage_collection copies the checkout to $stage for ansible-test; with_core
# runs a command on another ansible-core of the matrix (hack/matrix.sh).
# KIND test and integration prepare the whole matrix, demo the demo's venv
# (hack/bootstrap.sh demo, which picks the Python), the others (bench, ...)
# only the project venv.
# shellcheck shell=bash

run_kind=${1:?"usage: source hack/env.sh KIND"}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
# shellcheck source=hack/matrix.sh
source "$root/hack/matrix.sh"

case "$run_kind" in
    test|integration) bash hack/bootstrap.sh all >/dev/null ;;
    # The demo's venv (hack/demo.sh, hack/quick-start-bed.sh): on Python $AWA_DEMO_PYTHON when set, else the
    # newest of the matrix found, with the newest ansible-core that runs on it; bootstrap prints which venv.
    demo) venv=$(bash hack/bootstrap.sh demo "${AWA_DEMO_PYTHON:-}" | tail -n 1); export AWA_OPS_VENV=$venv ;;
    *) bash hack/bootstrap.sh project >/dev/null ;;
esac
# The matrix's interpreters come before anything else named pythonX.Y (pyenv
# shims that do not run): ansible-test sanity looks them up on PATH.
export PATH="$venv/bin:$venvs/interpreters:$PATH"
# The test bed of every venv takes the wheels bootstrap downloaded
# (PostgreSQL 18, older awa-cli) from the project venv.
export AWA_TESTBED_WHEELS="$venv/awa-wheels"

# with_core CORE COMMAND...: COMMAND with that ansible-core's venv first on PATH.
with_core() {
    local core=$1; shift
    PATH="$(matrix_venv "$core")/bin:$PATH" "$@"
}
export PYTHONPATH="$root/tests:$root${PYTHONPATH:+:$PYTHONPATH}"
export ANSIBLE_NOCOLOR=1 PY_COLORS=0 NO_COLOR=1
AWA_TESTBED_RUN_ID="$run_kind-$$-$(date +%s)"
export AWA_TESTBED_RUN_ID

work=$(mktemp -d "/tmp/awa-$run_kind.XXXXXX")
mkdir -p "$work/collections/ansible_collections/awa"
ln -s "$root" "$work/collections/ansible_collections/awa/operations"
export ANSIBLE_COLLECTIONS_PATH="$work/collections"

# at_exit FUNCTION: run FUNCTION when the script exits (normally, on an error
# or on Ctrl-C), with the script's exit status as its argument, before the
# reaper and before $work is removed. Functions run in the order registered;
# one that fails does not keep the others or the reaper from running.
exit_functions=()
at_exit() {
    declare -F "$1" >/dev/null || { echo "at_exit: $1 is not a function" >&2; return 2; }
    exit_functions+=("$1")
}
finish_run() {
    local status=$? function
    for function in "${exit_functions[@]}"; do "$function" "$status" || true; done
    python -m awa_testbed reap --run "$AWA_TESTBED_RUN_ID" >/dev/null 2>&1 || true
    rm -rf "$work"
}
# ansible-test needs a real folder named ansible_collections/awa/operations,
# outside this git repository (inside it, it would ask git for the file list).
stage="$work/stage/ansible_collections/awa/operations"
stage_collection() {
    rm -rf "$stage" && mkdir -p "$stage"
    git -C "$root" ls-files -z --cached --others --exclude-standard \
        | tar -C "$root" --null -T - -cf - | tar -xf - -C "$stage"
}

# The machine's pip.conf names file:// indexes that do not exist; pip says so
# once per package. Drop that noise (and pip's progress bars), keep the rest.
without_pip_noise() { grep -vE --line-buffered 'is ignored: it is neither a file nor a directory|━' || true; }

trap finish_run EXIT
trap 'exit 130' INT TERM
