#!/usr/bin/env bash
# The demo: an embedded PostgreSQL 18 with the real Awa schema and two real
# Awa applications under supervisord, then the state of their queue.
#
#     bash hack/demo.sh
#
# Everything it starts is stopped again when it ends (or is interrupted).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

venv=$(bash hack/bootstrap.sh)
export PATH="$venv/bin:$PATH"
export PYTHONPATH="$root/tests${PYTHONPATH:+:$PYTHONPATH}"
AWA_TESTBED_RUN_ID="demo-$$-$(date +%s)"
export AWA_TESTBED_RUN_ID

state=$(mktemp -d /tmp/awa-demo.XXXXXX)
cleanup() {
    python -m awa_testbed down --state "$state" >/dev/null 2>&1 || true
    python -m awa_testbed reap --run "$AWA_TESTBED_RUN_ID" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

python -m awa_testbed up --state "$state" --major 18 --apps 2 --queue demo
sleep 3
python - "$state" <<'EOF'
import json, sys
import psycopg
state = json.load(open(f"{sys.argv[1]}/state.json"))
with psycopg.connect(state["superuser_dsn"]) as conn:
    print("queue_meta:", conn.execute("SELECT queue, enqueue_shards FROM awa.queue_meta").fetchall())
    print("jobs by state:", conn.execute("SELECT state::text, count(*) FROM awa.jobs GROUP BY 1").fetchall())
    print("runtimes:", conn.execute("SELECT pid, healthy FROM awa.runtime_instances ORDER BY pid").fetchall())
EOF
