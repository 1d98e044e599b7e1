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
    assert result["steps_run"] == 12 and result["step_time_ms"]["n"] == 10, result["step_time_ms"]
    assert result["flops"]["train_per_step"] == 3 * result["flops"]["forward_per_step"] > 0
    assert 0 < result["mfu"] <= 1, result["mfu"]
    assert result["peak_memory_mb"] > 0 and result["params"] > 0
    # The worker named its frontier-trial's libfrontier_cpu_memory.so: counted as frontier-trial counts.
    assert result["peak_memory_kind"] == "cpu-allocated-growth", result["peak_memory_kind"]
    assert [e["step"] for e in result["evals"]] == [6, 12], result["evals"]
    assert 0 <= result["test_accuracy"] <= 1
print("2 command trials completed with the SDK's measurements")
PY
