#!/bin/sh
# ctest bench.tabular_far: the rebased tabular table (a baseline far from the
# front, tests/bench/tabular_rebase.py) is what the generator writes from the
# recorded table, byte for byte, every trial spec of its space being the
# recorded one's; and its front and hypervolume, computed without Frontier
# (tabular_front.py), are what the Scheduler's replay of its grid and the
# report find (strategy_replay check --expect).
# usage: tabular_far_check.sh SOURCE_DIR STRATEGY_REPLAY SCRATCH_DIR
set -eu
committed="$1/tests/bench/tables/fmnist_backbones_far.json.gz"
mkdir -p "$3"
/usr/bin/python3 "$1/tests/bench/tabular_rebase.py" --table "$1/tests/bench/tables/fmnist_backbones.json.gz" \
  --replay "$2" --out "$3/fmnist_backbones_far.json.gz"
if ! cmp "$committed" "$3/fmnist_backbones_far.json.gz"; then
  echo "MISMATCH: $committed is not what tests/bench/tabular_rebase.py writes" >&2
  exit 1
fi
/usr/bin/python3 "$1/tests/bench/tabular_front.py" "$committed" "$3/front_expected.json"
"$2" check "$committed" --expect "$3/front_expected.json"
