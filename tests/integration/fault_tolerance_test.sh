#!/usr/bin/env bash
# Fault tolerance with real processes on PostgreSQL (issue 4): during one
# experiment, kill -9 a worker mid-trial, kill -9 the coordinator and restart
# it on the same store, stop and restart PostgreSQL, and let one block family
# always crash. The experiment must finish with every trial recorded exactly
# once: the killed worker's trial re-run by another worker, the crashing
# trials failed with their reason after the same crash twice (retried once,
# then final: server/scheduler/retry_policy.h, though max_attempts is 3).
# Finally a worker drains on SIGTERM.
set -euo pipefail
build="$1"; src="$2"
work="$(mktemp -d)"
source "$src/tests/integration/pg.sh"
declare -A pids
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  pg_stop immediate
  [[ -n "${KEEP_WORK:-}" ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "== server"; tail -30 "$work"/server*.log; for f in "$work"/w*.log; do echo "== $f"; tail -15 "$f"; done; exit 1; }
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2; shift 2
  for _ in $(seq $((limit * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  fail "timed out waiting for $what"
}

pg_setup "$work"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr="127.0.0.1:$port"
start_server() {
  "$build/server/frontier-server" --listen "$addr" --store "$PG_URL" --lease-timeout 4 --heartbeat-interval 1 \
    --restart-grace 8 >> "$work/server.log" 2>&1 &
  pids[server]=$!
}
start_worker() {
  FRONTIER_REAL_TRIAL="$build/worker/frontier-trial" "$build/worker/frontier-worker" --coordinator "$addr" \
    --threads-per-trial 1 --name "$1" --trial-binary "$src/tests/integration/crashing_trial.sh" --cold-trials \
    --drain-timeout 60 > "$work/$1.log" 2>&1 &
  pids[$1]=$!
}
frontier="$build/server/frontier"
start_server
wait_for 20 "the coordinator" "$frontier" list --server "$addr"
start_worker w1
start_worker w2
exp="$("$frontier" submit "$src/tests/integration/faults.yaml" --server "$addr")"
total=$(pg_query "SELECT COUNT(*) FROM trials WHERE experiment_id = '$exp'")
echo "experiment $exp: $total trials"
running_on() { [[ -n "$(pg_query "SELECT id FROM trials WHERE state = 'running' AND worker_id = '$1' LIMIT 1")" ]]; }
# A trial the worker leased under a second ago: far from its end (trials take seconds).
fresh_trial_on() {
  pg_query "SELECT id FROM trials WHERE state = 'running' AND worker_id = '$1'
            AND started_ms > extract(epoch FROM clock_timestamp()) * 1000 - 1000 LIMIT 1"
}
has_fresh_trial() { [[ -n "$(fresh_trial_on "$1")" ]]; }
wid() { pg_query "SELECT id FROM workers WHERE host = '$1' ORDER BY seq DESC LIMIT 1"; }  # by --name
registered() { [[ -n "$(wid "$1")" ]]; }
finished_at_least() {
  [[ $(pg_query "SELECT COUNT(*) FROM trials WHERE experiment_id = '$exp' AND state IN ('completed','failed')") -ge $1 ]]
}
experiment_completed() { [[ "$(pg_query "SELECT state FROM experiments WHERE id = '$exp'")" == completed ]]; }

# 1. kill -9 a worker in the middle of a trial.
wait_for 30 "w1 to register" registered w1
w1_id=$(wid w1)
wait_for 60 "a fresh trial on $w1_id" has_fresh_trial "$w1_id"
victim=$(fresh_trial_on "$w1_id")
kill -9 "${pids[w1]}"
wait "${pids[w1]}" 2>/dev/null || true
kill -0 "${pids[w1]}" 2>/dev/null && fail "worker w1 survived kill -9"
unset 'pids[w1]'
echo "killed worker $w1_id (kill -9) during $victim"
start_worker w3

# 2. kill -9 the coordinator, then start it again on the same store.
wait_for 60 "two finished trials" finished_at_least 2
kill -9 "${pids[server]}"; unset 'pids[server]'
echo "killed the coordinator"
sleep 2
start_server
echo "restarted the coordinator"

# 3. stop PostgreSQL for a few seconds in the middle of the run.
wait_for 60 "three finished trials" finished_at_least 3
pg_stop fast
echo "stopped PostgreSQL"
sleep 4
pg_start
echo "restarted PostgreSQL"

wait_for 240 "the experiment to complete" experiment_completed
echo "experiment completed"

# Every trial recorded exactly once, in a final state with the expected outcome.
rows=$(pg_query "SELECT COUNT(*), COUNT(DISTINCT id) FROM trials WHERE experiment_id = '$exp'")
[[ "$rows" == "$total|$total" ]] || fail "trials changed: $rows, expected $total|$total"
completed=$(pg_query "SELECT COUNT(*) FROM trials WHERE experiment_id = '$exp' AND state = 'completed' AND result_json <> ''")
crashed=$(pg_query "SELECT COUNT(*) FROM trials WHERE experiment_id = '$exp' AND state = 'failed' AND config_json LIKE '%bottleneck%' AND attempt = 2 AND error LIKE '%ended without a result (signal SIGSEGV%(final: attempt 1 failed the same way)'")
[[ $completed -eq $((total - 2)) ]] || fail "completed $completed of $((total - 2)) runnable trials"
[[ $crashed -eq 2 ]] || fail "expected the 2 bottleneck trials failed after the same crash on 2 attempts, got $crashed"
victim_row=$(pg_query "SELECT state, attempt > 1, worker_id <> '$w1_id' FROM trials WHERE id = '$victim'")
[[ "$victim_row" == "completed|t|t" ]] || fail "the killed worker's trial $victim: $victim_row"
echo "all $total trials final: $completed completed, $crashed failed after the same crash twice; $victim re-run elsewhere"
pg_query "SELECT state, attempt, worker_id, left(error, 60) FROM trials WHERE experiment_id = '$exp' ORDER BY seq"

# 4. A worker drains on SIGTERM: its running trial finishes and is recorded.
exp2="$("$frontier" submit "$src/tests/integration/faults.yaml" --server "$addr")"
w2_id=$(wid w2)
wait_for 60 "a trial on w2" running_on "$w2_id"
draining=$(pg_query "SELECT id FROM trials WHERE state = 'running' AND worker_id = '$w2_id' LIMIT 1")
kill -TERM "${pids[w2]}"
set +e; wait "${pids[w2]}"; rc=$?; set -e
unset 'pids[w2]'
[[ $rc -eq 0 ]] || fail "draining worker exited $rc"
state=$(pg_query "SELECT state FROM trials WHERE id = '$draining'")
[[ "$state" == completed || "$state" == failed ]] || fail "drained trial $draining is $state"
echo "w2 drained: $draining $state, exit 0"
"$frontier" cancel "$exp2" --server "$addr" > /dev/null
echo "fault tolerance ok"
