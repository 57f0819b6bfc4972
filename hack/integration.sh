#!/usr/bin/env bash
# ansible-test integration of awa.operations against real PostgreSQL 17 and 18
# with the real Awa 0.6.9 schema (a least-privilege database: owner, migrator,
# runtime role, as in Awa's docs/security.md).
#
#     bash hack/integration.sh [STAGED_COLLECTION]
#
# STAGED_COLLECTION is a copy of this repository at
# .../ansible_collections/awa/operations outside any git work tree (hack/test.sh
# passes its own); without it one is made. For each major the script starts a
# server and database with the test bed, writes
# tests/integration/integration_config.yml into the staged copy, runs
# ansible-test, and stops the server, also when something fails.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
majors=(17 18)
targets=(awa_enqueue_shards)

venv=$(bash "$root/hack/bootstrap.sh")
export PATH="$venv/bin:$PATH"
export PYTHONPATH="$root/tests${PYTHONPATH:+:$PYTHONPATH}"
export AWA_TESTBED_RUN_ID="${AWA_TESTBED_RUN_ID:-integration-$$-$(date +%s)}"

work=$(mktemp -d /tmp/awa-ops-integration.XXXXXX)
stop_servers() {
    local state
    for state in "$work"/pg*; do
        [ -d "$state" ] && python -m awa_testbed down --state "$state" >/dev/null 2>&1
    done
    rm -rf "$work"
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

stage=${1:-}
if [ -z "$stage" ]; then
    stage="$work/stage/ansible_collections/awa/operations"
    mkdir -p "$stage"
    (cd "$root" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$stage")
fi

# The machine's pip.conf names file:// indexes that do not exist; drop pip's
# line about each, keep everything else (and ansible-test's exit status).
without_pip_noise() { grep -vE --line-buffered 'is ignored: it is neither a file nor a directory' || true; }

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
