#!/usr/bin/env bash
# ansible-test integration of awa.operations against real PostgreSQL 17 and 18
# with the real Awa 0.6.9 schema (a least-privilege database: owner, migrator,
# runtime role, as in Awa's docs/security.md).
#
#     bash hack/integration.sh
#
# It stages a copy of this repository for ansible-test (hack/env.sh). For each
# major it starts a server and database with the test bed, writes
# tests/integration/integration_config.yml into the staged copy, runs
# ansible-test, and stops the server, also when something fails.
set -euo pipefail

majors=(17 18)
targets=(awa_enqueue_shards)

# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" integration

on_exit() {
    local state
    for state in "$work"/pg*; do
        [ -d "$state" ] && python -m awa_testbed down --state "$state" >/dev/null 2>&1
    done
}

stage_collection

# The variables tasks/main.yml reads, from the test bed's state.json (JSON is YAML).
write_integration_config() {
    python - "$1" <<'PYTHON'
import json, sys
state = json.load(open(sys.argv[1], encoding="utf-8"))
login = state["login"]
print(json.dumps({
    "awa_postgresql_major": state["major"],
    "awa_login_host": login["login_host"],
    "awa_login_port": login["login_port"],
    "awa_login_db": login["login_db"],
    "awa_login_user": login["login_user"],
    "awa_login_password": login["login_password"],
    "awa_runtime_role": state["runtime_roles"][0],
}, indent=2))
PYTHON
}

for major in "${majors[@]}"; do
    printf '\n--- PostgreSQL %s ---\n' "$major"
    state="$work/pg$major"
    python -m awa_testbed up --state "$state" --major "$major" --apps 0
    write_integration_config "$state/state.json" > "$stage/tests/integration/integration_config.yml"
    (cd "$stage" && ansible-test integration --venv --python 3.11 --requirements --color no "${targets[@]}" 2>&1) \
        | without_pip_noise
    python -m awa_testbed down --state "$state"
done
