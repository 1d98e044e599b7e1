#!/bin/sh
# ctest bench.tabular_front: the tabular table's front and hypervolume computed
# without Frontier (tabular_front.py), then the Scheduler's replay of the grid
# and the report compared with them (strategy_replay check --expect).
# usage: tabular_front_check.sh SOURCE_DIR STRATEGY_REPLAY SCRATCH_FILE
set -eu
table="$1/tests/bench/tables/fmnist_backbones.json.gz"
/usr/bin/python3 "$1/tests/bench/tabular_front.py" "$table" "$3"
"$2" check "$table" --expect "$3"
