#!/usr/bin/env bash
# A frontier-trial stand-in for fault tests: crashes (SIGSEGV) on specs with a
# bottleneck block, runs the real frontier-trial otherwise.
# usage: FRONTIER_REAL_TRIAL=path/to/frontier-trial crashing_trial.sh --spec FILE [args...]
real="${FRONTIER_REAL_TRIAL:?set FRONTIER_REAL_TRIAL to the real frontier-trial}"
spec=""
for ((i = 1; i <= $#; i++)); do [[ "${!i}" == "--spec" ]] && { j=$((i + 1)); spec="${!j}"; }; done
if [[ -n "$spec" ]] && grep -Eq '"block": *"bottleneck"' "$spec"; then
  echo "simulated crash" >&2
  kill -SEGV $$
fi
exec "$real" "$@"
