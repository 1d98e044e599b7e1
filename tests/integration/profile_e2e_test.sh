#!/usr/bin/env bash
# Profiling end to end: `frontier run` on the tiny space with a profile
# section; seed 1 of every config writes a trace (valid Chrome trace JSON)
# into the run's artifact folder, seed 2 is not profiled (the default
# `seeds: first`), and the report shows each config's bottleneck verdict (the
# profiled seed's) and the profiled seeds' traces and top operators (JSON,
# table and HTML).
set -euo pipefail
build="$1"; src="$2"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cd "$work"
sed 's/^strategy: {name: grid}$/strategy: {name: grid}\nprofile: {steps: 2}/' "$src/tests/integration/tiny.yaml" > profiled.yaml
grep -q '^profile:' profiled.yaml || { echo "could not add a profile section"; exit 1; }
"$build/server/frontier" run profiled.yaml --workers 2 --runs-dir runs > run.out 2>&1 || {
  echo "frontier run failed:"; cat run.out; for f in runs/*/worker-*.log; do echo "== $f"; tail -20 "$f"; done; exit 1; }
exp="$(sed -n 's/^experiment \(exp-[0-9]*\) .*/\1/p' run.out | head -1)"
[[ -n "$exp" ]] || { echo "no experiment id in the output"; cat run.out; exit 1; }
# The 120-column table leaves the verdict out; --wide (read straight from the store) has it.
"$build/server/frontier" report "$exp" --db runs/frontier.db --wide > wide.out 2>&1 || { cat wide.out; exit 1; }
grep -q "bottleneck" wide.out || { echo "the wide report table has no bottleneck column"; cat wide.out; exit 1; }
grep -q "Where the step time goes" "runs/$exp.html" || { echo "the HTML report has no bottleneck section"; exit 1; }
"$build/server/frontier" report "$exp" --db runs/frontier.db -o json > report.json || { cat report.json; exit 1; }
/usr/bin/python3 - "$work/runs/frontier.db" "$exp" "$work/runs/$exp.html" "$work/report.json" <<'PY'
import json, os, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT id, seed, state, result_json FROM trials WHERE experiment_id = ?", (sys.argv[2],)).fetchall()
assert len(rows) == 6, f"expected 6 trials, got {len(rows)}"
html = open(sys.argv[3]).read()
for tid, seed, state, result in rows:
    assert state == "completed", f"{tid} is {state}"
    r = json.loads(result)
    if seed != 1:
        assert "profile" not in r, (tid, seed, r.get("profile"))
        assert r["phases"]["profile_s"] < 0.05, (tid, r["phases"])
        assert r["bottleneck"]["verdict"] in ("input-bound", "unknown"), r["bottleneck"]
        continue
    p = r["profile"]
    assert p["tool"] == "libtorch" and p["steps"]["recorded"] == 2, (tid, p.get("steps"))
    assert "error" not in p, (tid, p["error"])
    assert os.path.isabs(p["trace"]) and os.path.dirname(p["trace"]).startswith(os.path.dirname(sys.argv[1])), p["trace"]
    trace = json.load(open(p["trace"]))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    ops = [e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("aten::")]
    assert len(ops) > 10, f"{tid}: only {len(ops)} operator events in the trace"
    # Operator self times add up to most of the training thread's CPU time in
    # the profiled window (CPU time: waiting for a core on a loaded machine
    # inflates wall time, 0.47 seen in CI with a compile beside it, not this).
    assert 0.5 < p["coverage"] <= 1.0, (tid, p["coverage"])
    assert 0 < p["self_time_coverage"] <= 1.0, (tid, p["self_time_coverage"])
    assert p["top_operators"] and p["top_operators"][0]["self_cpu_ms"] > 0, tid
    assert r["bottleneck"]["verdict"] in ("input-bound", "compute-bound", "memory-bound", "overhead-bound"), r["bottleneck"]
    assert r["bottleneck"]["basis"] in ("profile", "data_wait"), r["bottleneck"]
    assert p["trace"] in html, f"{tid}: trace path not in the HTML report"
report = json.load(open(sys.argv[4]))
verdicts = [c["bottleneck"]["verdicts"] for c in report["configs"]]
assert len(verdicts) == 3 and all(sum(v.values()) == 1 and "unknown" not in v for v in verdicts), verdicts
print(f"{len(rows)} trials, seed 1 of each config profiled: traces valid, verdicts and traces in the report")
PY
