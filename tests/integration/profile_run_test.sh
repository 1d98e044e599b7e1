#!/usr/bin/env bash
# `frontier profile` on a finished experiment (issue 21, part 6): a tiny
# space runs to the end under `frontier run`; then a frontier-server on its
# store and a frontier-worker; `frontier profile EXP --trial T` queues a
# profile run, the worker leases it (the experiment is completed), runs the
# trial's spec with a libtorch profile after training and uploads its
# artifact folder; the command prints the profile summary and where the
# trace is, the trace is fetched under the run's id, and the experiment's
# report, trials and status are byte for byte what they were. A command
# trial asked for the in-process profiler is refused with the reason.
set -euo pipefail
build="$1"; src="$2"
work="$(mktemp -d)"
cd "$work"
sed -e 's/^repeats: 2$/repeats: 1/' -e 's/^  stages\[0\].block: \[basic, mbconv, convnext\]$/  stages[0].block: [basic, mbconv]/' \
  "$src/tests/integration/tiny.yaml" > tiny.yaml
frontier="$build/server/frontier"
pids=()
fail() { echo "FAIL: $*"; for f in "$work"/server.log "$work"/worker.log "$work"/runs/*/worker-*.log; do [[ -f $f ]] && { echo "== $f"; tail -20 "$f"; }; done; exit 1; }
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT
"$frontier" run tiny.yaml --workers 2 --runs-dir runs > run.out 2>&1 || { cat run.out; fail "frontier run"; }
exp="$(sed -n 's/^experiment \(exp-[0-9]*\) .*/\1/p' run.out | head -1)"
db="$work/runs/frontier.db"
trial="$exp-t0002"
snapshot() {  # what describes the experiment, from the store
  "$frontier" report "$exp" --db "$db" -o json
  "$frontier" trials "$exp" --db "$db" -o csv
  "$frontier" status "$exp" --db "$db"
}
snapshot > before.txt
grep -q "completed  2/2 done" before.txt || fail "the experiment did not complete: $(tail -1 before.txt)"

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr="127.0.0.1:$port"
"$build/server/frontier-server" --listen "$addr" --metrics-listen 0 --store "$db" --artifacts-dir "$work/runs/artifacts" \
  > "$work/server.log" 2>&1 & pids+=($!)
"$build/worker/frontier-worker" --coordinator "$addr" --name profiler --metrics-listen 0 --threads-per-trial 1 \
  --artifact-dir "$work/worker-artifacts" --no-calibrate > "$work/worker.log" 2>&1 & pids+=($!)
for _ in $(seq 150); do grep -q "registered" "$work/server.log" && break; sleep 0.2; done
grep -q "registered" "$work/server.log" || fail "the worker did not register"

code=0
"$frontier" profile "$exp" --trial "$trial" --steps 2 --timeout 240 --server "$addr" > profile.txt 2> profile.err || code=$?
cat profile.err profile.txt
[[ $code == 0 ]] || fail "frontier profile exited $code"
run="$trial-p1"
grep -q "^profile run $run: libtorch, 2 steps on " profile.txt || fail "no summary line"
grep -q "^bottleneck: .*-bound (profile of 2 steps" profile.txt || fail "no verdict from the profile"
grep -q "^by bound:  compute [0-9.]*%  memory" profile.txt || fail "no shares by bound"
grep -q "^trace: frontier artifacts $exp --trial $run --get trace.json  (written at .*:$work/worker-artifacts/$run/trace.json)$" profile.txt \
  || fail "where the trace is"
grep -q "^  operators.json  " profile.txt && grep -q "^  trace.json  " profile.txt || fail "the run's artifacts are not listed"
"$frontier" artifacts "$exp" --trial "$run" --server "$addr" --get trace.json -o "$work/got" > /dev/null || fail "fetch the trace"
cmp "$work/got/trace.json" "$work/worker-artifacts/$run/trace.json" || fail "the fetched trace differs"
/usr/bin/python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); assert any(e.get("ph") == "X" for e in t["traceEvents"])' \
  "$work/got/trace.json" || fail "the trace has no operator events"
code=0; "$frontier" profile "$exp" --trial "$exp-t0099" --server "$addr" > /dev/null 2> unknown.err || code=$?
[[ $code == 3 ]] || fail "an unknown trial: exit $code, $(cat unknown.err)"

for p in "${pids[@]}"; do kill "$p"; done; wait 2>/dev/null || true; pids=()
snapshot > after.txt
cmp before.txt after.txt || { diff before.txt after.txt | head -20; fail "the profile run changed the experiment's figures"; }
"$frontier" report "$exp" --db "$db" --html "$work/runs/after.html" > /dev/null
grep -q "<li data-trial=\"$run\">$run (profile run of $trial): " "$work/runs/after.html" || fail "the report does not link the run's artifacts"

# A command trial has no in-process profiler: refused with the reason, nothing queued.
"$frontier" run "$src/tests/integration/artifacts.yaml" --workers 1 --runs-dir cmd > cmd.out 2>&1 || { cat cmd.out; fail "command trials"; }
cmd_exp="$(sed -n 's/^experiment \(exp-[0-9]*\) .*/\1/p' cmd.out | head -1)"
"$build/server/frontier-server" --listen "$addr" --metrics-listen 0 --store "$work/cmd/frontier.db" \
  --artifacts-dir "$work/cmd/artifacts" > "$work/server.log" 2>&1 & pids+=($!)
for _ in $(seq 150); do "$frontier" status "$cmd_exp" --server "$addr" > /dev/null 2>&1 && break; sleep 0.2; done
code=0; "$frontier" profile "$cmd_exp" --trial "$cmd_exp-t0001" --steps 2 --server "$addr" > /dev/null 2> cmd.err || code=$?
[[ $code == 2 ]] && grep -q "profiled by wrapping it: nsys or ncu" cmd.err || fail "a command trial's libtorch profile: exit $code, $(cat cmd.err)"
echo "profile run of a finished experiment: queued, run, summarized, its trace fetched; no figure changed"
