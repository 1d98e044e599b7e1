#!/usr/bin/env bash
# Multi-host rehearsal on one machine (issue 8): PostgreSQL, the coordinator
# and the worker hosts each in their own network namespace, joined by a
# bridge in a "switch" namespace, on loopback-range addresses made here
# (127.77.0.0/24, route_localnet on; nothing is routed outside the
# namespaces). The coordinator runs as in the cluster manifests: PostgreSQL
# store by libpq environment variables, user and worker tokens from files,
# TLS, /metrics on its own address. During one experiment workers join
# (also from a host that appears mid-run), one is killed with SIGKILL in the
# middle of a trial, one drains on SIGTERM; the experiment must complete with
# every trial recorded exactly once. Exit 77 (skipped) when network
# namespaces cannot be made (not root).
#   netns_rehearsal_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"; src="$(cd "$2" && pwd)"
readonly SKIP=77
readonly PG_BIN=/usr/lib/postgresql/15/bin
readonly NET=127.77.0
readonly COORD_ADDR=$NET.1 DB_ADDR=$NET.2
readonly COORD="$COORD_ADDR:50051"
server_bin="$build/server/frontier-server"
worker_bin="$build/worker/frontier-worker"
frontier="$build/server/frontier"
health="$src/deploy/docker/grpc-health-check"
fake_trial="$src/tests/deploy/fake_trial.sh"

tag=$(($$ % 100000))
pfx="frd$tag"   # namespace names: $pfx-sw, $pfx-db, $pfx-co, $pfx-n1 ...
if [[ $(id -u) -ne 0 ]] || ! ip netns add "$pfx-sw" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces (needs root and iproute2)"
  exit $SKIP
fi
work="$(mktemp -d)"
chmod a+x "$work"
hosts=(sw)
declare -A pids   # name -> pid of a process we started (ip netns exec execs it: same pid)

cleanup() {
  set +e
  for name in "${!pids[@]}"; do kill -9 "${pids[$name]}" 2>/dev/null; done
  if [[ -d "$work/pg/data" ]]; then
    ip netns exec "$pfx-db" runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$work/pg/data" -m immediate -w stop \
      >/dev/null 2>&1
  fi
  for h in "${hosts[@]}"; do
    # Anything still running in our own namespaces was started by this test.
    for p in $(ip netns pids "$pfx-$h" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    ip netns del "$pfx-$h" 2>/dev/null
  done
  if [[ -n "${KEEP_WORK:-}" ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "FAIL: $*"
  echo "== coordinator"; tail -25 "$work/server.log" 2>/dev/null
  for f in "$work"/w-*.log; do [[ -f "$f" ]] && { echo "== $(basename "$f")"; tail -8 "$f"; }; done
  exit 1
}
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2; shift 2
  for _ in $(seq $((limit * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  fail "timed out after ${limit}s waiting for $what"
}
in_ns() { local h=$1; shift; ip netns exec "$pfx-$h" "$@"; }

# --- the network: a bridge in $pfx-sw, one veth per host ----------------------
ip -n "$pfx-sw" link set lo up
ip -n "$pfx-sw" link add br0 type bridge
ip -n "$pfx-sw" link set br0 up
add_host() {  # add_host NAME ADDRESS
  local h=$1 addr=$2 veth="f${tag}$1"
  ip netns add "$pfx-$h"
  hosts+=("$h")
  ip link add "$veth" type veth peer name eth0 netns "$pfx-$h"
  ip link set "$veth" netns "$pfx-sw"
  ip -n "$pfx-sw" link set "$veth" master br0 up
  # 127.0.0.0/8 would all be local on lo: keep only 127.0.0.1 there, and let
  # the other loopback-range addresses travel over eth0.
  ip -n "$pfx-$h" link set lo up
  ip -n "$pfx-$h" addr del 127.0.0.1/8 dev lo
  ip -n "$pfx-$h" addr add 127.0.0.1/32 dev lo
  in_ns "$h" sysctl -qw net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.eth0.route_localnet=1
  ip -n "$pfx-$h" addr add "$addr/24" dev eth0
  ip -n "$pfx-$h" link set eth0 up
}
add_host db "$DB_ADDR"
add_host co "$COORD_ADDR"
add_host n1 "$NET.11"
add_host n2 "$NET.12"
add_host n3 "$NET.13"
echo "network: ${hosts[*]} on $NET.0/24 (namespaces $pfx-*)"

# --- PostgreSQL on the db host -------------------------------------------------
pg="$work/pg"; mkdir -p "$pg"; chown postgres "$pg"
runuser -u postgres -- "$PG_BIN/initdb" -D "$pg/data" -A trust -U postgres -E UTF8 --no-sync > "$pg/initdb.log" 2>&1
echo "host all all $NET.0/24 trust" >> "$pg/data/pg_hba.conf"
in_ns db runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$pg/data" -l "$pg/server.log" -w \
  -o "-p 5432 -k $pg -c listen_addresses=$DB_ADDR -c fsync=off" start > /dev/null
pg_query() { in_ns db /usr/bin/psql -At -h "$DB_ADDR" -U postgres -d frontier -c "$1"; }
in_ns db /usr/bin/psql -q -h "$DB_ADDR" -U postgres -d postgres -c "CREATE DATABASE frontier"

# --- credentials: tokens as files, a CA and a server certificate for the coordinator's address
cd "$work"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=rehearsal-ca" -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=frontier-coordinator" -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=IP:%s,DNS:frontier-coordinator\n' "$COORD_ADDR" > san.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext \
  -out server.pem 2>/dev/null
head -c 24 /dev/urandom | base64 | tr -d '/+=' > user.token
head -c 24 /dev/urandom | base64 | tr -d '/+=' > worker.token
chmod 600 ./*.token ./*.key

# --- the coordinator -----------------------------------------------------------
# Like the Kubernetes manifests: `--store postgresql://` and everything else from libpq's variables.
PGHOST=$DB_ADDR PGPORT=5432 PGUSER=postgres PGDATABASE=frontier \
  ip netns exec "$pfx-co" "$server_bin" --listen "0.0.0.0:50051" --metrics-listen "$COORD_ADDR:9464" \
  --store postgresql:// --user-token-file user.token --worker-token-file worker.token \
  --tls-cert server.pem --tls-key server.key --lease-timeout 4 --heartbeat-interval 1 --restart-grace 4 \
  > server.log 2>&1 &
pids[server]=$!
serving() { in_ns "$1" /usr/bin/python3 "$health" --addr "$COORD" --tls-ca ca.pem --timeout 2; }
wait_for 30 "the coordinator's gRPC health service (SERVING) from host n3" serving n3
in_ns n3 /usr/bin/python3 "$health" --addr "$COORD" --tls-ca ca.pem
# The hosts really are separate: nothing listens on a worker host's own loopback.
if in_ns n1 /usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1', 50051), timeout=1)" \
  2>/dev/null; then fail "host n1 reaches a coordinator on its own 127.0.0.1"; fi

cli() {  # cli HOST ARGS...: the CLI on a host, as a user with the user token
  local h=$1; shift
  in_ns "$h" "$frontier" "$@" --server "$COORD" --tls-ca ca.pem --token-file user.token
}

# --- workers -------------------------------------------------------------------
start_worker() {  # start_worker NAME HOST
  local name=$1 h=$2
  FRONTIER_REHEARSAL_LEDGER="$work/ledger" FRONTIER_REHEARSAL_WORKER="$name" FRONTIER_FAKE_TRIAL_SECONDS=2 \
    ip netns exec "$pfx-$h" "$worker_bin" --coordinator "$COORD" --tls-ca ca.pem --token-file worker.token \
    --trial-binary "$fake_trial" --name "$name" --threads-per-trial 1 --metrics-listen 0.0.0.0:9465 \
    --drain-timeout 60 > "$work/$name.log" 2>&1 &
  pids[$name]=$!
  echo "$(date +%T) joined: $name on host $h ($(ip -n "$pfx-$h" -4 -br addr show eth0 | awk '{print $3}'))"
}
wid() { pg_query "SELECT id FROM workers WHERE host = '$1' ORDER BY seq DESC LIMIT 1"; }
registered() { [[ -n "$(wid "$1")" ]]; }
fresh_trial_on() {  # a trial the worker leased under a second ago: far from its end
  pg_query "SELECT id FROM trials WHERE state = 'running' AND worker_id = '$1'
            AND started_ms > extract(epoch FROM clock_timestamp()) * 1000 - 1000 LIMIT 1"
}
# Keeps the trial it found in $fresh: asking again could find none (the trial may end in between).
has_fresh_trial() { fresh=$(fresh_trial_on "$1"); [[ -n "$fresh" ]]; }
finished_at_least() {
  [[ $(pg_query "SELECT COUNT(*) FROM trials WHERE experiment_id = '$exp' AND state IN ('completed','failed')") \
     -ge $1 ]]
}
experiment_completed() { [[ "$(pg_query "SELECT state FROM experiments WHERE id = '$exp'")" == completed ]]; }

start_worker w-n1-a n1
start_worker w-n2-a n2
first_two_registered() { registered w-n1-a && registered w-n2-a; }
wait_for 30 "w-n1-a and w-n2-a to register" first_two_registered

exp="$(cli n3 submit "$src/tests/deploy/rehearsal.yaml")"
total=$(pg_query "SELECT COUNT(*) FROM trials WHERE experiment_id = '$exp'")
[[ $total -ge 12 ]] || fail "expected at least 12 trials, the space made $total"
echo "$(date +%T) submitted $exp from host n3: $total trials"

# A worker joins an experiment already running.
wait_for 60 "a first finished trial" finished_at_least 1
start_worker w-n3-a n3

# One worker leaves abruptly: SIGKILL in the middle of a trial (a lost node).
w1=$(wid w-n1-a)
wait_for 60 "a fresh trial on w-n1-a" has_fresh_trial "$w1"
victim=$fresh
kill -9 "${pids[w-n1-a]}"; wait "${pids[w-n1-a]}" 2>/dev/null || true; unset 'pids[w-n1-a]'
echo "$(date +%T) left (SIGKILL): w-n1-a during trial $victim"

# One worker leaves politely: SIGTERM drains it; its running trial is finished and recorded.
w2=$(wid w-n2-a)
wait_for 60 "a fresh trial on w-n2-a" has_fresh_trial "$w2"
drained=$fresh
kill -TERM "${pids[w-n2-a]}"
set +e; wait "${pids[w-n2-a]}"; rc=$?; set -e
unset 'pids[w-n2-a]'
[[ $rc -eq 0 ]] || fail "the draining worker w-n2-a exited $rc, expected 0"
echo "$(date +%T) left (SIGTERM, drained, exit 0): w-n2-a after finishing $drained"

# New capacity: a host that did not exist when the experiment started, and a new worker on n1.
add_host n4 "$NET.14"
start_worker w-n4-a n4
start_worker w-n1-b n1

wait_for 180 "the experiment to complete" experiment_completed
echo "$(date +%T) experiment $exp completed"

# --- every trial recorded exactly once ------------------------------------------
rows=$(pg_query "SELECT COUNT(*), COUNT(DISTINCT id) FROM trials WHERE experiment_id = '$exp'")
[[ "$rows" == "$total|$total" ]] || fail "trial rows changed: $rows, expected $total|$total"
completed=$(pg_query "SELECT COUNT(*) FROM trials WHERE experiment_id = '$exp' AND state = 'completed'
                      AND result_json LIKE '%\"status\":\"completed\"%'")
[[ $completed -eq $total ]] || fail "$completed of $total trials completed with a result"
results=$(pg_query "SELECT COUNT(*), COUNT(DISTINCT trial_id) FROM results WHERE experiment_id = '$exp'")
[[ "$results" == "$total|$total" ]] || fail "results view: $results, expected one row per trial ($total|$total)"
victim_row=$(pg_query "SELECT state, attempt > 1, worker_id <> '$w1' FROM trials WHERE id = '$victim'")
[[ "$victim_row" == "completed|t|t" ]] || fail "the killed worker's trial $victim: $victim_row (state, re-run, elsewhere)"
drained_row=$(pg_query "SELECT state, worker_id = '$w2' FROM trials WHERE id = '$drained'")
[[ "$drained_row" == "completed|t" ]] || fail "the drained worker's trial $drained: $drained_row"
# The recorded attempt of each trial is one that the fake trial finished, on the worker the store names.
pg_query "SELECT t.id, t.attempt, w.host FROM trials t JOIN workers w ON w.id = t.worker_id
          WHERE t.experiment_id = '$exp'" | tr '|' ' ' | sort > recorded.txt
awk '$4 == "finished" {print $1, $2, $3}' ledger | sort > finished.txt
missing=$(comm -23 recorded.txt finished.txt)
[[ -z "$missing" ]] || fail "recorded attempts that no worker finished: $missing"
by_worker=$(pg_query "SELECT w.host, COUNT(*) FROM trials t JOIN workers w ON w.id = t.worker_id
                      WHERE t.experiment_id = '$exp' GROUP BY w.host ORDER BY w.host" | tr '\n' ' ')
late=$(pg_query "SELECT COUNT(*) FROM trials t JOIN workers w ON w.id = t.worker_id
                 WHERE t.experiment_id = '$exp' AND w.host IN ('w-n3-a', 'w-n4-a', 'w-n1-b')")
[[ $late -ge 1 ]] || fail "no trial was run by a worker that joined mid-run ($by_worker)"
echo "all $total trials completed once; $victim re-run after the kill; trials by worker: $by_worker"

# --- the same from a user's host, over the network ------------------------------
cli n3 status "$exp" | tee status.txt
grep -q "completed" status.txt || fail "frontier status does not say completed"
cli n4 trials "$exp" --output json > trials.json
/usr/bin/python3 - trials.json "$total" <<'PY'
import json, sys
trials = json.load(open(sys.argv[1]))
assert len(trials) == int(sys.argv[2]), len(trials)
assert all(t["state"] == "completed" for t in trials), [t["state"] for t in trials]
assert len({t["id"] for t in trials}) == len(trials)
print(f"frontier trials from host n4: {len(trials)} completed, by {len({t['worker'] for t in trials})} workers")
PY
# Prometheus would scrape the coordinator across hosts.
in_ns n2 /usr/bin/python3 - "http://$COORD_ADDR:9464/metrics" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
assert "frontier_coordinator_trials" in text and "frontier_coordinator_workers_connected" in text, text[:500]
print("coordinator /metrics scraped from host n2")
PY

# --- the remaining workers drain and exit 0; so does the coordinator --------------
for name in w-n3-a w-n4-a w-n1-b; do kill -TERM "${pids[$name]}"; done
for name in w-n3-a w-n4-a w-n1-b server; do
  [[ $name == server ]] && kill -TERM "${pids[server]}"
  set +e; timeout 30 tail --pid="${pids[$name]}" -f /dev/null; wait "${pids[$name]}"; rc=$?; set -e
  unset "pids[$name]"
  [[ $rc -eq 0 ]] || fail "$name exited $rc after SIGTERM"
done
echo "netns rehearsal ok"
