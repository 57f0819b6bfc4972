#!/usr/bin/env bash
# The benchmarks, from a fresh clone: creates .venv like hack/test.sh, then
#
#     bash benchmarks/run.sh            # full run (about 20 minutes on 2 cores)
#     bash benchmarks/run.sh --quick    # a few minutes
#     bash benchmarks/run.sh --majors 18 --suites change scale
#
# Prints tables, writes benchmarks/results/<timestamp>.json. Every server and
# program it starts is stopped again when it ends (or is interrupted).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

venv=$(bash hack/bootstrap.sh)
export PATH="$venv/bin:$PATH"
export PYTHONPATH="$root/tests:$root${PYTHONPATH:+:$PYTHONPATH}"
export ANSIBLE_NOCOLOR=1 NO_COLOR=1
AWA_TESTBED_RUN_ID="bench-$$-$(date +%s)"
export AWA_TESTBED_RUN_ID

cleanup() { python -m awa_testbed reap --run "$AWA_TESTBED_RUN_ID" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

python -m benchmarks "$@"
