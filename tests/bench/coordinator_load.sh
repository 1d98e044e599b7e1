#!/usr/bin/env bash
# Coordinator load benchmark (issue 4), side by side in one run:
#  - simulated workers (load_generator) against a real frontier-server on
#    loopback, on SQLite and on PostgreSQL, at 16, 64 and 256 workers:
#    trials leased+completed per second, p50/p99 RPC latency;
#  - the same simulated work through Optuna's RDB storage on the same
#    PostgreSQL (ask/tell loops in N processes);
#  - the read queries at 100,000 completed trials (REPORT_TRIALS), on each
#    store: the Pareto query, the report as a table and as JSON, `frontier
#    trials` as CSV and the HTML page, each one CLI command's wall time, and
#    the coordinator's peak resident memory; then, on PostgreSQL, Optuna's
#    study load and best-trials query over a study of as many trials on the
#    same server (tests/bench/optuna_report.py).
# DURABILITY="fast durable" runs the load and Optuna sections once per mode on
# the same PostgreSQL, restarted between (tests/bench/pg_durability.sh): fast
# is fsync=off, durable is fsync=on and synchronous_commit=on.
# usage: tests/bench/coordinator_load.sh [BUILD_DIR] [TRIALS_PER_RUN]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"; trials="${2:-3000}"
work="$(mktemp -d)"; server_pid=""
source "$root/tests/integration/pg.sh"
source "$root/tests/bench/pg_durability.sh"
cleanup() { [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; pg_stop immediate; [[ -n "${KEEP_LOG:-}" ]] && cp "$work/server.log" "$KEEP_LOG" && cp "$PG_DIR/server.log" "$KEEP_LOG.pg"; rm -rf "$work"; }
trap cleanup EXIT
pg_setup "$work"
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start_server() {  # start_server STORE
  port=$(free_port); addr="127.0.0.1:$port"
  ${SERVER_PRELOAD:+env LD_PRELOAD=$SERVER_PRELOAD} "${SERVER_BIN:-$build/server/frontier-server}" --listen "$addr" --store "$1" --metrics-listen "" > "$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do "$build/server/frontier" list --server "$addr" > /dev/null 2>&1 && return; sleep 0.1; done
  echo "server did not start"; cat "$work/server.log"; exit 1
}
stop_server() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""; }
fresh_pg() { pg_query "DROP DATABASE IF EXISTS $1" > /dev/null; /usr/bin/psql -q "${PG_URL%/*}/postgres" -c "CREATE DATABASE $1"; echo "${PG_URL%/*}/$1"; }

# SECTIONS: which parts to run (default all): load optuna report
# STORES / WORKERS: the stores and worker counts of the load section (Optuna: the counts up to 64).
# LOADGEN_ARGS: more load_generator flags (--lease-next 0: a LeaseTrial call per trial, no lease with the completion).
# SERVER_BIN / LOADGEN_BIN: another frontier-server / load_generator binary (e.g. a build of the previous
# commit, for before/after).
# PERF_LOAD=PREFIX / PERF_REPORT=FILE: perf record the coordinator during the load runs / the report query.
# PG_OPTIONS: more PostgreSQL settings (-c name=value ...), e.g. shared_preload_libraries=pg_stat_statements
# with PG_STATEMENTS=PREFIX: the load runs' costliest statements into PREFIX.WORKERS.
# KEEP_LOG=FILE: the coordinator's log into FILE and PostgreSQL's into FILE.pg.
# REPORT_TRIALS: the completed trials of the report section (default 100000).
sections="${SECTIONS:-load optuna report}"
stores="${STORES:-sqlite postgresql}"; worker_counts="${WORKERS:-16 64 256}"
# The load and Optuna sections at one durability of PostgreSQL (SQLite runs as always).
run_mode() {
if [[ " $sections " == *" load "* ]]; then
echo "== frontier-server, $trials trials per run (no training; each trial: lease, one progress, complete, the next lease with the completion unless --lease-next 0); PostgreSQL $PG_DURABILITY"
for store in $stores; do
  [[ $store == sqlite && $PG_DURABILITY != "${durabilities%% *}" ]] && continue  # SQLite once
  for workers in $worker_counts; do
    if [[ $store == sqlite ]]; then url="$work/load-$workers.db"; else url=$(fresh_pg "load$workers"); fi
    start_server "$url"
    [[ -n "${PERF_LOAD:-}" ]] && { perf record -F 999 -g -p "$server_pid" -o "$PERF_LOAD.$store$workers" > /dev/null 2>&1 & perf_pid=$!; sleep 0.5; }
    pg_pid=0; [[ $store == postgresql ]] && pg_pid=$(head -1 "$PG_DIR/data/postmaster.pid")
    line=$("${LOADGEN_BIN:-$build/tests/bench/load_generator}" --server "$addr" --workers "$workers" --trials "$trials" \
      --cpu-of "coordinator=$server_pid,postgresql=$pg_pid" ${LOADGEN_ARGS:-})
    [[ -n "${PERF_LOAD:-}" ]] && { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
    [[ -n "${PG_STATEMENTS:-}" && $store == postgresql ]] && /usr/bin/psql -At "$url" -F ' | ' -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT round(total_exec_time::numeric, 1), calls, round((total_exec_time / calls)::numeric, 3), left(regexp_replace(query, '\s+', ' ', 'g'), 90) FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 8" > "$PG_STATEMENTS.$workers" 2>&1
    stop_server
    label=$store; [[ $store == postgresql ]] && label="postgresql ($PG_DURABILITY)"
    echo "$label $workers workers: $(echo "$line" | /usr/bin/python3 "$root/tests/bench/load_summary.py")"
    echo "  $line"
  done
done
fi
if [[ " $sections " == *" optuna "* ]]; then
echo "== Optuna RDB storage on the same PostgreSQL ($trials trials per run); PostgreSQL $PG_DURABILITY"
for workers in $worker_counts; do
  (( workers > 64 )) && continue  # one Python process per worker
  url=$(fresh_pg "optuna$workers")
  line=$(/usr/bin/python3 "$root/tests/bench/optuna_load.py" "${url/postgresql:/postgresql+psycopg2:}" "$workers" "$trials")
  echo "optuna ($PG_DURABILITY) $workers processes: $line"
done
fi
}
durabilities="${DURABILITY:-fast}"
for mode in $durabilities; do
  pg_durability "$mode"
  run_mode
done

if [[ " $sections " == *" report "* ]]; then
report_trials="${REPORT_TRIALS:-100000}"
echo "== the read queries at $report_trials completed trials (wall time of each CLI command against the coordinator)"
for store in $stores; do
  if [[ $store == sqlite ]]; then url="$work/big.db"; else url=$(fresh_pg big); fi
  fill=$("$build/tests/bench/load_generator" --fill-store "$url" --trials "$report_trials")
  exp=$(echo "$fill" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["experiment"])')
  # Finish every trial with a synthetic result in one statement.
  if [[ $store == sqlite ]]; then
    /usr/bin/python3 - "$url" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("""UPDATE trials SET state = 'completed', attempt = 1, finished_ms = 3, result_json = json_object(
  'status', 'completed', 'val_accuracy', 0.8 + (abs(random()) % 1000) / 10000.0,
  'test_accuracy', 0.8 + (abs(random()) % 1000) / 10000.0,
  'step_time_ms', json_object('median', 10 + (abs(random()) % 1000) / 1000.0),
  'throughput', json_object('samples_per_s', 1000 + (abs(random()) % 1000) / 10.0),
  'mfu', 0.3, 'peak_memory_mb', 100, 'params', 1000)""")
db.execute("UPDATE experiments SET state = 'completed'")
db.commit()
PY
  else
    /usr/bin/psql -At "$url" -c "UPDATE trials SET state = 'completed', attempt = 1, finished_ms = 3, result_json = json_build_object(
      'status', 'completed', 'val_accuracy', 0.8 + 0.1 * random(), 'test_accuracy', 0.8 + 0.1 * random(),
      'step_time_ms', json_build_object('median', 10 + random()),
      'throughput', json_build_object('samples_per_s', 1000 + 100 * random()),
      'mfu', 0.3, 'peak_memory_mb', 100, 'params', 1000)::text" > /dev/null
    /usr/bin/psql -At "$url" -c "UPDATE experiments SET state = 'completed'" > /dev/null
  fi
  start_server "$url"
  [[ -n "${PERF_REPORT:-}" ]] && { perf record -F 499 -g -p "$server_pid" -o "$PERF_REPORT" > /dev/null 2>&1 & perf_pid=$!; sleep 0.5; }
  # timed LABEL OUT ARGS...: one CLI command against the coordinator, its output into OUT; appends
  # "LABEL S s (RSS MiB)" to $times: the wall time and the coordinator's peak resident memory during
  # the command (the peak is reset before it: clear_refs 5; memory glibc kept from an earlier query
  # counts, so the largest answer, the JSON report, goes last).
  times=""
  timed() {
    local label=$1 out=$2; shift 2
    echo 5 > "/proc/$server_pid/clear_refs"
    local t0; t0=$(date +%s.%N)
    "$build/server/frontier" "$@" --server "$addr" > "$out" || { echo "$label failed: frontier $*"; exit 1; }
    local s; s=$(/usr/bin/python3 -c "print(round($(date +%s.%N) - $t0, 3))")
    times+="${times:+, }$label $s s ($(awk '/VmHWM/ {printf "%.0f", $2/1024}' "/proc/$server_pid/status") MiB)"
  }
  # The Pareto query: statistics over every config, front, hypervolume, parity; the front as JSON.
  timed pareto "$work/pareto.json" pareto "$exp" --output json
  timed "pareto again" /dev/null pareto "$exp" --output json
  timed "report table" "$work/report.txt" report "$exp"
  timed "trials csv" "$work/trials.csv" trials "$exp" --output csv
  timed "html page" /dev/null report "$exp" --html "$work/report.html"
  timed "report json" "$work/report.json" report "$exp" --output json
  [[ -n "${PERF_REPORT:-}" ]] && { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
  stop_server; [[ -z "${SHOW_LOG:-}" ]] || grep "report " "$work/server.log" || true
  rows=$(($(wc -l < "$work/trials.csv") - 1))
  (( rows == report_trials )) || { echo "frontier trials listed $rows trials, not $report_trials"; exit 1; }
  echo "$store: $times; the page $(($(wc -c < "$work/report.html") / 1024)) KiB," \
       "the table $(wc -l < "$work/report.txt") lines, the CSV $rows rows"
  if [[ $store == postgresql ]]; then
    optuna_url=$(fresh_pg optunabig)
    echo "optuna on the same PostgreSQL: $(/usr/bin/python3 "$root/tests/bench/optuna_report.py" "${optuna_url/postgresql:/postgresql+psycopg2:}" "$report_trials")"
  fi
done
fi
