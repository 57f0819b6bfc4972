#!/usr/bin/env bash
# The test command's own time, from a clean clone of this checkout's HEAD, as
# CI runs it (bash .ci/run), quiet or beside busy loops:
#
#     bash benchmarks/test_command.sh                  # one run, quiet
#     bash benchmarks/test_command.sh --loops 2 --runs 2
#
# --loops N keeps N shell busy loops running during each run (on 2 cores, two
# about double the command's time); --runs K runs it K times in a row, each in
# a fresh clone. Each run's log stays in its clone's folder (printed). Prints a
# table: run, loops, exit status, minutes, and the slowest steps.
# Needs root, as the test command does; nothing else may share its state
# (another test run, molecule, a benchmark).
set -euo pipefail

loops=0
runs=1
while [ $# -gt 0 ]; do
    case "$1" in
        --loops) loops=${2:?--loops needs a number}; shift ;;
        --runs) runs=${2:?--runs needs a number}; shift ;;
        -h|--help) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

busy=()
stop_busy() {
    [ ${#busy[@]} = 0 ] || kill "${busy[@]}" 2>/dev/null || true
    busy=()
}
trap stop_busy EXIT

rows=()
for run in $(seq "$runs"); do
    folder=$(mktemp -d /tmp/awa-test-command.XXXXXX)
    git clone -q "$root" "$folder/main"
    for _ in $(seq "$loops"); do
        sh -c 'while :; do :; done' &
        busy+=($!)
    done
    started=$SECONDS
    status=0
    (cd "$folder/main" && bash .ci/run) >"$folder/run.log" 2>&1 || status=$?
    stop_busy
    minutes=$(awk -v s=$((SECONDS - started)) 'BEGIN { printf "%.1f", s / 60 }')
    # The three slowest steps, from the timings the test command prints last.
    slowest=$(sed -n '/^--- step timings ---$/,/^total /p' "$folder/run.log" | sed '1d;$d' \
        | awk '{ seconds = $NF; sub(/s$/, "", seconds); $NF = ""; sub(/ +$/, ""); print seconds "\t" $0 }' \
        | sort -n -r | head -n 3 | awk -F '\t' '{ printf "%s%s %ss", sep, $2, $1; sep = ", " }')
    rows+=("$(printf '| %s | %s | %s | %s | %s |' "$run" "$loops" "$status" "$minutes" "$slowest")")
    echo "run $run: exit $status after $minutes minutes; log $folder/run.log" >&2
done

printf '| run | busy loops | exit | minutes | slowest steps |\n|---|---|---|---|---|\n'
printf '%s\n' "${rows[@]}"
