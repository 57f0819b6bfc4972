#!/usr/bin/env bash
# The project's one test command. From a fresh clone on a fresh machine:
#
#     bash hack/test.sh                      # everything
#     bash hack/test.sh --long               # everything, with the long soak
#     bash hack/test.sh sanity units         # only some steps (names below)
#     bash hack/test.sh --core 2.20 sanity   # steps of the matrix on one core only
#
# Steps: changelog sanity units lint docs importer ee integration molecule functional.
# sanity, units and integration run on every ansible-core of the matrix
# (hack/matrix.sh), molecule on the newest. It creates the venvs with
# pinned dependencies from PyPI (hack/bootstrap.sh), starts every server the
# tests use (PostgreSQL 17 and 18 from PyPI wheels) and stops them again, and
# ends with the step timings and the pytest summary line of the functional tests.
#
# When molecule runs with other steps, they run in turn beside it, in a second
# hack/test.sh in the background whose output is shown when molecule ends:
# molecule mostly waits on its hosts' units and runtimes (a third of one core),
# and the whole command must stay under 30 minutes on 2 cores.
# AWA_TEST_SERIAL=1 runs every step in turn instead.
set -euo pipefail

long=0
steps=()
only_cores=()
while [ $# -gt 0 ]; do
    case "$1" in
        --long) long=1 ;;
        --core) only_cores+=("${2:?--core needs a version, for example 2.20}"); shift ;;
        -h|--help) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d'; exit 0 ;;
        *) steps+=("$1") ;;
    esac
    shift
done
all_steps=(changelog sanity units lint docs importer ee integration molecule functional)
[ ${#steps[@]} -gt 0 ] || steps=("${all_steps[@]}")

# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" test
bootstrap_seconds=$SECONDS

# The cores a matrix step runs on: the given list, or all (in matrix order).
cores_of() {
    local core
    for core in "$@"; do
        if [ ${#only_cores[@]} = 0 ] || [[ " ${only_cores[*]} " == *" $core "* ]]; then echo "$core"; fi
    done
}
for core in "${only_cores[@]}"; do
    [ -n "${matrix_core_python[$core]:-}" ] || { echo "unknown core $core (matrix: ${matrix_cores[*]})" >&2; exit 2; }
done

timings=("$(printf '%-22s %4ss' "bootstrap" "$bootstrap_seconds")")
run_step() {
    local name=$1; shift
    local started=$SECONDS
    printf '\n=== %s ===\n' "$name"
    "$@"
    timings+=("$(printf '%-22s %4ss' "$name" $((SECONDS - started)))")
    # A run beside molecule hands each step's timing to the run that started it.
    [ -z "${AWA_TEST_TIMINGS_FILE:-}" ] || printf '%s\n' "${timings[-1]}" >>"$AWA_TEST_TIMINGS_FILE"
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
print_timings() {
    printf '\n--- step timings ---\n'
    printf '%s\n' "${timings[@]}"
}

step_changelog() { antsibull-changelog lint; }

# Without --python: compile and import run on every interpreter of the matrix
# (.venvs/interpreters is on PATH), the other tests on the core's own Python.
step_sanity() {
    stage_collection
    (cd "$stage" && with_core "$1" ansible-test sanity --venv --color no 2>&1) | without_pip_noise
}

# --local: the core's venv has the unit test requirements (requirements/ansible-test.txt).
step_units() {
    stage_collection
    (cd "$stage" && with_core "$1" ansible-test units --local --python "${matrix_core_python[$1]}" --color no 2>&1)
}

# A plain `ansible-lint` installs the collection itself (.ansible-lint); here it
# uses the checkout through ANSIBLE_COLLECTIONS_PATH instead, offline.
step_lint() { ansible-lint --offline; }

step_docs() { bash hack/docs.sh check; }

# The artifact Galaxy would receive: build it once for the importer and ee steps.
artifact=
build_artifact() {
    [ -n "$artifact" ] && return
    local out="$work/build"
    mkdir -p "$out"
    ansible-galaxy collection build --output-path "$out" --force >/dev/null
    artifact=$(ls "$out"/awa-operations-*.tar.gz)
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
    mapfile -t cores < <(cores_of "${matrix_cores[@]}")
    bash hack/integration.sh "${cores[@]}"
}

# Molecule's shared state (.config/molecule/config.yml): the default scenario
# starts the test beds first and stops them last. Each core gets a fresh state
# folder and its scenarios (hack/matrix.sh).
# The fleet scenario boots Debian hosts with systemd-nspawn: hack/hosts.sh
# installs the tools and builds (or finds) their cached root filesystem.
step_molecule() {
    local scenarios
    read -ra scenarios <<<"${matrix_molecule_scenarios[$1]}"
    if [[ " ${scenarios[*]} " == *" fleet "* ]]; then bash hack/hosts.sh; fi
    (cd "$root" && MOLECULE_EPHEMERAL_DIRECTORY="$work/molecule-$1" \
        AWA_MOLECULE_TESTBEDS="${matrix_molecule_testbeds[$1]-17 18}" with_core "$1" molecule test "${scenarios[@]}")
}

step_functional() {
    local marker=(-m "not slow")
    [ "$long" = 1 ] && marker=()
    # (beside molecule, the run that started this one prints them)
    [ -n "${AWA_TEST_TIMINGS_FILE:-}" ] || print_timings
    # Two workers, a file's tests on one of them (module fixtures, ordered scenarios): most of a test is
    # waiting on servers and runtimes. The slowest tests are listed: the whole command has to stay under
    # 30 minutes on 2 cores.
    pytest "${marker[@]}" -n 2 --dist loadfile --durations=25 tests/functional
}

# With molecule and other steps: molecule here, every other step in turn in a
# second run beside it (AWA_TEST_SERIAL=1 in that run), each in its own output.
beside=() beside_pid=
if [ "${AWA_TEST_SERIAL:-0}" != 1 ] && [[ " ${steps[*]} " == *" molecule "* ]]; then
    for step in "${steps[@]}"; do [ "$step" = molecule ] || beside+=("$step"); done
    steps=(molecule)
fi
start_beside() {
    [ ${#beside[@]} -gt 0 ] || return 0
    local options=() core
    for core in "${only_cores[@]}"; do options+=(--core "$core"); done
    [ "$long" = 0 ] || options+=(--long)
    echo "--- beside molecule, in the background: ${beside[*]}"
    # Its own process group, so a failing or interrupted run stops it too.
    AWA_TEST_SERIAL=1 AWA_TEST_TIMINGS_FILE="$work/beside-timings" \
        setsid bash "$0" "${options[@]}" "${beside[@]}" >"$work/beside.log" 2>&1 &
    beside_pid=$!
}
# After molecule: the other run's output, then every step's timing and the
# functional tests' summary line, last as in a serial run.
join_beside() {
    [ -n "$beside_pid" ] || return 0
    local status=0
    wait "$beside_pid" || status=$?
    beside_pid=
    printf '\n=== beside molecule: %s ===\n' "${beside[*]}"
    cat "$work/beside.log"
    [ ! -f "$work/beside-timings" ] || mapfile -t -O ${#timings[@]} timings <"$work/beside-timings"
    print_timings
    grep -E '^=+ .*[0-9]+ (passed|failed|errors?)' "$work/beside.log" | tail -n 1 || true
    if [ "$status" != 0 ]; then
        echo "a step beside molecule failed (exit $status): its output is above" >&2
        return "$status"
    fi
}
on_exit() { [ -z "$beside_pid" ] || kill -TERM -- "-$beside_pid" 2>/dev/null || true; }

start_beside
for step in "${steps[@]}"; do
    case "$step" in
        sanity|units) run_matrix_step "$step" "${matrix_cores[@]}" ;;
        molecule) run_matrix_step "$step" "${matrix_molecule_cores[@]}"; join_beside ;;
        *)
            case " ${all_steps[*]} " in
                *" $step "*) run_step "$step" "step_$step" ;;
                *) echo "unknown step: $step (known: ${all_steps[*]})" >&2; exit 2 ;;
            esac ;;
    esac
done
if [ -z "${AWA_TEST_TIMINGS_FILE:-}" ] && [ ${#beside[@]} = 0 ] && [[ " ${steps[*]} " != *" functional "* ]]; then
    print_timings
fi
