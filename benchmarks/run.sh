#!/usr/bin/env bash
# The benchmarks, from a fresh clone: creates .venv like hack/test.sh, then
#
#     bash benchmarks/run.sh            # full run (about 20 minutes on 2 cores)
#     bash benchmarks/run.sh --quick    # a few minutes
#     bash benchmarks/run.sh --majors 18 --suites change scale
#
# Prints tables, writes each suite's summary to benchmarks/results/<timestamp>.json
# and the raw samples to benchmarks/raw/<timestamp>.json.gz (not kept by git).
# Every server and program it starts is stopped again when it ends (or is
# interrupted).
set -euo pipefail

# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/../hack/env.sh" bench

python -m benchmarks "$@"
