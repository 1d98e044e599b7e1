#!/usr/bin/env bash
# A user's own PyTorch script as a command trial through `frontier run`
# (issue 15): the space's params reach the program exactly as given, every
# trial completes with the SDK's measurements (FLOPs, step times, MFU in
# (0, 1], peak memory counted as frontier-trial counts it), and the report names the configs by what changed.
set -euo pipefail
build="$1"; src="$2"
source "$src/tests/integration/frontier_run.sh"
frontier_run "$build" "$src/tests/integration/command_trial.yaml"
grep -q "attn=linear" run.out || { echo "the report does not name the variant"; exit 1; }
/usr/bin/python3 - "$work/runs/frontier.db" "$exp" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT config_json, state, spec_json, result_json FROM trials WHERE experiment_id = ?",
                  (sys.argv[2],)).fetchall()
assert len(rows) == 2, rows
for config, state, spec, result in rows:
    assert state == "completed", (config, state)
    spec, result = json.loads(spec), json.loads(result)
    assert spec["command"]["argv"] == ["/usr/bin/python3", "train.py"], spec["command"]
    assert spec["command"]["workdir"].endswith("/search_spaces/byo_pytorch"), spec["command"]
    attention = json.loads(config).get("params.attention", "none")
    assert spec["params"]["attention"] == attention and spec["params"]["width"] == 16, spec["params"]
    assert result["implementation"].startswith("frontier_trial (Python SDK"), result.get("implementation")
    # 2 warm-up steps and the SDK's 3 profiled steps are left out; the worker judged the profile.
    assert result["steps_run"] == 12 and result["step_time_ms"]["n"] == 7, result["step_time_ms"]
    assert result["bottleneck"]["basis"] == "profile", result["bottleneck"]["summary"]
    assert result["flops"]["train_per_step"] == 3 * result["flops"]["forward_per_step"] > 0
    assert 0 < result["mfu"] <= 1, result["mfu"]
    assert result["peak_memory_mb"] > 0 and result["params"] > 0
    # The worker named its frontier-trial's libfrontier_cpu_memory.so: counted as frontier-trial counts.
    assert result["peak_memory_kind"] == "cpu-allocated-growth", result["peak_memory_kind"]
    assert [e["step"] for e in result["evals"]] == [6, 12], result["evals"]
    assert 0 <= result["test_accuracy"] <= 1
    assert result["latency_ms"] > 0 and result["latency_b1_ms"] > 0, result.get("latency")
print("2 command trials completed with the SDK's measurements")
PY
# The report shows the command trials' FLOPs and latency as it does built-in trials' (issue 44).
"$build/server/frontier" report "$exp" --db runs/frontier.db -o csv > report.csv
"$build/server/frontier" report "$exp" --db runs/frontier.db --wide > report.txt
cat report.txt
/usr/bin/python3 - "$work/runs/frontier.db" "$exp" report.csv report.txt <<'PY'
import csv, json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
results = {json.loads(c).get("params.attention", "none"): json.loads(r) for c, r in db.execute(
    "SELECT config_json, result_json FROM trials WHERE experiment_id = ?", (sys.argv[2],))}
rows = list(csv.DictReader(open(sys.argv[3], newline="")))
assert len(rows) == 2, rows
for row in rows:
    result = results["none" if row["is_baseline"] == "true" else "linear"]
    assert float(row["flops_mean"]) == result["flops"]["train_per_sample"] > 0, (row["flops_mean"], result["flops"])
    assert float(row["latency_ms_mean"]) == result["latency_ms"], (row["latency_ms_mean"], result["latency_ms"])
header = next(line for line in open(sys.argv[4]).read().splitlines() if line.startswith("#  config"))
assert "FLOPs/sample" in header and "latency ms" in header, header
print("the report shows both configs' FLOPs per sample and latency")
PY
