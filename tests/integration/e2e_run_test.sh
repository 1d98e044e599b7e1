#!/usr/bin/env bash
# `frontier run` end to end: embedded coordinator, 2 local workers, a tiny
# space; every trial must finish with real metrics and the reports must exist.
set -euo pipefail
build="$1"; src="$2"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cd "$work"
"$build/server/frontier" run "$src/tests/integration/tiny.yaml" --workers 2 --runs-dir runs > run.out 2>&1 || {
  echo "frontier run failed:"; cat run.out; for f in runs/*/worker-*.log; do echo "== $f"; tail -20 "$f"; done; exit 1; }
cat run.out
exp="$(sed -n 's/^experiment \(exp-[0-9]*\) .*/\1/p' run.out | head -1)"
[[ -n "$exp" ]] || { echo "no experiment id in the output"; exit 1; }
test -s "runs/$exp.html" || { echo "no HTML report"; exit 1; }
grep -q '<svg' "runs/$exp.html" || { echo "HTML report has no SVG plot"; exit 1; }
# Every trial completed with real measurements, read back from the store.
/usr/bin/python3 - "$work/runs/frontier.db" "$exp" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT id, state, result_json FROM trials WHERE experiment_id = ?", (sys.argv[2],)).fetchall()
assert len(rows) == 6, f"expected 3 configs x 2 seeds = 6 trials, got {len(rows)}"
for tid, state, result in rows:
    assert state == "completed", f"{tid} is {state}"
    r = json.loads(result)
    assert r["step_time_ms"]["median"] > 0 and r["throughput"]["samples_per_s"] > 0, tid
    assert r["flops"]["train_per_step"] > 0 and 0 < r["mfu"] < 2, tid
    assert 0 <= r["val_accuracy"] <= 1 and "test_accuracy" in r, tid
print(f"{len(rows)} trials completed with metrics")
PY
