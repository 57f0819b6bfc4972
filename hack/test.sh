#!/usr/bin/env bash
# The project's one test command. From a fresh clone on a fresh machine (as
# root for the molecule and functional steps' system packages, see CONTRIBUTING.md):
#
#     bash hack/test.sh                      # every step
#     bash hack/test.sh --long               # every step, with the long soak
#     bash hack/test.sh sanity units         # only some steps (names below)
#     bash hack/test.sh --core 2.20 sanity   # steps of the matrix on one core only
#     bash hack/test.sh --serial             # molecule in turn with the others
#     bash hack/test.sh quick                # the contributor's loop, at most 5 minutes
#
# Steps: changelog sanity units lint types docs importer ee integration molecule functional.
# sanity and units run on every ansible-core of the matrix and on the next
# one's pre-release (hack/matrix.sh; units every core at once), integration on
# the pre-release, the newest and the floor (matrix_integration_cores, at
# once), molecule on the newest. Sanity runs every test on the newest core
# and, on the others, the tests whose verdict depends on the core (step_sanity
# says which and why); units run module_utils' tests on one core per Python
# (step_units). functional: the change window's tests also on the oldest
# core (step_functional). quick: sanity, units and types on the newest core, the
# modules' functional tests on PostgreSQL 18.
#
# What it does, top to bottom:
#   1. Prepares: the venvs with pinned dependencies from PyPI (hack/bootstrap.sh,
#      through hack/env.sh), then the Debian packages the steps need
#      (hack/packages.sh: apt-get, as root, when missing).
#   2. Starts molecule as a background job, when other steps run too: it mostly
#      waits on its hosts' units and runtimes (a third of one core), and the
#      whole command must stay well under 40 minutes on 2 cores. Its output
#      goes to a log file, shown when the run ends: two outputs interleaved
#      line by line (Ansible's task blocks, pytest's report) would be readable
#      as neither.
#   3. Runs the other steps in turn in the foreground, then waits for molecule.
#   4. When it ends, also on a failure or Ctrl-C, prints molecule's log, every
#      step's timing and the functional tests' summary line (show_results).
# A failing step stops the run: a foreground step that fails stops molecule,
# and molecule failing stops the foreground step. Each step starts the servers
# it uses (PostgreSQL 17 and 18 from PyPI wheels) and stops them; hack/env.sh
# stops whatever is left (the test bed's reaper, by run id).
set -euo pipefail

long=0
serial=0
steps=()
only_cores=()
while [ $# -gt 0 ]; do
    case "$1" in
        --long) long=1 ;;
        --serial) serial=1 ;;
        --core) only_cores+=("${2:?--core needs a version, for example 2.20}"); shift ;;
        -h|--help) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d'; exit 0 ;;
        *) steps+=("$1") ;;
    esac
    shift
done
all_steps=(changelog sanity units lint types docs importer ee integration molecule functional)
[ ${#steps[@]} -gt 0 ] || steps=("${all_steps[@]}")
for step in "${steps[@]}"; do
    [[ " ${all_steps[*]} quick " == *" $step "* ]] || { echo "unknown step: $step (known: ${all_steps[*]} quick)" >&2; exit 2; }
done

# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" test
timings="$work/timings"
printf '%-24s %5ss\n' bootstrap "$SECONDS" >"$timings"

# The cores a matrix step runs on: the given list, or all (in matrix order).
cores_of() {
    local core
    for core in "$@"; do
        if [ ${#only_cores[@]} = 0 ] || [[ " ${only_cores[*]} " == *" $core "* ]]; then echo "$core"; fi
    done
}
for core in "${only_cores[@]}"; do
    [ -n "${matrix_core_python[$core]:-}" ] || { echo "unknown core $core (matrix: ${matrix_test_cores[*]})" >&2; exit 2; }
done

# run_step NAME COMMAND...: one step, headed by its name; its time goes to $timings.
run_step() {
    local name=$1 started=$SECONDS; shift
    printf '\n=== %s ===\n' "$name"
    "$@"
    printf '%-24s %5ss\n' "$name" $((SECONDS - started)) >>"$timings"
    printf -- '--- %s: %ss\n' "$name" $((SECONDS - started))
}
# A step of the matrix: the same function once per core, each timed.
run_matrix_step() {
    local name=$1 core cores; shift
    mapfile -t cores < <(cores_of "$@")
    for core in "${cores[@]}"; do
        run_step "$name $core" "step_$name" "$core"
    done
}
# The same, every core at once (step_NAME stages its own copy); each output is
# shown whole, in matrix order, when all have ended (as hack/integration.sh
# does), and the step fails when one of them failed. For steps that are one
# process on one core each (units: one pytest worker), which one after the other
# left the second core to molecule alone.
run_matrix_side_by_side() {
    local name=$1 core cores pids=() status=0 started=$SECONDS i; shift
    mapfile -t cores < <(cores_of "$@")
    for core in "${cores[@]}"; do
        run_step "$name $core" "step_$name" "$core" >"$work/$name-$core.log" 2>&1 &
        pids+=("$!")
    done
    for i in "${!cores[@]}"; do
        wait "${pids[$i]}" || status=1
        cat "$work/$name-${cores[$i]}.log"
    done
    printf '%-24s %5ss\n' "$name, side by side" $((SECONDS - started)) >>"$timings"
    return "$status"
}

step_changelog() { antsibull-changelog lint; }

# ansible-test sanity. Tests whose verdict depends on the ansible-core that runs
# them run on every core: its doc parser (ansible-doc), its module validator
# (validate-modules), its module_utils and plugin loader on every Python
# (import), its schema of meta/runtime.yml (runtime-metadata), its rule for
# action plugins (action-plugin-docs) and its own ignore file (ignores).
# compile's verdict is the Python's alone: it runs where the Pythons of the
# range are - on the newest core and the pre-release (3.9 on) and on the floor
# (3.8 on; its controller code from 3.10). The others (pylint, pep8, yamllint,
# the shell script check, changelog and the code-smell scripts) read the same
# source with tools ansible-test pins: they run on the newest core, which Galaxy and
# contributors (quick) check with; another core's run would only add another
# linter version's opinion of the same files, nothing about that core - the
# pre-release's pins become the newest core's the day it is released.
sanity_on_every_core=(action-plugin-docs ansible-doc ignores import runtime-metadata validate-modules)
sanity_compile_on=("${matrix_cores[0]}" "${matrix_prerelease_cores[@]}" "${matrix_cores[-1]}")
sanity_every_test_on=("${matrix_cores[0]}")
# Without --python: compile and import run on every interpreter of the matrix
# (.venvs/interpreters is on PATH), the other tests on the core's own Python.
# --local: the core's venv runs ansible-test itself (--venv would build a new
# venv for it on every run); each test that needs packages gets its own venv
# under ~/.ansible/test/venv either way.
step_sanity() {
    local core=$1 selected=() test
    stage_collection
    # The rule is no ignore entries at all, on any core (an older core's file would hide what only it sees).
    if compgen -G "$stage/tests/sanity/ignore-*.txt" >/dev/null; then
        echo "tests/sanity/ has ignore files: fix what they ignore instead"; return 1
    fi
    if [[ " ${sanity_every_test_on[*]} " != *" $core "* ]]; then
        for test in "${sanity_on_every_core[@]}"; do selected+=(--test "$test"); done
        [[ " ${sanity_compile_on[*]} " != *" $core "* ]] || selected+=(--test compile)
    fi
    # The PyPI releases that stand in for archives this network cannot reach (hack/bootstrap.sh: sanity_from_pypi).
    (cd "$(matrix_sanity_requirements "$core")" && grep -H 'awa.operations hack/bootstrap.sh:' sanity.*.txt) || true
    (cd "$stage" && with_core "$core" ansible-test sanity --local "${selected[@]}" --color no 2>&1) | without_pip_noise
}

# --local: the core's venv has the unit test requirements (requirements/ansible-test.txt).
# One pytest worker: ansible-test starts pytest three times (modules, module_utils,
# controller), and a second worker would import everything again in each for
# about a minute of tests on two cores that molecule shares.
# Each core's own staged copy (stage_collection reads $stage): the cores run side by side.
# module_utils import nothing of ansible-core (tests/unit/plugins/test_layout.py holds it), so the verdict of
# their tests (tests/unit/plugins/module_utils/) is the Python's: they run on one core per Python
# of the matrix, the newest released core on it (units_module_utils_core); the other cores run
# the rest - the modules, plugins, role and layout tests, which run through that core's Ansible.
units_module_utils_core() {
    local core
    for core in "${matrix_cores[@]}" "${matrix_prerelease_cores[@]}"; do
        if [ "${matrix_core_python[$core]}" = "${matrix_core_python[$1]}" ]; then echo "$core"; return; fi
    done
}
step_units() {
    local stage="$work/stage-$1/ansible_collections/awa/operations" targets=()
    stage_collection
    if [ "$(units_module_utils_core "$1")" != "$1" ]; then
        mapfile -t targets < <(cd "$stage" && find tests/unit -mindepth 2 -maxdepth 2 -path tests/unit/plugins/module_utils \
            -prune -o \( -type d -printf '%p/\n' \) -o \( -name 'test_*.py' -printf '%p\n' \) | sort)
        echo "module_utils' unit tests run on $(units_module_utils_core "$1") (Python ${matrix_core_python[$1]}): here ${targets[*]}"
    fi
    (cd "$stage" && with_core "$1" ansible-test units --local --python "${matrix_core_python[$1]}" --num-workers 1 \
        --color no "${targets[@]}" 2>&1)
}

# A plain `ansible-lint` installs the collection itself (.ansible-lint); here it
# uses the checkout through ANSIBLE_COLLECTIONS_PATH instead, offline.
step_lint() { ansible-lint --offline; }

# mypy over plugins/ and extensions/ (mypy.ini), as Ansible imports them: from ANSIBLE_COLLECTIONS_PATH.
step_types() { mypy; }

step_docs() { bash hack/docs.sh check; }

# The artifact Galaxy would receive (hack/build.sh: the guides' RST generated, then built): once for the
# importer and ee steps.
artifact=
build_artifact() {
    [ -n "$artifact" ] && return
    artifact=$(bash hack/build.sh "$work/build")
}

step_importer() {
    build_artifact
    local out
    out=$(dirname "$artifact")
    # As Galaxy runs it, plus the tag check; any error or warning fails the step.
    # (run from $out: the importer writes importer_result.json into the working directory)
    (cd "$out" && GALAXY_IMPORTER_CHECK_REQUIRED_TAGS=1 python -m galaxy_importer.main "$artifact") > "$out/importer.log" 2>&1 || {
        cat "$out/importer.log"; return 1; }
    cat "$out/importer.log"
    if grep -qE '^(WARNING|ERROR)' "$out/importer.log"; then
        echo "galaxy-importer reported warnings or errors (above)"; return 1
    fi
}

# Execution environments: the installed artifact must declare psycopg (and
# libpq for bindep) to ansible-builder, and the sample execution-environment.yml
# of docs/execution_environment.md must give a build context.
step_ee() {
    build_artifact
    local collections="$work/ee/collections" context="$work/ee/context" found
    # Only that folder: the checkout on ANSIBLE_COLLECTIONS_PATH would count as installed.
    ANSIBLE_COLLECTIONS_PATH="$collections" ansible-galaxy collection install "$artifact" -p "$collections" >/dev/null
    [ -f "$collections/ansible_collections/awa/operations/MANIFEST.json" ] \
        || { echo "the artifact did not install into $collections"; return 1; }
    found=$(ansible-builder introspect --sanitize "$collections")
    printf '%s\n' "$found"
    grep -qE "^- 'psycopg>=" <<<"$found" || { echo "ansible-builder introspect found no psycopg"; return 1; }
    grep -qE "^- 'libpq" <<<"$found" || { echo "ansible-builder introspect found no libpq"; return 1; }
    # Every documented sample (AWX, AAP's minimal EE, the EDA decision environment) gives a build context that
    # keeps ansible-core at the collection's floor (hack/ee_context.py). The images are not built: no container
    # engine here.
    local sample name
    for sample in docs/examples/*/*-environment.yml; do
        name=$(basename "$(dirname "$sample")")
        ansible-builder create --file "$sample" --context "$context/$name" -v 0 >/dev/null || return 1
        python hack/ee_context.py "$name" "$context/$name" || return 1
    done
}

step_integration() {
    local cores
    mapfile -t cores < <(cores_of "${matrix_integration_cores[@]}")
    bash hack/integration.sh "${cores[@]}"
}

# Every molecule scenario (extensions/molecule) on the core, in a fresh
# ephemeral folder. The fleet scenarios boot Debian hosts with systemd-nspawn:
# hack/hosts.sh builds (or finds) their cached root filesystem.
step_molecule() {
    bash hack/hosts.sh
    MOLECULE_EPHEMERAL_DIRECTORY="$work/molecule-$1" with_core "$1" molecule test --all
}

# Three workers on 2 cores, a file's tests on one of them (module fixtures, ordered scenarios): most of
# a test is waiting on servers, runtimes and hosts, and with two workers a quarter of the cores stood
# idle (742 s against 837 s, quiet); four are too many (712 s against 674, 2026-12-04, the machine 0.99
# busy). The files are handed out costliest first, in the order the
# conftest gives them (--no-loadscope-reorder; awa_testbed.file_order): xdist's own order (most tests
# first) put files of a few minutes-long tests last, and the run ended on one or two workers. The
# slowest tests are listed: the whole command has to stay under 20 minutes on 2 cores. --no-skips
# (tests/functional/conftest.py): a test that would be skipped here fails, because this command
# promises that every selected test runs.
by_file_in_conftest_order=(--dist loadfile --no-loadscope-reorder)
# The change window on the floor too: the oldest ansible-core of the matrix (meta/runtime.yml's
# requires_ansible) runs the role and the playbook end to end, the modules and the action plugin's
# wait through Ansible, and the secrets rules (its no_log masking predates 2.19's data tagging):
# the tests marked floor run ansible and ansible-playbook from the floor core's venv on PostgreSQL
# 17 and from the newest on 18 (tests/functional/conftest.py, --floor-python). Each core and each
# major runs them for the cost of one run of each test, in the same pool of workers.
step_functional() {
    local marker=(-m "not slow")
    [ "$long" = 1 ] && marker=()
    pytest "${marker[@]}" --no-skips -n 3 "${by_file_in_conftest_order[@]}" --durations=25 \
        --floor-python "$(matrix_venv "${matrix_cores[-1]}")/bin/python" tests/functional | tee "$work/functional.log"
}

# The contributor's loop (CONTRIBUTING.md), at most five minutes: sanity,
# units and types on the newest core, then the modules' functional tests on PostgreSQL 18
# (the whole command runs them on 17 too).
module_tests=(tests/functional/test_enqueue_shards*.py tests/functional/test_shards_info_result.py)
step_quick() {
    local newest=${matrix_cores[0]}
    run_step "sanity $newest" step_sanity "$newest"
    run_step "units $newest" step_units "$newest"
    run_step types step_types
    run_step "functional, modules, pg18" pytest -m "not slow" --pg 18 -n 2 "${by_file_in_conftest_order[@]}" \
        --durations=10 "${module_tests[@]}"
}

# ---- molecule beside the other steps ----------------------------------------

# stop_tree PID...: SIGTERM to each process, then to everything that was under it.
stop_tree() {
    local pid children
    for pid in "$@"; do
        children=$(ps -o pid= --ppid "$pid" || true)
        kill -TERM "$pid" 2>/dev/null || true
        # shellcheck disable=SC2086 # one word per pid
        stop_tree $children
    done
}

molecule_log="$work/molecule.log" molecule_pid=
molecule_job() {
    trap molecule_ended EXIT
    run_matrix_step molecule "${matrix_molecule_cores[@]}"
}
# When molecule fails, the job stops the script and the step in its foreground.
molecule_ended() {
    local status=$? child
    [ "$status" = 0 ] && return
    echo "molecule failed (exit $status): stopping the other steps"
    kill -TERM $$
    for child in $(ps -o pid= --ppid $$); do
        [ "$child" = "$BASHPID" ] || stop_tree "$child"
    done
}
start_molecule() {
    echo "--- molecule runs beside the other steps; its output: $molecule_log (shown at the end)"
    molecule_job </dev/null >"$molecule_log" 2>&1 &
    molecule_pid=$!
}

# ---- the end: the one place that prints the results -------------------------

# At exit (hack/env.sh's at_exit), whatever ended the run: molecule stopped if
# it still runs, its log, the timings, the functional tests' summary line.
show_results() {
    local status=$1
    trap '' TERM   # the molecule job, stopped here, must not cut the report short
    if [ -n "$molecule_pid" ]; then
        stop_tree "$molecule_pid"
        wait "$molecule_pid" 2>/dev/null || true
    fi
    if [ -s "$molecule_log" ]; then
        printf '\n=== molecule, beside the other steps ===\n'
        cat "$molecule_log"
    fi
    printf '\n--- step timings ---\n'
    cat "$timings"
    printf '%-24s %5ss\n' "total" "$SECONDS"
    [ ! -f "$work/functional.log" ] || grep -E '^=+ .*[0-9]+ (passed|failed|errors?)' "$work/functional.log" | tail -n 1
    [ "$status" = 0 ] || echo "hack/test.sh failed (exit $status): the step that failed, or was stopped, is above" >&2
}
at_exit show_results

started=$SECONDS
bash hack/packages.sh "${steps[@]}"
printf '%-24s %5ss\n' packages $((SECONDS - started)) >>"$timings"

if [ "$serial" = 0 ] && [ ${#steps[@]} -gt 1 ] && [[ " ${steps[*]} " == *" molecule "* ]]; then
    start_molecule
    mapfile -t steps < <(printf '%s\n' "${steps[@]}" | grep -vx molecule)
fi
for step in "${steps[@]}"; do
    case "$step" in
        sanity) run_matrix_step "$step" "${matrix_test_cores[@]}" ;;
        units) run_matrix_side_by_side "$step" "${matrix_test_cores[@]}" ;;
        molecule) run_matrix_step "$step" "${matrix_molecule_cores[@]}" ;;
        quick) step_quick ;;
        *) run_step "$step" "step_$step" ;;
    esac
done
if [ -n "$molecule_pid" ]; then
    wait "$molecule_pid"
    molecule_pid=
fi
