#!/usr/bin/env bash
# Every SQL query of the Grafana dashboards (metrics/grafana/dashboards, the
# PostgreSQL datasource) against the PostgreSQL store (issue 6): a throwaway
# PostgreSQL 15 (tests/integration/pg.sh), the schema made by the store's own
# migrations (frontier-server on it), and the data of a real experiment run
# on it by one worker. Each query must be accepted and return what the
# experiment implies (one scatter point per variant, one for the baseline,
# one table row per configuration, no failed trials).
#   metrics_sql_postgres_test.sh BUILD_DIR SOURCE_DIR
# FRONTIER_TRIAL_BINARY overrides BUILD_DIR/worker/frontier-trial; KEEP_WORK=1 keeps the temporary folder.
set -euo pipefail
build="$1"; src="$2"
trial_binary="${FRONTIER_TRIAL_BINARY:-$build/worker/frontier-trial}"
work="$(mktemp -d)"
source "$src/tests/integration/pg.sh"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pg_stop immediate
  [[ -n "${KEEP_WORK:-}" ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "== $f"; tail -25 "$f"; done; exit 1; }
[[ -x "$trial_binary" ]] || fail "no trial runner at $trial_binary (build with LibTorch or set FRONTIER_TRIAL_BINARY)"

pg_setup "$work"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr="127.0.0.1:$port"
"$build/server/frontier-server" --listen "$addr" --store "$PG_URL" --metrics-listen 0 > "$work/server.log" 2>&1 &
pids+=($!)
"$build/worker/frontier-worker" --coordinator "$addr" --trial-binary "$trial_binary" --threads-per-trial 1 \
  --name sql-w1 --metrics-listen 0 > "$work/worker.log" 2>&1 & pids+=($!)
frontier="$build/server/frontier"
exp=""
for _ in $(seq 50); do exp="$("$frontier" submit "$src/tests/integration/tiny.yaml" --server "$addr" 2> /dev/null)" && break; sleep 0.2; done
[[ -n "$exp" ]] || fail "cannot submit to frontier-server on PostgreSQL"
echo "submitted $exp to a coordinator on PostgreSQL"
timeout 240 "$frontier" watch "$exp" --server "$addr" > "$work/watch.log" || fail "the experiment did not complete"
configs=$(pg_query "SELECT COUNT(DISTINCT config_json) FROM trials WHERE experiment_id = '$exp'")
/usr/bin/python3 "$src/tests/integration/metrics_check.py" sql --metrics-dir "$src/metrics" --experiment "$exp" \
  --configs "$configs" --postgres "$PG_URL" || fail "dashboard SQL on PostgreSQL"
echo "dashboard SQL on PostgreSQL ok"
