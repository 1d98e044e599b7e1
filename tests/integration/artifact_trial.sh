#!/usr/bin/env bash
# A command trial (docs/trial-protocol.md) that writes files to its artifact
# folder, for tests/integration/artifacts_run_test.sh: a trace-like JSON of
# 1.5 MB (two upload chunks), a file in a subfolder, and a symbolic link the
# worker must not follow. Then one completed result line.
set -euo pipefail
dir="$FRONTIER_ARTIFACT_DIR"
mkdir -p "$dir/plots"
/usr/bin/python3 -c 'import json,sys; json.dump({"traceEvents": [{"name": "x" * 100, "ph": "X", "ts": i, "dur": 1} for i in range(10000)]}, open(sys.argv[1], "w"))' "$dir/trace.json"
printf 'step,loss\n1,0.5\n2,0.25\n' > "$dir/plots/loss.csv"
ln -sf /etc/hostname "$dir/host-link"
/usr/bin/python3 - "$FRONTIER_TRIAL_SPEC" "$dir" "$FRONTIER_TRIAL_ID" <<'PY'
import json, sys
spec, folder, trial = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
result = {"event": "result", "schema": 1, "status": "completed", "step_time_ms": {"median": 1.5},
          "val_accuracy": 0.5 if spec["params"]["variant"] == "a" else 0.6, "throughput": 100, "trial": trial}
print(json.dumps(result))
PY
