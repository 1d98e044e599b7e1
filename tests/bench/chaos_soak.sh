#!/usr/bin/env bash
# Chaos soak (issue 14): simulated workers (load_generator --soak-worker, one
# process each) against a real frontier-server on a throwaway PostgreSQL with
# durability on (fsync=on, synchronous_commit=on), while a chaos loop, at
# random moments, kill -9s a random worker (and starts another in its place),
# kill -9s the coordinator and restarts it, or restarts PostgreSQL
# (immediate stop: a crash, recovered from the WAL at start). Experiments are
# submitted as the queue runs low. When the time is up the chaos stops, the
# remaining trials are worked off, and the store is checked against the
# workers' ledger (load_generator.cc): every trial completed exactly once with
# the result of an attempt the ledger sent, every accepted completion stored,
# none accepted for two attempts; the coordinator never exited by itself and
# stops within 10 s of SIGTERM at the end.
# Prints the counts and the number of each fault; exit 1 when they disagree.
#
# usage: tests/bench/chaos_soak.sh [BUILD_DIR] [SECONDS] [WORKERS]
#   (defaults: build, 300 s, 64 workers; SEED=N for a repeatable fault sequence,
#    WORK_MS per trial, default 20; TRIALS per experiment, default 2000)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"; seconds="${2:-300}"; nworkers="${3:-64}"
work_ms="${WORK_MS:-20}"; trials="${TRIALS:-2000}"
RANDOM=${SEED:-$$}
work="$(mktemp -d)"; server_pid=""; workers=()
source "$root/tests/integration/pg.sh"
source "$root/tests/bench/pg_durability.sh"
cleanup() {
  for p in "${workers[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  [[ -n "$server_pid" ]] && kill -9 "$server_pid" 2>/dev/null
  pg_stop immediate
  [[ -n "${KEEP:-}" ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
PG_DURABILITY=durable; pg_setup "$work"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr="127.0.0.1:$port"
mkdir -p "$work/ledger"

starts=0
start_server() {
  # Short leases so that a killed worker's trial is re-queued within seconds.
  "$build/server/frontier-server" --listen "$addr" --store "$PG_URL" --metrics-listen "" \
    --lease-timeout 3 --heartbeat-interval 1 --restart-grace 3 >> "$work/server.log" 2>&1 &
  server_pid=$!; starts=$((starts + 1))
}
server_up() { "$build/server/frontier" list --server "$addr" > /dev/null 2>&1; }
start_worker() {  # start_worker SLOT
  "$build/tests/bench/load_generator" --server "$addr" --soak-worker "$work/ledger/$1.$RANDOM$RANDOM" \
    --work-ms "$work_ms" 2>> "$work/workers.log" &
  workers[$1]=$!
}
pending() { pg_query "SELECT COUNT(*) FROM trials WHERE state IN ('pending', 'running')" 2>/dev/null || echo -1; }
submitters=()
submit() {  # in the background: it retries while the coordinator is down
  "$build/tests/bench/load_generator" --server "$addr" --submit "$trials" >> "$work/experiments" &
  submitters+=($!); submissions=$((submissions + 1))
}
wait_submissions() { for p in "${submitters[@]}"; do wait "$p" || true; done; submitters=(); }

start_server
for _ in $(seq 300); do server_up && break; sleep 0.1; done
server_up || { echo "frontier-server did not start"; cat "$work/server.log"; exit 1; }
worker_kills=0; coordinator_kills=0; pg_restarts=0; unexpected_exits=0; submissions=0
submit; wait_submissions
for ((i = 0; i < nworkers; i++)); do start_worker "$i"; done
# The coordinator is alive unless we killed it: it must never exit by itself.
check_server() {
  if ! kill -0 "$server_pid" 2>/dev/null; then
    unexpected_exits=$((unexpected_exits + 1))
    echo "coordinator exited by itself:"; tail -5 "$work/server.log"
    start_server
  fi
}
end=$((SECONDS + seconds))
echo "== chaos for ${seconds} s: $nworkers workers, ${work_ms} ms per trial, $trials trials per experiment"
while ((SECONDS < end)); do
  sleep "$((RANDOM % 3)).$((RANDOM % 10))"
  check_server
  # Keep work queued: another experiment when fewer than two workers' worth of trials remain per worker.
  left=$(pending)
  if ((left >= 0 && left < 2 * nworkers)) && ((${#submitters[@]} == 0)); then submit; fi
  ((${#submitters[@]} > 0)) && ! kill -0 "${submitters[-1]}" 2>/dev/null && wait_submissions
  roll=$((RANDOM % 10))
  if ((roll < 6)); then  # a worker
    slot=$((RANDOM % nworkers))
    kill -9 "${workers[$slot]}" 2>/dev/null || true
    wait "${workers[$slot]}" 2>/dev/null || true
    start_worker "$slot"; worker_kills=$((worker_kills + 1))
  elif ((roll < 8)); then  # the coordinator
    kill -9 "$server_pid"; wait "$server_pid" 2>/dev/null || true
    coordinator_kills=$((coordinator_kills + 1))
    sleep "0.$((RANDOM % 10))"
    start_server
  else  # PostgreSQL: a crash, then recovery
    pg_stop immediate
    pg_restarts=$((pg_restarts + 1))
    sleep "0.$((RANDOM % 10))"
    pg_start
  fi
done
wait_submissions
echo "== chaos over; working off the rest"
check_server
drain_deadline=$((SECONDS + 300))
until [[ $(pending) == 0 ]] || ((SECONDS > drain_deadline)); do sleep 1; check_server; done
for p in "${workers[@]}"; do kill -9 "$p" 2>/dev/null || true; done
wait_submissions
# A clean stop: SIGTERM must end the coordinator within 10 s.
kill "$server_pid"; stop_hung=0
for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$server_pid" 2>/dev/null; then
  echo "coordinator did not stop within 10 s of SIGTERM"; stop_hung=1; kill -9 "$server_pid"
fi
wait "$server_pid" 2>/dev/null || true; server_pid=""
unexpected_exits=$((unexpected_exits + stop_hung))

echo "faults: $worker_kills worker kills, $coordinator_kills coordinator kills (and restarts), $pg_restarts PostgreSQL crash-restarts; coordinator starts $starts, exits by itself $unexpected_exits; experiments submitted $submissions"
pg_query "SELECT id, state, attempt, worker_id, result_json FROM trials ORDER BY seq" > "$work/trials.txt"
experiments=$(pg_query "SELECT count(*) FROM experiments")
cat "$work/ledger"/* > "$work/ledger.txt"
/usr/bin/python3 - "$work/trials.txt" "$work/ledger.txt" "$unexpected_exits" "$experiments" "$submissions" <<'PY'
import collections, json, sys
trials, ledger_file, unexpected = sys.argv[1], sys.argv[2], int(sys.argv[3])
experiments, submissions = int(sys.argv[4]), int(sys.argv[5])
store = {}
for line in open(trials):
    tid, state, attempt, worker, result = line.rstrip("\n").split("|", 4)
    store[tid] = (state, int(attempt), worker, json.loads(result) if result else None)
sent, accepted, rejected = collections.defaultdict(set), collections.defaultdict(set), 0
for line in open(ledger_file):
    kind, tid, attempt, worker, value = line.split()
    entry = (int(attempt), worker, value)
    if kind == "send": sent[tid].add(entry)
    elif kind == "accepted": accepted[tid].add(entry)
    else: rejected += 1
states = collections.Counter(s for s, *_ in store.values())
problems = []
for tid, (state, attempt, worker, result) in store.items():
    if state != "completed":
        problems.append(f"{tid}: {state}, not completed"); continue
    stored = (attempt, worker, f"{result['val_accuracy']:.9f}")
    if stored not in sent[tid]:
        problems.append(f"{tid}: stored result {stored} was never sent by a worker")
    for a in accepted[tid]:
        if a != stored:
            problems.append(f"{tid}: the coordinator accepted {a} but stored {stored}")
for tid in accepted:
    if tid not in store: problems.append(f"{tid}: accepted but not in the store")
twice = [t for t, a in accepted.items() if len({(x[0], x[1]) for x in a}) > 1]
print(f"store: {len(store)} trials, " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
print(f"ledger: {sum(len(v) for v in sent.values())} completions sent for {len(sent)} trials, "
      f"{len(accepted)} trials accepted, {rejected} rejected (stale attempts); "
      f"accepted for two attempts: {len(twice)}; completions lost: "
      f"{sum(1 for t in accepted if t not in store or store[t][0] != 'completed')}")
# A submission retried after a lost reply keeps its submit_id: one experiment each.
print(f"experiments: {experiments} stored for {submissions} submissions")
if experiments != submissions:
    problems.append(f"{experiments} experiments stored for {submissions} submissions")
ok = not problems and not twice and unexpected == 0 and states.get("completed", 0) == len(store)
for p in problems[:20]: print("  " + p)
print("exactly once: " + ("yes" if ok else "NO"))
sys.exit(0 if ok else 1)
PY
