#!/usr/bin/env bash
# ASHA through `frontier run` (issue 5): the experiment finishes, configurations
# are stopped early at the rungs, a configuration's second seed runs only when
# its first seed passed the first rung, every trial ends in a final state, and
# the report shows parity verdicts and intervals over the configs with seeds.
set -euo pipefail
build="$1"; src="$2"
source "$src/tests/integration/frontier_run.sh"
frontier_run "$build" "$src/tests/integration/asha.yaml"
grep -Eq "at parity|worse|inconclusive" run.out || { echo "no parity verdict in the report"; exit 1; }
grep -Eq "stopped early" run.out || { echo "the report does not say which configs were stopped early"; exit 1; }
if grep -q "failed (final): stopped" run.out; then echo "a stop is logged as a failure"; exit 1; fi
/usr/bin/python3 - "$work/runs/frontier.db" "$exp" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
state = db.execute("SELECT state FROM experiments WHERE id = ?", (sys.argv[2],)).fetchone()[0]
assert state == "completed", state
trials = {}
for config, seed, tstate, error, tid in db.execute(
        "SELECT config_json, seed, state, error, id FROM trials WHERE experiment_id = ?", (sys.argv[2],)):
    trials.setdefault(config, {})[seed] = (tstate, error, tid)
assert len(trials) == 6, f"expected 6 configurations, got {len(trials)}"
final = {"completed", "stopped", "failed", "diverged"}
stopped_at_first = 0
for config, seeds in trials.items():
    assert 1 in seeds, (config, seeds)
    for tstate, _, tid in seeds.values():
        assert tstate in final, (tid, tstate)
    first_state, first_error, first_id = seeds[1]
    if config == "{}":
        assert set(seeds) == {1, 2} and all(s[0] == "completed" for s in seeds.values()), seeds  # never stopped
        continue
    # The first seed's last progress step: a seed stopped at the first rung (step 10)
    # leaves its configuration with that one trial.
    step = db.execute("SELECT MAX(step) FROM progress WHERE trial_id = ?", (first_id,)).fetchone()[0] or 0
    if first_state == "stopped" and step <= 10:
        stopped_at_first += 1
        assert set(seeds) == {1}, f"{config}: seed 1 stopped at the first rung, yet other seeds exist: {seeds}"
        assert first_error.startswith("stopped: asha"), first_error
    else:
        assert set(seeds) == {1, 2}, f"{config}: seed 1 passed the first rung, seeds {sorted(seeds)}"
assert stopped_at_first >= 1, "no configuration was stopped at the first rung"
print(f"{stopped_at_first} of 5 variants stopped at the first rung with one seed; the rest ran both seeds")
PY
