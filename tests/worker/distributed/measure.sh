#!/usr/bin/env bash
# Communication figures of a 2-rank data-parallel run on this machine: the
# test program started twice by hand (a FileStore rendezvous, 1 thread per
# rank), one line per step and rank, then the medians over steps >= 2.
#   measure.sh BUILD_DIR [HIDDEN] [CAP_MB] [OVERLAP 1|0] [STEPS] [BATCH]
set -euo pipefail
build=${1:?usage: measure.sh BUILD_DIR [HIDDEN] [CAP_MB] [OVERLAP] [STEPS] [BATCH]}
hidden=${2:-1024} cap=${3:-25} overlap=${4:-1} steps=${5:-12} batch=${6:-64}
bin="$build/tests/worker/distributed/frontier_distributed_tests"
work=$(mktemp -d /tmp/frontier-dist-measure-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
for rank in 0 1; do
  FRONTIER_DIST_TEST_CHILD=1 FRONTIER_RANK=$rank FRONTIER_WORLD_SIZE=2 FRONTIER_RENDEZVOUS="file://$work/store" \
  FRONTIER_GLOO_HOSTNAME=127.0.0.1 FRONTIER_DIST_TIMEOUT_S=60 OMP_NUM_THREADS=1 \
  DT_HIDDEN=$hidden DT_CAP_MB=$cap DT_OVERLAP=$overlap DT_STEPS=$steps DT_BATCH=$batch DT_OUT="$work/rank$rank.txt" \
    timeout 300 "$bin" > "$work/rank$rank.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
pids=()
if [[ $status -ne 0 ]]; then cat "$work"/rank*.txt "$work"/rank*.log >&2; exit 1; fi
python3 - "$work" "$hidden" "$cap" "$overlap" <<'PY'
import statistics, sys
work, hidden, cap, overlap = sys.argv[1:]
for rank in (0, 1):
    rows = [l.split() for l in open(f"{work}/rank{rank}.txt") if l.startswith("step ")]
    rows = [r for r in rows if int(r[1]) >= 2]  # steps 0-1 warm up
    med = lambda i: statistics.median(float(r[i]) for r in rows)
    print(f"rank {rank} hidden={hidden} cap_mb={cap} overlap={overlap}: bytes/step={rows[0][5]} buckets={rows[0][6]} "
          f"in_backward={rows[0][7]} step_s={med(8):.4f} slowest_s={med(9):.4f} allreduce_s={med(3):.4f} "
          f"exposed_s={med(4):.4f} exposed/step={med(4)/med(9):.2f}")
PY
