#!/usr/bin/env bash
# Strategy external end to end (docs/proposers.md): frontier-optuna-proposer
# (TPE) drives `frontier run` on a small space: every configuration it
# proposed runs and completes, with its proposer and rationale stored and
# shown by `frontier trials`, and every call recorded. Then the proposer is
# killed mid-search: the experiment pauses, with the reason in `frontier
# status`, instead of failing, and the search continues and completes when
# the proposer comes back on its port. Last, frontier-llm-proposer against
# the stand-in chat server (tests/proposers/llm_standin.py) drives a run: its
# rationales, calls and tokens reach the store and the report, and its key
# reaches the stand-in but no log; and against a stand-in that refuses the key
# (401), which pauses the experiment with the reason.
set -euo pipefail
build="$1"; src="$2"
export FRONTIER_PROTO_PYTHON="$build/python" PYTHONWARNINGS=ignore
work="$(mktemp -d)"
proposer_pid=""; run_pid=""; standin_pid=""
cleanup() {
  [[ -n "$proposer_pid" ]] && kill "$proposer_pid" 2>/dev/null || true
  [[ -n "$standin_pid" ]] && kill "$standin_pid" 2>/dev/null || true
  [[ -n "$run_pid" ]] && kill "$run_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
fail() { echo "FAIL: $*"; for f in run*.out proposer.log; do [[ -f $f ]] && { echo "== $f"; tail -40 "$f"; }; done; exit 1; }

start_proposer() {  # PORT (0: any free one); sets port and proposer_pid
  rm -f port
  "$src/proposers/optuna/frontier-optuna-proposer" --sampler tpe --listen "127.0.0.1:$1" --port-file port \
    >> proposer.log 2>&1 &
  proposer_pid=$!
  for _ in $(seq 200); do [[ -s port ]] && break; sleep 0.1; done
  [[ -s port ]] || fail "the proposer did not start"
  port="$(cat port)"
}
start_llm_proposer() {  # LOG [SCRIPT.json]: a stand-in chat server (llm_standin.py) and
  # frontier-llm-proposer against it with ./key; sets standin_pid, proposer_pid and port
  /usr/bin/python3 "$src/tests/proposers/llm_standin.py" ${2:+"$2"} > "standin-$1" 2>&1 &
  standin_pid=$!
  for _ in $(seq 100); do [[ -s "standin-$1" ]] && break; sleep 0.1; done
  local endpoint
  endpoint="$(head -1 "standin-$1")"
  [[ "$endpoint" == http://127.0.0.1:*/v1 ]] || fail "no stand-in: $endpoint"
  rm -f port
  "$src/proposers/llm/frontier-llm-proposer" --endpoint "$endpoint" --model stand-in --api-key-file key \
    --listen 127.0.0.1:0 --port-file port > "$1" 2>&1 &
  proposer_pid=$!
  for _ in $(seq 200); do [[ -s port ]] && break; sleep 0.1; done
  port="$(cat port)"
}
make_space() {  # OUT TRIALS BATCH
  sed "s/__ADDRESS__/127.0.0.1:$port/; s/__TRIALS__/$2/; s/__BATCH__/$3/" \
    "$src/tests/integration/proposer_space.yaml" > "$1"
}
sql() { /usr/bin/python3 -c 'import sqlite3,sys; print("\n".join("|".join(map(str, r)) for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchall()))' "$@"; }

# 1. A search through the bridge: 4 configurations, 2 at a time.
start_proposer 0
make_space one.yaml 4 2
"$build/server/frontier" run one.yaml --workers 2 --runs-dir runs1 > run1.out 2>&1 || fail "frontier run failed"
exp="$(sed -n 's/^experiment \(exp-[0-9]*\) .*/\1/p' run1.out | head -1)"
[[ -n "$exp" ]] || fail "no experiment id"
/usr/bin/python3 - runs1/frontier.db "$exp" <<'PY' || fail "stored trials"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT config_json, is_baseline, state, proposer, rationale FROM trials WHERE experiment_id = ?",
                  (sys.argv[2],)).fetchall()
assert len(rows) == 5, rows  # the baseline and 4 proposals, one seed each
configs = set()
for config, baseline, state, proposer, rationale in rows:
    assert state == "completed", (config, state)
    if baseline:
        continue
    c = json.loads(config)
    assert set(c) == {"stages[0].block", "stem.width"}, c
    assert c != {"stages[0].block": "basic", "stem.width": 8}, "the baseline was proposed"
    assert proposer == "optuna:tpe", proposer
    assert rationale.startswith("tpe sample") or rationale.startswith("random:"), rationale
    configs.add(config)
assert len(configs) == 4, configs
state, paused = db.execute("SELECT state, paused FROM experiments WHERE id = ?", (sys.argv[2],)).fetchone()
assert state == "completed" and paused == "", (state, paused)
calls = db.execute("SELECT asked, accepted, rejected, error, latency_ms FROM proposer_calls WHERE experiment_id = ?",
                   (sys.argv[2],)).fetchall()
assert sum(c[1] for c in calls) == 4 and all(c[3] == "" for c in calls), calls
assert all(c[4] >= 0 for c in calls), calls
print(f"4 proposals of optuna:tpe completed; {len(calls)} proposer calls recorded")
PY
"$build/server/frontier" trials "$exp" --db runs1/frontier.db > trials.out || fail "frontier trials"
grep -q "optuna:tpe: tpe sample" trials.out || { cat trials.out; fail "frontier trials shows no rationale"; }

# 2. Killed mid-search: one configuration at a time, so every next one needs the proposer.
make_space two.yaml 5 1
"$build/server/frontier" run two.yaml --workers 1 --runs-dir runs2 > run2.out 2>&1 &
run_pid=$!
db=runs2/frontier.db
for _ in $(seq 600); do
  [[ -f $db ]] && [[ "$(sql $db 'SELECT COALESCE(SUM(accepted), 0) FROM proposer_calls' 2>/dev/null)" -ge 1 ]] && break
  sleep 0.1
done
exp="$(sed -n 's/^experiment \(exp-[0-9]*\) .*/\1/p' run2.out | head -1)"
[[ -n "$exp" ]] || fail "no experiment id in the second run"
kill -9 "$proposer_pid"; wait "$proposer_pid" 2>/dev/null || true; proposer_pid=""
for _ in $(seq 900); do
  [[ -n "$(sql $db "SELECT paused FROM experiments WHERE id = '$exp'")" ]] && break
  sleep 0.1
done
paused="$(sql $db "SELECT paused FROM experiments WHERE id = '$exp'")"
[[ "$paused" == "proposer at 127.0.0.1:$port unavailable: "* ]] || fail "not paused: '$paused'"
"$build/server/frontier" status "$exp" --db $db > status.out || fail "frontier status"
grep -q "running .*paused: proposer at 127.0.0.1:$port unavailable" status.out || { cat status.out; fail "status"; }
[[ "$(sql $db "SELECT state FROM experiments WHERE id = '$exp'")" == running ]] || fail "not running while paused"
echo "paused: $paused"
start_proposer "$port"
for _ in $(seq 1800); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.1; done
wait "$run_pid" || fail "the second frontier run failed"
run_pid=""
/usr/bin/python3 - $db "$exp" <<'PY' || fail "after the restart of the proposer"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
states = [r[0] for r in db.execute("SELECT state FROM trials WHERE experiment_id = ? AND is_baseline = 0", (sys.argv[2],))]
assert states == ["completed"] * 5, states
state, paused = db.execute("SELECT state, paused FROM experiments WHERE id = ?", (sys.argv[2],)).fetchone()
assert (state, paused) == ("completed", ""), (state, paused)
errors = [r[0] for r in db.execute("SELECT error FROM proposer_calls WHERE experiment_id = ? AND error <> ''", (sys.argv[2],))]
assert errors, "no failed call recorded"
print(f"resumed: all 5 configurations completed; {len(errors)} failed calls recorded while it was down")
PY

# 3. The LLM proposer against the stand-in chat server.
kill "$proposer_pid"; wait "$proposer_pid" 2>/dev/null || true; proposer_pid=""
key="sk-e2e-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
echo "$key" > key
start_llm_proposer llm.log
make_space three.yaml 3 2
"$build/server/frontier" run three.yaml --workers 2 --runs-dir runs3 > run3.out 2>&1 || fail "the LLM run failed"
exp="$(sed -n 's/^experiment \(exp-[0-9]*\) .*/\1/p' run3.out | head -1)"
/usr/bin/python3 - runs3/frontier.db "$exp" <<'PY' || fail "the LLM run's store"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT state, proposer, rationale FROM trials WHERE experiment_id = ? AND is_baseline = 0",
                  (sys.argv[2],)).fetchall()
assert len(rows) == 3 and all(r == ("completed", "llm:stand-in", "stand-in: next untried combination") for r in rows), rows
tokens = db.execute("SELECT SUM(prompt_tokens), SUM(completion_tokens), SUM(model_calls) FROM proposer_calls "
                    "WHERE experiment_id = ?", (sys.argv[2],)).fetchone()
assert tokens[0] > 0 and tokens[1] > 0 and tokens[2] >= 2, tokens
print(f"3 proposals of llm:stand-in completed; tokens {tokens[0]} prompt + {tokens[1]} completion, {tokens[2]} model calls")
PY
report="$(tr -s '\n ' '  ' < run3.out)"  # the table's notes are wrapped
grep -q "proposed by llm:stand-in: [^:]*: stand-in: next untried combination" <<< "$report" || fail "no rationale in the report"
grep -Eq "proposer calls: [0-9]+ \(0 failed\), 3 configurations accepted .* model: [0-9]+ calls, [1-9][0-9]* prompt \+ [1-9][0-9]* completion tokens" \
  <<< "$report" || fail "the report shows no proposer calls"
if grep -rq "$key" llm.log run3.out runs3/*/*.log 2>/dev/null; then fail "the key was logged"; fi

# 4. A model that refuses the key (HTTP 401): the proposer says it cannot propose and the experiment
# pauses at once with that reason, shown by `frontier status`, the run's progress line and the report;
# no configuration runs without the model (no fallback unless asked).
kill "$proposer_pid"; wait "$proposer_pid" 2>/dev/null || true; proposer_pid=""
kill "$standin_pid"; wait "$standin_pid" 2>/dev/null || true; standin_pid=""
echo '[{"status": 401, "body": "{\"error\": {\"message\": \"Incorrect API key provided\"}}"}]' > refuse.json
start_llm_proposer llm4.log refuse.json
make_space four.yaml 3 2
"$build/server/frontier" run four.yaml --workers 1 --runs-dir runs4 > run4.out 2>&1 &
run_pid=$!
db=runs4/frontier.db
for _ in $(seq 600); do
  [[ -f $db ]] && [[ -n "$(sql $db "SELECT paused FROM experiments" 2>/dev/null)" ]] && break
  sleep 0.1
done
exp="$(sql $db "SELECT id FROM experiments")"
paused="$(sql $db "SELECT paused FROM experiments WHERE id = '$exp'")"
[[ "$paused" == "proposer llm:stand-in at 127.0.0.1:$port cannot propose: "*401* ]] || fail "not paused by the 401: '$paused'"
"$build/server/frontier" status "$exp" --db $db > status4.out || fail "frontier status"
grep -q "paused: proposer llm:stand-in at 127.0.0.1:$port cannot propose: .*401" status4.out ||
  { cat status4.out; fail "frontier status does not say why"; }
for _ in $(seq 300); do grep -q "paused: proposer llm:stand-in .*401" run4.out && break; sleep 0.1; done
grep -q "paused: proposer llm:stand-in .*401" run4.out || fail "the run's progress line does not say why"
"$build/server/frontier" report "$exp" --db $db > report4.out || fail "frontier report"
tr -s '\n ' '  ' < report4.out | grep -q "last proposer error: .*401" || { cat report4.out; fail "the report does not say why"; }
[[ "$(sql $db "SELECT COUNT(*) FROM trials WHERE experiment_id = '$exp' AND is_baseline = 0")" == 0 ]] ||
  fail "configurations ran without the model"
kill "$run_pid"; wait "$run_pid" 2>/dev/null || true; run_pid=""
echo "a refused key pauses: $paused"
echo "proposer e2e: ok"
