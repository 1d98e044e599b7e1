#!/usr/bin/env bash
# `frontier profile` on a finished experiment (issue 21, part 6): a tiny
# space runs to the end under `frontier run`; then a frontier-server on its
# store and a frontier-worker; `frontier profile EXP --trial T` queues a
# profile run, the worker leases it (the experiment is completed), runs the
# trial's spec with a libtorch profile after training and uploads its
# artifact folder; the command prints the profile summary and where the
# trace is, the trace is fetched under the run's id, and the experiment's
# report, trials and status are byte for byte what they were. A user's own
# script as command trials: profiled by the SDK, judged by the worker with
# frontier-trial's rules (the same class as frontier-trial gives the same
# workload), its trace listed in the report, and re-run by `frontier profile`.
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

# A user's own script as command trials (issue 41): the SDK profiles 3 steps after warm-up and the
# worker judges them by frontier-trial's rules, so each workload gets the class frontier-trial gives
# it; the trace and operator table are artifacts the report links; `frontier profile` re-runs one.
mkdir -p foreign && cp "$src/tests/integration/foreign/train.py" foreign/
cat > foreign/space.yaml <<'YAML'
name: foreign
task: {steps: 10, eval_every: 0, warmup_steps: 2}
trial:
  command: [/usr/bin/python3, train.py]
  workdir: .
  params: {kind: gemm}
  runtime: {threads: 1}
space:
  params.kind: [gemm, elementwise, tiny]
objectives: [{metric: val_accuracy}, {metric: throughput}]
strategy: {name: grid}
YAML
export PYTHONPATH="$src/worker/python"  # as after `pip install ./worker/python`
"$frontier" run foreign/space.yaml --workers 1 --runs-dir cmd > cmd.out 2>&1 || { cat cmd.out; fail "command trials"; }
cmd_exp="$(sed -n 's/^experiment \(exp-[0-9]*\) .*/\1/p' cmd.out | head -1)"
# frontier-trial on the GEMM-heavy network (tests/worker/profiler_test.cc's): the verdict to agree with.
cat > gemm_spec.json <<'JSON'
{"schema": 1, "trial_id": "gemm", "seed": 1,
 "task": {"dataset": "synthetic", "input": {"channels": 3, "height": 16, "width": 16, "classes": 10},
          "batch_size": 16, "steps": 4, "eval_every": 0, "warmup_steps": 1},
 "arch": {"stem": {"kind": "conv3x3", "width": 64, "stride": 1},
          "stages": [{"block": "basic", "width": 128, "depth": 1, "stride": 2}], "norm": "none"},
 "runtime": {"threads": 1}, "profile": {"steps": 3}, "latency": {"repetitions": 0}}
JSON
"$build/worker/frontier-trial" --spec gemm_spec.json --artifact-dir "$work/native" 2> native.err | tail -1 > native.json \
  || fail "frontier-trial on the GEMM-heavy spec: $(tail -3 native.err)"
"$frontier" report "$cmd_exp" --db cmd/frontier.db --html "$work/foreign.html" > /dev/null
/usr/bin/python3 - cmd/frontier.db "$cmd_exp" native.json "$work/foreign.html" <<'PY' || fail "the command trials' profiles"
import json, os, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT id, config_json, state, result_json FROM trials WHERE experiment_id = ?",
                  (sys.argv[2],)).fetchall()
native = json.load(open(sys.argv[3]))
html = open(sys.argv[4]).read()
expected = {"gemm": native["bottleneck"]["verdict"], "elementwise": "memory-bound", "tiny": "overhead-bound"}
assert expected["gemm"] == "compute-bound", native["bottleneck"]["summary"]
assert len(rows) == 3, rows
for trial_id, config, state, result in rows:
    kind = json.loads(config).get("params.kind", "gemm")
    result = json.loads(result)
    assert state == "completed", (kind, state, result.get("error"))
    verdict, profile = result["bottleneck"], result["profile"]
    assert verdict["basis"] == "profile", (kind, verdict["summary"], profile.get("error"))
    assert verdict["verdict"] == expected[kind], (kind, verdict["summary"])
    assert profile["steps"] == {"first": 2, "count": 3, "recorded": 3}, profile["steps"]
    assert result["step_time_ms"]["n"] == 10 - 2 - 3, result["step_time_ms"]  # profiled steps left out
    assert profile["time_basis"] == "the profiled steps' wall time" and 0.5 < profile["coverage"] <= 1.0, profile
    assert profile["cost_s"] > 0 and profile["slowdown"] > 0, profile
    trace = json.load(open(profile["trace"]))
    assert any(e.get("ph") == "X" and e.get("cat") == "cpu_op" for e in trace["traceEvents"]), kind
    ops = json.load(open(profile["operators_file"]))["operators"]
    if kind == "gemm":  # the op calls, with shapes, for the kernel lab
        conv = next(o for o in ops if o["name"] == "aten::conv2d")
        assert conv["input_dims"][0] == [16, 3, 16, 16], conv
    assert f'data-trial="{trial_id}"' in html and "trace.json" in html, "the report lists the trace"
    assert f'{trial_id}/trace.json">trace.json</a>, opens in' in html, "the verdict links the trace"
    print(f"{kind}: {verdict['summary'][:110]}...")
assert "no seed was profiled" not in html, "the report's 'where the step time goes' is empty"
PY
"$build/server/frontier-server" --listen "$addr" --metrics-listen 0 --store "$work/cmd/frontier.db" \
  --artifacts-dir "$work/cmd/artifacts" > "$work/server.log" 2>&1 & pids+=($!)
"$build/worker/frontier-worker" --coordinator "$addr" --name cmd-profiler --metrics-listen 0 --threads-per-trial 1 \
  --artifact-dir "$work/cmd-artifacts" --no-calibrate > "$work/worker.log" 2>&1 & pids+=($!)
for _ in $(seq 150); do grep -q "registered" "$work/server.log" && break; sleep 0.2; done
code=0
"$frontier" profile "$cmd_exp" --trial "$cmd_exp-t0001" --steps 2 --timeout 240 --server "$addr" > cmd_profile.txt 2> cmd.err \
  || code=$?
cat cmd.err cmd_profile.txt
[[ $code == 0 ]] || fail "frontier profile of a command trial: exit $code"
grep -q "^profile run $cmd_exp-t0001-p1: libtorch, 2 steps on " cmd_profile.txt || fail "no summary line for the command trial"
grep -q "^bottleneck: compute-bound (profile of 2 steps" cmd_profile.txt || fail "the command trial's profile run has no verdict"
grep -q "^  trace.json  " cmd_profile.txt || fail "the command trial's profile run has no trace"
echo "profile run of a finished experiment: queued, run, summarized, its trace fetched; no figure changed;" \
     "a user's script profiled by the SDK and judged as frontier-trial judges the same workloads"
