#!/bin/bash
# Compiles the correct, fast lab candidates into OUT with the lab's plain flags (one file at a time) and
# runs frontier-trial's op benchmark at the recorded shapes (README.md, "Measured"):
#   bash worker/plugins/lab_candidates/bench/run.sh [OUT=/tmp/lab_build] [THREADS=2] [ROUNDS=10]
set -euo pipefail
root=$(cd "$(dirname "$0")/../../../.." && pwd)
out=${1:-/tmp/lab_build} threads=${2:-2} rounds=${3:-10}
mkdir -p "$out"
for c in attention_kernel/fused_softmax attention_kernel/row_blocked bev_pool/interval_fused bev_pool/pixel_scatter; do
  g++ -std=c++17 -O3 -fPIC -shared -fopenmp -I"$root" -isystem /usr/include/torch/csrc/api/include \
    "$root/worker/plugins/lab_candidates/$c.cc" -o "$out/${c/\//_}.so"
done
for spec in attention_quickstart attention_bev48 bev_pool_bev_lss; do
  python3 -c "import json, sys; s = json.load(open(sys.argv[1])); s['runtime']['threads'] = int(sys.argv[2]); \
json.dump(s, open(sys.argv[3], 'w'), indent=1)" "$root/worker/plugins/lab_candidates/bench/$spec.json" "$threads" \
    "$out/$spec.json"
  # The specs name their plugins relative to the working directory: OUT.
  (cd "$out" && "$root/build/worker/frontier-trial" --op-bench --spec "$spec.json" --rounds "$rounds") | tee "$out/$spec.out"
done
