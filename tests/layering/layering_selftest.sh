#!/usr/bin/env bash
# The layering check must refuse a forbidden include added on purpose: on a
# copy of the project's sources, each injected edge below must make
# check_layering.py fail and name the edge; the copy without them must pass.
# usage: layering_selftest.sh SOURCE_DIR
set -euo pipefail
src="$1"; check="$src/tests/layering/check_layering.py"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT

fresh_copy() {
  rm -rf "$work/tree"; mkdir -p "$work/tree"
  (cd "$src" && git ls-files --cached --others --exclude-standard -- '*.h' '*.cc' '*.cu' docs/architecture.md |
     while read -r f; do [[ -f $f ]] && printf '%s\0' "$f"; done | xargs -0 cp --parents -t "$work/tree")
}
expect_pass() {
  if ! /usr/bin/python3 "$check" --root "$work/tree" > "$work/out" 2>&1; then
    echo "FAIL: the untouched copy does not pass:"; cat "$work/out"; exit 1
  fi
}
expect_refused() {  # expect_refused FILE LINE PATTERN
  fresh_copy
  printf '%s\n' "$2" >> "$work/tree/$1"
  if /usr/bin/python3 "$check" --root "$work/tree" > "$work/out" 2>&1; then
    echo "FAIL: '$2' in $1 was accepted"; exit 1
  fi
  if ! grep -q -- "$3" "$work/out"; then
    echo "FAIL: '$2' in $1 was refused without naming the edge ($3):"; cat "$work/out"; exit 1
  fi
  echo "refused as expected: $(grep -- "$3" "$work/out" | head -1)"
}

fresh_copy
expect_pass
expect_refused metrics/endpoint.h '#include "server/store/store.h"' 'metrics may not include server/store/store.h'
expect_refused server/analysis/pareto.h '#include <torch/torch.h>' 'server/analysis may not include LibTorch'
expect_refused worker/agent/agent.h '#include "worker/trial/trainer.h"' 'worker/agent may not include worker/trial/trainer.h'
expect_refused server/report/report.h '#include "server/rpc/coordinator.h"' 'server/report may not include server/rpc/coordinator.h'
expect_refused search_spaces/trial_spec.h '#include "server/store/store.h"' 'search_spaces may not include'
# A rules block that names an unknown module is an error of the rules (exit 2), not a pass.
fresh_copy
sed -i 's|^metrics ->$|metrics -> nowhere|' "$work/tree/docs/architecture.md"
set +e; /usr/bin/python3 "$check" --root "$work/tree" > "$work/out" 2>&1; rc=$?; set -e
if [[ $rc -ne 2 ]] || ! grep -q 'nowhere is not a module' "$work/out"; then
  echo "FAIL: an unknown module in the arrows gave rc=$rc:"; cat "$work/out"; exit 1
fi
echo "layering self-test: 1 passed copy, 5 refused edges, 1 bad rule"
