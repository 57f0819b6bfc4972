#!/usr/bin/env bash
# ansible-test integration of awa.operations against real PostgreSQL 17 and 18
# with the real Awa 0.6.9 schema (a least-privilege database: owner, migrator,
# runtime role, as in Awa's docs/security.md), on the cores of the matrix's
# matrix_integration_cores (hack/matrix.sh), or the ones given:
#
#     bash hack/integration.sh            # every core
#     bash hack/integration.sh 2.21       # one core
#
# It starts one server per PostgreSQL major and gives each core a database of
# its own on it (the target changes the queues it tests). For each core it
# writes both majors' connections into tests/integration/integration_config.yml
# of its own staged copy of this repository (hack/env.sh) and runs ansible-test
# once: the target runs its scenarios on each server in turn. The cores run side
# by side, each output shown whole when all have ended. The servers stop at the
# end, also when something fails.
set -euo pipefail

targets=(awa_enqueue_shards)

# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" integration

cores=("$@")
[ ${#cores[@]} -gt 0 ] || cores=("${matrix_integration_cores[@]}")

servers="$work/servers"
stop_servers() {
    python - "$servers" <<'PYTHON'
import json, pathlib, sys
from awa_testbed.pgserver import PgServer
for described in pathlib.Path(sys.argv[1]).glob("pg*/server.json"):
    PgServer.from_description(json.loads(described.read_text())).destroy()
PYTHON
}
at_exit stop_servers

# start_server MAJOR CORE...: one detached server, one fresh Awa database per
# core, and for each core the variables tasks/server.yml reads, in
# $servers/pgMAJOR/CORE.yml (JSON is YAML).
start_server() {
    python - "$servers/pg$1" "$@" <<'PYTHON'
import json, pathlib, sys
from awa_testbed.awadb import AwaDatabaseFactory
from awa_testbed.pgserver import PgServer

folder, major, cores = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
folder.mkdir(parents=True)
server = PgServer(major)
server.start(detached=True)
(folder / "server.json").write_text(json.dumps(server.describe()))
factory = AwaDatabaseFactory(server)
for core in cores:
    db = factory.create(name="it_core_" + core.replace(".", "_"))
    db.setup_least_privilege(runtime_count=1)
    login = db.login_args("migrator")
    (folder / f"{core}.yml").write_text(json.dumps({
        "awa_postgresql_major": major,
        "awa_login_host": login["login_host"],
        "awa_login_port": login["login_port"],
        "awa_login_db": login["login_db"],
        "awa_login_user": login["login_user"],
        "awa_login_password": login["login_password"],
        "awa_runtime_role": db.roles["runtime1"].name,
    }, indent=2))
print(f"PostgreSQL {major} on port {server.port}: a database for ansible-core {', '.join(cores)}")
PYTHON
}

stage_collection
for major in "${matrix_postgresql[@]}"; do
    start_server "$major" "${cores[@]}"
done

# integration_config.yml of CORE: {"awa_servers": [the variables of each major's database]}.
core_config() {
    python - "$1" "${matrix_postgresql[@]/#/$servers/pg}" <<'PYTHON'
import json, pathlib, sys
core, folders = sys.argv[1], sys.argv[2:]
print(json.dumps({"awa_servers": [json.loads((pathlib.Path(folder) / f"{core}.yml").read_text())
                                  for folder in folders]}, indent=2))
PYTHON
}

# One core's run, in a staged copy of its own (ansible-test writes tests/output/ there), its output in a log:
# the cores run side by side - each is mostly one ansible-playbook waiting on the servers, so in turn they
# left one of two cores idle (164 s in turn on a fresh machine, each 46-48 s).
run_core() {
    local core=$1 copy="$work/stage-$1/ansible_collections/awa/operations" started=$SECONDS status=0
    mkdir -p "$(dirname "$copy")" && cp -a "$stage" "$copy"
    core_config "$core" > "$copy/tests/integration/integration_config.yml"
    # --local: the core's venv has psycopg (requirements/ansible-test.txt).
    (cd "$copy" && with_core "$core" ansible-test integration --local --python "${matrix_core_python[$core]}" \
        --color no "${targets[@]}") > "$work/integration-$core.log" 2>&1 || status=$?
    printf 'integration %s on PostgreSQL %s  %4ss%s\n' "$core" "${matrix_postgresql[*]}" $((SECONDS - started)) \
        "$([ "$status" = 0 ] || echo "  FAILED (exit $status)")" > "$work/integration-$core.result"
    return "$status"
}

# ansible-test makes the user's SSH key pair (~/.ansible/test/id_rsa) when it has none, and several
# at once on a fresh machine raced: one ssh-keygen wrote the key, the others found it half made, asked
# "Overwrite (y/n)?" and failed (2026-12-04). Made here first, with ansible-test's own command, they
# all find it.
ssh_key=~/.ansible/test/id_rsa
if [ ! -f "$ssh_key" ] || [ ! -f "$ssh_key.pub" ]; then
    rm -f "$ssh_key" "$ssh_key.pub"
    mkdir -p "$(dirname "$ssh_key")"
    ssh-keygen -m PEM -q -t rsa -N '' -f "$ssh_key"
fi

pids=()
for core in "${cores[@]}"; do
    run_core "$core" &
    pids+=($!)
done
failed=0
for index in "${!cores[@]}"; do
    wait "${pids[$index]}" || failed=1
done
for core in "${cores[@]}"; do
    printf '\n--- ansible-core %s (Python %s), PostgreSQL %s ---\n' "$core" "${matrix_core_python[$core]}" \
        "${matrix_postgresql[*]}"
    cat "$work/integration-$core.log"
done
printf '\n'
for core in "${cores[@]}"; do cat "$work/integration-$core.result"; done
[ "$failed" = 0 ]   # the exit status: 1 when a core failed
