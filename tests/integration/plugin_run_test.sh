#!/usr/bin/env bash
# Plugins end to end (issue 17, docs/plugins.md): `frontier run` of a space
# whose trials load the example plugin and the test plugin:
#  - the plugin's block (fused_cna) and its right pooling (quick_cumsum)
#    train, their trials carry the gate's passed check;
#  - the wrong pooling (scaled) fails as incorrect, once (not retried), with
#    the worst error and where, and is on no front;
#  - a plugin path that does not exist fails its trial as error_kind plugin,
#    naming the file; the worker and the coordinator carry on.
set -euo pipefail
build="$1"; src="$2"
frontier="$build/server/frontier"
example="$build/worker/plugins/example/libfrontier_example_plugin.so"
wrong="$build/tests/worker/libtest_plugin_wrong_ops.so"
work="$(mktemp -d)"; trap 'pkill -KILL -f "$work/" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
mkdir -p plugins && cp "$example" "$wrong" plugins/   # resolved against the space file's folder
space() {  # space NAME PLUGINS POOLINGS BLOCKS
  cat > "$1.yaml" <<YAML
name: $1
task:
  dataset: bev-synthetic
  bev: {cameras: 4, height: 24, width: 64, grid: 32, max_boxes: 4, train_samples: 16, val_samples: 8, test_samples: 8}
  batch_size: 4
  steps: 8
  eval_every: 0
  warmup_steps: 2
  optimizer: {name: adamw, lr: 2.0e-3}
baseline:
  arch:
    stem: {kind: conv3x3, width: 8, stride: 2, depth: 1}
    stages:
      - {block: basic, width: 8, depth: 1, stride: 2}
    bev:
      view_transform: lss
      pooling: naive
      depth_bins: 8
      channels: 8
      encoder:
        - {block: basic, width: 8, depth: 1, stride: 2}
  runtime: {precision: fp32, threads: 1, plugins: $2}
space:
  bev.pooling: $3
  block: $4
objectives:
  - {metric: val_iou, goal: maximize}
  - {metric: throughput, goal: maximize}
repeats: 1
strategy: {name: grid}
profile: off
YAML
}
space plugged "[plugins/libfrontier_example_plugin.so, plugins/libtest_plugin_wrong_ops.so]" \
  "[naive, quick_cumsum, scaled]" "[basic, fused_cna]"
"$frontier" run plugged.yaml --workers 1 --runs-dir runs > run.out 2> run.err || { cat run.out run.err; exit 1; }
"$frontier" trials exp-000001 --db runs/frontier.db -o json > trials.json
"$frontier" report exp-000001 --db runs/frontier.db -o json > report.json
/usr/bin/python3 - <<'PY'
import json
trials = json.load(open("trials.json"))
assert len(trials) == 6, len(trials)
by = {(t["config"].get("bev.pooling", "naive"), t["config"].get("block", "basic")): t for t in trials}
for (pooling, block), t in by.items():
    r = t.get("result") or {}
    if pooling == "scaled":
        assert t["state"] == "failed", (pooling, block, t["state"])
        assert r.get("error_kind") == "incorrect", r.get("error_kind")
        assert t.get("attempt", 1) == 1, t.get("attempt")          # final: not retried
        assert "scaled" in r["error"] and "differs from the reference" in r["error"], r["error"]
        bad = r["incorrect"]
        assert bad["worst_rel_error"] > 5e-4 and bad["tolerance"] == 1e-4 and "forward" in bad["where"], bad
        assert "step_time_ms" not in r, "an incorrect variant was timed"
    else:
        assert t["state"] == "completed", (pooling, block, t["state"], r.get("error"))
        if pooling == "quick_cumsum":
            assert r["correctness"]["passed"] and r["correctness"]["variants"][0]["variant"] == "quick_cumsum", r["correctness"]
        else:
            assert "correctness" not in r, "the reference was checked"
report = json.load(open("report.json"))
front = [c["label"] for c in report["configs"] if c["on_front"]]
assert front and not any("scaled" in label for label in front), front
print("plugin run: 4 trials completed (fused_cna, quick_cumsum checked), 2 scaled trials failed as incorrect "
      f"(worst relative error {bad['worst_rel_error']:.3g} at {bad['where']})")
PY
# A missing plugin fails the trial naming the file.
space missing "[plugins/libnot_there.so]" "[naive]" "[basic]"
"$frontier" run missing.yaml --workers 1 --runs-dir runs-missing > missing.out 2> missing.err || true
"$frontier" trials exp-000001 --db runs-missing/frontier.db -o json > missing.json
/usr/bin/python3 - "$work" <<'PY'
import json, sys
[t] = json.load(open("missing.json"))
r = t["result"]
assert t["state"] == "failed" and r["error_kind"] == "plugin", (t["state"], r)
assert sys.argv[1] + "/plugins/libnot_there.so" in r["error"], r["error"]
print("missing plugin:", r["error"])
PY
