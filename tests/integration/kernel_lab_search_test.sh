#!/usr/bin/env bash
# The kernel lab's kept best in searches (issue 37, docs/kernel-lab.md): a
# right candidate kept by `frontier ops optimize`, named `lab:` in a search
# space, is trained by `frontier run` and the report shows its op speed-up;
# `--from-trial` judges a candidate at the shapes of a stored trial, of a
# built-in model and of a command trial (the byo example, its profile
# recorded by the SDK), and refuses an op the command trial never called.
# The judge's own checks: kernel_lab_test.sh.
set -euo pipefail
build="$1"; src="$2"
frontier="$build/server/frontier"
work="$(mktemp -d)"; trap 'kill $(jobs -p) 2>/dev/null || true; pkill -KILL -f "$work/" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir right && cp "$src/tests/integration/lab/right_baddbmm.cc" right/
cp "$src/tests/integration/lab/attention_spec.json" spec.json
"$frontier" ops optimize attn-lab --op attention_kernel --spec spec.json --candidates right --db runs/lab.db --dir ops \
  --timing-rounds 3 --run-timeout 20 > lab.txt 2> lab.err || { cat lab.err; fail "the right candidate's run"; }
[ -f ops/attn-lab/best/plugin.so ] || { cat lab.txt lab.err; fail "no kept variant"; }

# The best in a search.
cat > space.yaml <<YAML
name: lab-search
task:
  dataset: synthetic
  input: {channels: 1, height: 16, width: 16, classes: 4}
  batch_size: 16
  steps: 8
  eval_every: 0
  warmup_steps: 2
baseline:
  arch:
    stem: {kind: conv3x3, width: 8, stride: 2, depth: 1}
    stages: [{block: basic, width: 16, depth: 1, stride: 2, attention: {kind: mhsa, heads: 2}}]
  runtime: {precision: fp32, memory_format: contiguous, threads: 1}
space:
  ops.attention_kernel: [naive, "lab:ops/attn-lab/best"]
objectives:
  - {metric: val_accuracy, goal: maximize}
  - {metric: throughput, goal: maximize}
repeats: 1
parity: {metric: val_accuracy, margin: 0.05}
strategy: {name: grid}
profile: off
YAML
"$frontier" run space.yaml --workers 1 --runs-dir runs/search > search.txt 2> search.err || { cat search.err; fail "search"; }
variant=$(/usr/bin/python3 -c 'import json; print(json.load(open("ops/attn-lab/best/manifest.json"))["variant"])')
grep -q "$variant" search.txt || { cat search.txt; fail "the kept variant is not in the report"; }
grep -qi "op speed-up" search.txt || { cat search.txt; fail "no op speed-up column"; }

# Shapes (and profile) from a stored trial of that search.
trial=$(/usr/bin/python3 -c 'import sqlite3; print(sqlite3.connect("runs/search/frontier.db").execute("select id from trials order by id limit 1").fetchone()[0])')
mkdir one && sed 's/"lab_test_baddbmm"/"lab_test_baddbmm_again"/' right/right_baddbmm.cc > one/right_baddbmm.cc
"$frontier" ops optimize from-trial --op attention_kernel --from-trial "$trial" --candidates one --db runs/search/frontier.db \
  --dir ops --timing-rounds 3 --run-timeout 20 > from_trial.txt 2> from_trial.err || { cat from_trial.err; fail "--from-trial"; }
grep -q "right_baddbmm.cc .* timed" from_trial.txt || { cat from_trial.txt; fail "--from-trial did not time the candidate"; }
# Shapes from a command trial (issue 41): the byo example with softmax attention, its profile recorded by
# the SDK; the worker recognizes its attention calls, and the candidate is judged at their shapes.
cat > byo-lab.yaml <<YAML
name: byo-lab
task: {steps: 8, eval_every: 0, warmup_steps: 2}
trial:
  command: [/usr/bin/python3, train.py]
  workdir: $src/search_spaces/byo_pytorch
  params: {lr: 0.1, width: 16, attention: mhsa, heads: 4, batch_size: 16, val_size: 256}
  runtime: {threads: 1}
space:
  params.heads: [4]
objectives: [{metric: val_accuracy}, {metric: throughput}]
strategy: {name: grid}
YAML
"$frontier" run byo-lab.yaml --workers 1 --runs-dir runs/byo > byo.txt 2> byo.err || { cat byo.err; fail "the command trial"; }
cmd_trial=$(/usr/bin/python3 -c 'import sqlite3; print(sqlite3.connect("runs/byo/frontier.db").execute("select id from trials order by id limit 1").fetchone()[0])')
"$frontier" ops optimize byo-lab --op attention_kernel --from-trial "$cmd_trial" --candidates one --db runs/byo/frontier.db \
  --dir ops --timing-rounds 3 --run-timeout 20 > cmd_lab.txt 2> cmd_lab.err || { cat cmd_lab.err; fail "--from-trial on a command trial"; }
grep -q "right_baddbmm.cc .* timed" cmd_lab.txt || { cat cmd_lab.txt; fail "--from-trial on a command trial did not time the candidate"; }
/usr/bin/python3 - runs/byo/frontier.db <<'PY' || fail "the command trial's calls"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
spec = json.loads(db.execute("select spec_json from op_runs where name = 'byo-lab'").fetchone()[0])["spec"]
# width 16, 4 heads: d = 4; the 28 x 28 image after the stem and two stride-2 stages: 7 x 7 = 49 positions.
assert spec["op_calls"] == [{"op": "attention_kernel", "shapes": [[16, 4, 49, 4]] * 3}], spec.get("op_calls")
PY
code=0; "$frontier" ops optimize byo-pool --op bev_pool --from-trial "$cmd_trial" --candidates one --db runs/byo/frontier.db \
  --dir ops > /dev/null 2> pool.err || code=$?
[[ $code != 0 ]] && grep -q "is a command trial, and its profile has no bev_pool call" pool.err \
  || fail "a command trial without the op: exit $code, $(cat pool.err)"
echo "kernel lab e2e ok"
