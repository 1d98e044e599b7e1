#!/usr/bin/env bash
# The kernel lab's judge end to end (issue 37, docs/kernel-lab.md), as a user
# runs it (the kept best in searches: kernel_lab_search_test.sh):
#  - `frontier ops optimize` over a folder of attention candidates: a right
#    one is timed; a wrong one and one that changes its input are incorrect,
#    naming the rule, and so is one right in the gate that returns zeros
#    when its process is the one timing it (or only in its timed calls without
#    autograd); one that does not compile, one that crashes and one that
#    hangs fail with their reasons; a hostile one that tries the network and a
#    write outside its folder reaches neither (no connection arrives, no file
#    appears) and nothing is written outside the run's folder; one that spins
#    while the reference is timed and forges a timing file is timed at the
#    reference's speed, on the judge's clock;
#  - Ctrl-C in the middle and the same command again: recorded candidates are
#    not judged again, the run completes;
#  - a judge that cannot run, and a bad flag, record nothing;
#  - a round of a scripted language model (tests/proposers/llm_standin.py)
#    drafting two more, the prompt holding the earlier attempts.
set -euo pipefail
build="$1"; src="$2"
frontier="$build/server/frontier"
work="$(mktemp -d)"; trap 'kill $(jobs -p) 2>/dev/null || true; pkill -KILL -f "$work/" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

# The candidates; the hostile one is told where to reach.
mkdir candidates
cp "$src"/tests/integration/lab/*.cc candidates/
port_file="$work/port"; outside="$work/outside/escaped.txt"; mkdir -p "$work/outside"
/usr/bin/python3 - "$port_file" <<'PY' &
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8); s.settimeout(1)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
deadline = time.time() + 600
while time.time() < deadline:
    try:
        c, _ = s.accept(); open(sys.argv[1] + ".connected", "w").write("yes"); c.close()
    except socket.timeout:
        pass
PY
for _ in $(seq 50); do [ -f "$port_file" ] && break; sleep 0.1; done
port="$(cat "$port_file")"
precious="$work/outside/precious.txt"; echo "the user's own" > "$precious"
sed -e "s|@PORT@|$port|g" -e "s|@OUTSIDE@|$outside|g" -e "s|@PRECIOUS@|$precious|g" \
  "$src/tests/integration/lab/escape.cc.in" > candidates/escape.cc

cp "$src/tests/integration/lab/attention_spec.json" spec.json
optimize=("$frontier" ops optimize attn-lab --op attention_kernel --spec spec.json --candidates candidates
          --db runs/lab.db --dir ops --timing-rounds 5 --run-timeout 20)

# Interrupted after its first verdict, then continued.
"${optimize[@]}" > first.txt 2> first.err &
pid=$!
for _ in $(seq 600); do
  grep -q ": timed\|: incorrect\|: compile_error\|: crashed\|: refused\|: timed_out" first.err 2>/dev/null && break
  sleep 0.5
done
kill -INT "$pid"; wait "$pid" || true
first=$("$frontier" ops show attn-lab --db runs/lab.db -o json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["candidates"])')
[ "$first" -ge 1 ] && [ "$first" -lt 10 ] || fail "after Ctrl-C: $first candidates recorded"
"${optimize[@]}" > second.txt 2> second.err || { cat second.err; fail "the continued run failed"; }
grep -q "continuing attn-lab" second.err || fail "not continued"
[ "$(grep -c "recorded already" second.err)" -eq "$first" ] || { cat second.err; fail "recorded candidates judged again"; }
cat second.txt

"$frontier" ops show attn-lab --db runs/lab.db -o json > board.json
/usr/bin/python3 - board.json <<'PY'
import json, sys
board = json.load(open(sys.argv[1]))
by = {c["candidate"]: c for c in board["ranked"]}
def check(name, outcome, words=()):
    c = by[name]
    assert c["outcome"] == outcome, (name, c)
    for w in words:
        assert w in c.get("reason", ""), (name, w, c.get("reason"))
assert board["candidates"] == 10, board["candidates"]
check("right_baddbmm.cc", "timed")
check("escape.cc", "refused", ["tried the network"])
check("wrong_scale.cc", "incorrect", ["differs from the reference", "rule: numbers"])
check("mutates_input.cc", "incorrect", ["changed its input q", "rule: unchanged inputs"])
check("timing_cheat.cc", "incorrect", ["while timed", "timed round 1"])
check("forward_cheat.cc", "incorrect", ["while timed", "forward only"])
check("does_not_compile.cc", "compile_error", ["does not compile", "error"])
check("crash.cc", "crashed", ["SIGSEGV"])
check("hang.cc", "timed_out", ["wall"])
assert by["right_baddbmm.cc"]["speedup"]["low"] > 0
# The reference's own computation, spinning while the reference runs, a 40x timing file left behind: about 1x.
check("clock_cheat.cc", "timed")
assert by["clock_cheat.cc"]["speedup"]["median"] < 1.5, by["clock_cheat.cc"]["speedup"]
assert abs(board["fast_1"] * 10 - sum(1 for c in board["ranked"] if c["outcome"] == "timed" and c["speedup"]["median"] > 1)) < 1e-9
assert abs(board["compile_failure_share"] - 1 / 10) < 1e-9 and abs(board["gate_failure_share"] - 4 / 10) < 1e-9, board
assert board["best"]["candidate"] == "right_baddbmm.cc", board["best"]
print("leaderboard ok:", {k: board[k] for k in ("fast_1", "fast_1_5", "compile_failure_share", "gate_failure_share")})
PY
[ ! -e "$outside" ] || fail "a candidate wrote outside its folder"
[ "$(cat "$precious")" = "the user's own" ] || fail "the judge wrote through a link a candidate left"
[ ! -e "$port_file.connected" ] || fail "a candidate made a connection"
[ -f ops/attn-lab/best/plugin.so ] && [ -f ops/attn-lab/best/manifest.json ] || fail "no kept variant"
# Nothing outside the run's folders was written by the candidates.
leftover=$(find "$work" -newer spec.json -type f ! -path "$work/ops/*" ! -path "$work/runs/*" ! -name '*.txt' \
           ! -name '*.err' ! -name 'board.json' ! -path "$work/port*" | head -5)
[ -z "$leftover" ] || fail "files outside the run's folders: $leftover"

# A judge that cannot run (a wrong --trial-binary) records nothing: the candidates are not blamed for it.
code=0; "$frontier" ops optimize bad-judge --op attention_kernel --spec spec.json --candidates candidates \
  --db runs/lab.db --dir ops --trial-binary "$work/no-such-frontier-trial" > bad.txt 2> bad.err || code=$?
[ "$code" -ne 0 ] || fail "a run whose judge cannot run exited 0"
grep -q "cannot start $work/no-such-frontier-trial: No such file or directory: nothing is recorded" bad.err ||
  { cat bad.err; fail "no reason for the stopped run"; }
[ "$("$frontier" ops show bad-judge --db runs/lab.db -o json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["candidates"])')" -eq 0 ] \
  || fail "the judge's failure was recorded as a candidate's"
# One that runs but gives no verdict (a program that is not frontier-trial) records nothing either.
code=0; "$frontier" ops optimize mute-judge --op attention_kernel --spec spec.json --candidates candidates \
  --db runs/lab.db --dir ops --trial-binary /bin/true > mute.txt 2> mute.err || code=$?
[ "$code" -ne 0 ] || fail "a run whose judge gives no verdict exited 0"
grep -q "ended without a verdict on .*nothing is recorded" mute.err || { cat mute.err; fail "no reason for the mute judge"; }
code=0; "$frontier" ops optimize bad-flag --op attention_kernel --spec spec.json --candidates candidates \
  --db runs/lab.db --dir ops --timing-rounds 0 2> flag.err || code=$?
[ "$code" -ne 0 ] && grep -q -- "--timing-rounds" flag.err || { cat flag.err; fail "--timing-rounds 0 was taken"; }

# A model round: the scripted model drafts two candidates.
/usr/bin/python3 "$src/tests/proposers/llm_standin.py" --script "$src/tests/proposers/kernel_answers/attention_round1.json" \
  --port-file model.port --record model.log &
for _ in $(seq 50); do [ -f model.port ] && break; sleep 0.1; done
"$frontier" ops optimize attn-lab --op attention_kernel --spec spec.json --db runs/lab.db --dir ops \
  --timing-rounds 5 --run-timeout 20 --rounds 1 --per-round 2 \
  --endpoint "http://127.0.0.1:$(cat model.port)/v1" --model scripted > model.txt 2> model.err || { cat model.err; fail "model round"; }
"$frontier" ops show attn-lab --db runs/lab.db -o json | /usr/bin/python3 -c '
import json, sys
board = json.load(sys.stdin)
llm = [c for c in board["ranked"] if c["source"] == "llm"]
assert len(llm) == 2 and {c["round"] for c in llm} == {1}, llm
assert {c["outcome"] for c in llm} == {"timed", "compile_error"}, [(c["candidate"], c["outcome"]) for c in llm]
print("model round ok")'
grep -q "wrong_scale.cc" model.log || fail "the prompt does not list the earlier attempts"

"$frontier" report attn-lab --db runs/lab.db | grep -q "fast_1" || fail "frontier report does not show the leaderboard"
echo "kernel lab judge e2e ok"
