#!/usr/bin/env bash
# Refresh what README.md's quick start shows each command printing
# (docs/transcripts/quick-start.md): run the quick start as written
# (tests/functional/test_readme_quick_start.py, with AWA_README_REFRESH=1) and
# write what its commands printed into the transcript. Run it after a change
# to what the role prints, then review the diff:
#
#     bash hack/readme.sh
#
# Without the refresh, the same test (in hack/test.sh functional) fails when
# the transcript shows other output than the commands print.
set -euo pipefail

# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" readme

AWA_README_REFRESH=1 python -m pytest -p no:cacheprovider tests/functional/test_readme_quick_start.py "$@"
git --no-pager diff --stat -- docs/transcripts/quick-start.md
