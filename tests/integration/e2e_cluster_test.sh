#!/usr/bin/env bash
# The cluster path on loopback: frontier-server + 2 frontier-worker processes,
# then frontier submit / watch / status / trials / pareto / report.
set -euo pipefail
build="$1"; src="$2"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr="127.0.0.1:$port"
"$build/server/frontier-server" --listen "$addr" --store "$work/cluster.db" --heartbeat-interval 1 --lease-timeout 10 \
  > server.log 2>&1 & pids+=($!)
for i in 1 2; do
  "$build/worker/frontier-worker" --coordinator "$addr" --threads-per-trial 1 --name "w$i" > "worker$i.log" 2>&1 & pids+=($!)
done
frontier="$build/server/frontier"
# Wait for the server to answer and both workers to register (then both are
# parked in LeaseTrial and each gets a trial as soon as there is one).
for _ in $(seq 100); do [[ $(grep -c "registered" server.log) -ge 2 ]] && break; sleep 0.2; done
[[ $(grep -c "registered" server.log) -ge 2 ]] || { echo "workers did not register"; cat server.log worker*.log; exit 1; }
# An invalid space is refused with the file and line, exit code 2.
printf 'name: bad\nspace:\n  attention: [flash]\n' > bad.yaml
set +e; "$frontier" submit bad.yaml --server "$addr" 2> bad.err; rc=$?; set -e
[[ $rc -eq 2 ]] || { echo "invalid space: exit $rc, expected 2"; cat bad.err; exit 1; }
grep -q "bad.yaml:" bad.err || { echo "error does not name the file"; cat bad.err; exit 1; }

exp="$("$frontier" submit "$src/tests/integration/tiny.yaml" --server "$addr")"
echo "submitted $exp"
timeout 300 "$frontier" watch "$exp" --server "$addr" | tee watch.out
grep -q "experiment completed" watch.out || { echo "watch did not end with completion"; cat server.log; exit 1; }
"$frontier" status "$exp" --server "$addr" | grep -q "completed  6/6 done"
"$frontier" trials "$exp" --server "$addr" --output json > trials.json
/usr/bin/python3 - trials.json <<'PY'
import json, sys
trials = json.load(open(sys.argv[1]))
assert len(trials) == 6 and all(t["state"] == "completed" for t in trials), trials
workers = {t["worker"] for t in trials}
assert len(workers) == 2, f"both workers should have run trials, got {workers}"
print("trials ok, run by", sorted(workers))
PY
"$frontier" trials "$exp" --server "$addr" --output csv | head -3
"$frontier" pareto "$exp" --server "$addr"
"$frontier" report "$exp" --server "$addr" --output json > report.json
/usr/bin/python3 -c 'import json,sys; r=json.load(open("report.json")); assert len(r["configs"]) == 3, r' 
"$frontier" report "$exp" --server "$addr" --html report.html
grep -q "<svg" report.html
set +e; "$frontier" status exp-999999 --server "$addr" 2>/dev/null; rc=$?; set -e
[[ $rc -eq 3 ]] || { echo "unknown experiment: exit $rc, expected 3"; exit 1; }
echo "cluster path ok"
