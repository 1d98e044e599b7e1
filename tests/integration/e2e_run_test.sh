#!/usr/bin/env bash
# `frontier run` end to end: embedded coordinator, 2 local workers, a tiny
# space; every trial must finish with real metrics and the reports must exist.
set -euo pipefail
build="$1"; src="$2"
source "$src/tests/integration/frontier_run.sh"
frontier_run "$build" "$src/tests/integration/tiny.yaml"
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
    assert r["flops"]["train_per_step"] > 0 and 0 < r["mfu"] <= 1, (tid, r["mfu"], r["peak_flops"])
    assert 0 <= r["val_accuracy"] <= 1 and "test_accuracy" in r, tid
# Calibrated peaks: each worker measured its peak once at start; every trial
# it ran used that peak (one value per worker and precision), and said so.
peaks = {}
for tid, state, result in rows:
    r = json.loads(result)
    assert r["peak_flops"]["source"].startswith("calibrated:"), (tid, r["peak_flops"])
    assert r["peak_flops"].get("measured_at"), (tid, r["peak_flops"])
    assert r["placement"]["pinned"] and not r["placement"]["shared_cores"], (tid, r["placement"])
    peaks.setdefault((r["placement"]["worker"], r["precision"]), set()).add(r["peak_flops"]["flops_per_s"])
assert all(len(v) == 1 for v in peaks.values()), peaks
assert len({w for w, _ in peaks}) == 2, f"expected trials on both workers: {peaks}"
print(f"{len(rows)} trials completed with metrics; one calibrated peak per worker: {peaks}")
PY
# The per-config views: goals stored at submission, means over the seeds, and
# the front on the space's objectives (both maximized) computed here anew.
/usr/bin/python3 - "$work/runs/frontier.db" "$exp" <<'PY'
import json, sqlite3, statistics, sys
db = sqlite3.connect(sys.argv[1])
goals = json.loads(db.execute("SELECT goals_json FROM experiments WHERE id = ?", (sys.argv[2],)).fetchone()[0])
assert [o["metric"] for o in goals["objectives"]] == ["val_accuracy", "throughput"], goals
per = {}
for config, acc, thr in db.execute("SELECT config_json, val_accuracy, throughput FROM results "
                                   "WHERE experiment_id = ? AND state = 'completed'", (sys.argv[2],)):
    per.setdefault(config, []).append((acc, thr))
means = {c: (statistics.mean(a for a, _ in v), statistics.mean(t for _, t in v)) for c, v in per.items()}
def dominated(c):
    a, t = means[c]
    return any(a2 >= a and t2 >= t and (a2 > a or t2 > t) for d, (a2, t2) in means.items() if d != c)
rows = db.execute("SELECT config_json, seeds_completed, val_accuracy, throughput, on_front FROM config_front "
                  "WHERE experiment_id = ?", (sys.argv[2],)).fetchall()
assert len(rows) == 3, rows
for config, seeds, acc, thr, on_front in rows:
    assert seeds == 2, (config, seeds)
    assert abs(acc - means[config][0]) < 1e-9 and abs(thr - means[config][1]) < 1e-6 * thr, config
    assert bool(on_front) == (not dominated(config)), (config, on_front, means)
print(f"config_front: {sum(r[4] for r in rows)} of {len(rows)} configs on the front, as computed from results")
PY
