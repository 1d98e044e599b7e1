#!/usr/bin/env bash
# Every benchmark the README documents, run as written but on a tiny size, so
# that a documented benchmark that stops working (a refused input, a renamed
# flag, a section that ends before it measures) fails the suite (ctest
# bench.readme_benchmarks). Figures are not judged here: they are measured at
# full size by hand. Then the README's Benchmarks section is read back: a
# tool it names that this script does not run fails the check too.
#
# usage: tests/bench/check_readme_benchmarks.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
root="$1"; build="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
ran=()  # the tools run
# run NAME TOOL... -- COMMAND...: runs COMMAND, its output kept; on failure prints its tail and exits 1.
run() {
  local name=$1; shift
  while [[ $1 != -- ]]; do ran+=("$1"); shift; done; shift
  local t0=$SECONDS
  if ! "$@" > "$work/$name.log" 2>&1; then
    echo "FAILED: $name: $*"; tail -n 30 "$work/$name.log"; exit 1
  fi
  echo "ok $name ($((SECONDS - t0)) s): $(tail -n 1 "$work/$name.log" | cut -c1-160)"
}
py=/usr/bin/python3
cd "$root"

# Coordinator load, Optuna's RDB storage, the read queries at scale (300 trials here), both
# durabilities, both stores: the README's coordinator_load.sh lines.
run coordinator_load coordinator_load.sh load_generator optuna_load.py optuna_report.py -- \
  env STORES="sqlite postgresql" DURABILITY="fast durable" WORKERS=2 REPORT_TRIALS=300 \
  bash tests/bench/coordinator_load.sh "$build" 40
grep -q "^postgresql: pareto" "$work/coordinator_load.log" && grep -q "^optuna on the same PostgreSQL" "$work/coordinator_load.log" ||
  { echo "FAILED: coordinator_load printed no report line"; cat "$work/coordinator_load.log"; exit 1; }
# A refused input is an error with its message and exit 1, never an uncaught exception (exit 134,
# or a Python traceback): tests/bench/bench_main.h and bench_main.py.
# refuses NAME PATTERN COMMAND...: COMMAND exits 1 and its output matches PATTERN (grep -E).
refuses() {
  local name=$1 pattern=$2 status=0; shift 2
  "$@" > "$work/refused.log" 2>&1 || status=$?
  if [[ $status != 1 ]] || ! grep -qE "$pattern" "$work/refused.log"; then
    echo "FAILED: $name: exit $status"; cat "$work/refused.log"; exit 1
  fi
  echo "ok $name: $(cat "$work/refused.log")"
}
refuses "load_generator refuses --trials ten" "^load_generator: --trials: 'ten' is not an integer" \
  "$build/tests/bench/load_generator" --fill-store "$work/x.db" --trials ten
refuses "runner_overhead.py refuses a missing spec" "^runner_overhead.py: FileNotFoundError: .*no-such-spec.json" \
  $py tests/bench/runner_overhead.py --spec "$work/no-such-spec.json"

run chaos_soak chaos_soak.sh -- env TRIALS=40 WORK_MS=5 SEED=7 bash tests/bench/chaos_soak.sh "$build" 4 2
run runner_overhead runner_overhead.py bare_loop reference_model.py -- \
  $py tests/bench/runner_overhead.py --build "$build" --steps 14 --rounds 1 --threads 1
run strategy_bench strategy_bench.py strategy_bench -- \
  $py tests/bench/strategy_bench.py --bench "$build/tests/bench/strategy_bench" --seeds 1 --budgets 10,20 --jobs 1

# ASHA against the grid: a two-configuration space of 20 steps instead of the quickstart's 18 trials.
$py - "$root/tests/bench/strategy_quickstart.yaml" "$work/asha.yaml" <<'PY'
import sys, yaml
space = yaml.safe_load(open(sys.argv[1]))
space["task"].update(steps=20, warmup_steps=2, eval_every=10, val_size=256, test_size=256)
space["task"]["schedule"]["warmup"] = 2
space["space"] = {"block": ["basic", "convnext"]}
space["repeats"] = 1
yaml.safe_dump(space, open(sys.argv[2], "w"))
PY
run strategy_asha strategy_asha.py strategy_replay frontier-trial -- \
  $py tests/bench/strategy_asha.py --replay "$build/tests/bench/strategy_replay" --trial "$build/worker/frontier-trial" \
  --runs "$work/asha-runs" --cores 0 --space "$work/asha.yaml" --strategy "{name: asha, min_steps: 10, eta: 2}" --orders 2
run strategy_replay_compare strategy_replay -- \
  "$build/tests/bench/strategy_replay" compare tests/bench/tables/quickstart_grid.json.gz \
  "{name: asha, min_steps: 10, eta: 3} | screen: {steps: 10, in_trial: true}" --orders 2
run strategy_replay_table strategy_replay -- \
  "$build/tests/bench/strategy_replay" table tests/bench/tables/fmnist_backbones.json.gz --strategies "{name: grid};{name: random}" --seeds 1
run tabular_optuna tabular_optuna.py -- \
  $py tests/bench/tabular_optuna.py --replay "$build/tests/bench/strategy_replay" --seeds 1 --share 0.05 --jobs 1 \
  --out "$work/tabular-optuna" --replay-args '--strategies "{name: random}" --seeds 2'
run bev_pool_bench bev_pool_bench -- "$build/tests/bench/bev_pool_bench" --preset small --rounds 1 --reps 1 --threads 1

# Every tool the README's Benchmarks section names was run above.
$py - "$root/README.md" "${ran[@]}" <<'PY'
import re, sys
readme = open(sys.argv[1]).read()
section = readme.split("\n## Benchmarks\n", 1)[1].split("\n## ", 1)[0]
named = set(re.findall(r"tests/bench/([A-Za-z_]+(?:\.py|\.sh)?)(?![\w./])", section))
named |= set(re.findall(r"build/(?:worker|server)/([A-Za-z_-]+)", section))
named.discard("check_readme_benchmarks.sh")  # this check, which the section names
missing = sorted(named - set(sys.argv[2:]))
if missing:
    sys.exit("FAILED: the README's Benchmarks section names " + ", ".join(missing) +
             ", which tests/bench/check_readme_benchmarks.sh does not run")
print("the README's benchmarks, each run: " + ", ".join(sorted(named)))
PY
