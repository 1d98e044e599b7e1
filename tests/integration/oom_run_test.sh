#!/usr/bin/env bash
# Out of memory is a result, not a retry (issue 16): `frontier run` with a
# memory limit on each trial process; the baseline fits, the 8192-channel
# variant cannot, and its trial is failed once (attempt 1, never re-queued)
# with error_kind out_of_memory and the limit in its error.
set -euo pipefail
build="$1"; src="$2"; limit_mb="${3:-1536}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cd "$work"
# The experiment ends (a failed trial is a result): the exit status is not the check, the store is.
"$build/server/frontier" run "$src/tests/integration/oom.yaml" --workers 1 --runs-dir runs \
  --memory-limit-mb "$limit_mb" > run.out 2>&1 || true
cat run.out
exp="$(sed -n 's/^experiment \(exp-[0-9]*\) .*/\1/p' run.out | head -1)"
[[ -n "$exp" ]] || { echo "no experiment id in the output"; exit 1; }
/usr/bin/python3 - "$work/runs/frontier.db" "$exp" "$limit_mb" <<'PY' || { for f in runs/*/worker-*.log; do echo "== $f"; tail -30 "$f"; done; exit 1; }
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
limit = int(sys.argv[3])
rows = db.execute("SELECT id, state, attempt, error, result_json, config_json FROM trials WHERE experiment_id = ?",
                  (sys.argv[2],)).fetchall()
assert len(rows) == 2, rows
states = sorted((state, attempt) for _, state, attempt, _, _, _ in rows)
assert states == [("completed", 1), ("failed", 1)], states
for tid, state, attempt, error, result, config in rows:
    if state != "failed":
        continue
    r = json.loads(result)
    assert r["error_kind"] == "out_of_memory", r
    assert r["memory_limit_mb"] == limit, r
    assert f"under the worker's limit of {limit} MiB per trial" in error, error
    assert "8192" in config, config
    print(f"{tid}: failed once: {error[:200]}")
PY
