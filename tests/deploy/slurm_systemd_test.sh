#!/usr/bin/env bash
# The Slurm launcher and the systemd units, without Slurm or a GPU:
#  1. systemd-analyze verify of both units (binaries stubbed) and their
#     offline security exposure (systemd-analyze security --offline);
#  2. frontier-trial-on-gpu: the worker's CUDA_VISIBLE_DEVICES=<slot> is
#     replaced by the worker's own GPU; SIGTERM ignored on request;
#  3. node-workers.sh as Slurm runs it on a node with GPUs 2 and 5 (the
#     step's CUDA_VISIBLE_DEVICES), with a stand-in frontier-worker that
#     records its arguments and environment: one worker per GPU with the
#     right GPU, name, metrics port, token file; SIGTERM to the launcher
#     drains each worker with exactly one signal, also when Slurm signalled
#     the workers itself; the launcher exits 0;
#  4. frontier-workers.sbatch under a stand-in srun: starts the launcher and
#     passes the batch shell's SIGTERM (--signal=B:TERM) on.
#   slurm_systemd_test.sh SOURCE_DIR
set -euo pipefail
src="$(cd "$1" && pwd)"
work="$(mktemp -d)"; pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/logs/*.log "$work"/*.log; do [[ -f "$f" ]] && { echo "== $f"; cat "$f"; }; done; exit 1; }
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2; shift 2
  for _ in $(seq $((limit * 10))); do "$@" > /dev/null 2>&1 && return 0; sleep 0.1; done
  fail "timed out waiting for $what"
}

echo "== systemd units"
mkdir -p "$work/bin" "$work/units"
for b in frontier-server frontier-worker frontier-trial frontier-trial-on-gpu; do
  printf '#!/bin/sh\n' > "$work/bin/$b"; chmod +x "$work/bin/$b"
done
for u in frontier-server.service frontier-worker@.service; do
  sed -e "s|/usr/local/bin/|$work/bin/|g" -e "s|/usr/local/lib/frontier/|$work/bin/|g" \
    "$src/deploy/systemd/$u" > "$work/units/$u"
done
cp "$work/units/frontier-worker@.service" "$work/units/frontier-worker@3.service"
(cd "$work/units" && systemd-analyze verify frontier-server.service frontier-worker@3.service) > "$work/verify.log" 2>&1 ||
  fail "systemd-analyze verify: $(cat "$work/verify.log")"
[[ ! -s "$work/verify.log" ]] || fail "systemd-analyze verify warns: $(cat "$work/verify.log")"
echo "  systemd-analyze verify: both units clean"
for u in frontier-server.service:2.0 frontier-worker@.service:3.0; do
  unit=${u%:*} limit=${u#*:}
  exposure=$(systemd-analyze security --offline=yes "$src/deploy/systemd/$unit" 2>/dev/null |
             sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
  [[ -n "$exposure" ]] || fail "no exposure level for $unit"
  awk -v e="$exposure" -v l="$limit" 'BEGIN { exit !(e <= l) }' || fail "$unit exposure $exposure > $limit"
  echo "  $unit: exposure $exposure (at most $limit; 10 is unprotected)"
done
grep -q '^KillMode=mixed' "$src/deploy/systemd/frontier-worker@.service" || fail "the worker unit must signal only the agent"
grep -q '^LoadCredential=worker-token' "$src/deploy/systemd/frontier-worker@.service" || fail "worker token not a credential"

echo "== frontier-trial-on-gpu"
cat > "$work/bin/fake-trial" <<'SH'
#!/bin/bash
echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES args=$*"
trap 'echo got-term; exit 0' TERM
if [[ "${1:-}" == --wait ]]; then sleep 2 & wait; echo survived; fi
SH
chmod +x "$work/bin/fake-trial"
out=$(CUDA_VISIBLE_DEVICES=0 FRONTIER_GPU=5 FRONTIER_TRIAL_BINARY="$work/bin/fake-trial" \
      "$src/deploy/frontier-trial-on-gpu" --spec x.json)
[[ "$out" == "CUDA_VISIBLE_DEVICES=5 args=--spec x.json" ]] || fail "wrapper: $out"
CUDA_VISIBLE_DEVICES=0 FRONTIER_GPU=5 FRONTIER_TRIAL_BINARY="$work/bin/fake-trial" FRONTIER_TRIAL_IGNORE_SIGTERM=1 \
  "$src/deploy/frontier-trial-on-gpu" --wait > "$work/ignore.out" & p=$!
sleep 0.5; kill -TERM "$p"; wait "$p" || true
# A trap set for an ignored-at-entry signal has no effect in bash, so the trial ran to its end.
grep -q survived "$work/ignore.out" || fail "FRONTIER_TRIAL_IGNORE_SIGTERM=1: $(cat "$work/ignore.out")"
echo "  GPU 5 restored over the worker's slot index; SIGTERM ignored on request"

echo "== node-workers.sh on a node with GPUs 2,5"
mkdir -p "$work/fakebin" "$work/logs"
cat > "$work/fakebin/frontier-worker" <<'SH'
#!/bin/bash
# Stand-in agent: records how it was started, counts SIGTERMs, drains on the first.
terms=0
trap 'terms=$((terms + 1)); echo "received SIGTERM ($terms)"' TERM
echo "args: $*"
echo "env: FRONTIER_GPU=$FRONTIER_GPU FRONTIER_TRIAL_IGNORE_SIGTERM=$FRONTIER_TRIAL_IGNORE_SIGTERM FRONTIER_TRIAL_BINARY=$FRONTIER_TRIAL_BINARY"
while [[ $terms -eq 0 ]]; do sleep 0.1; done
sleep 1.5   # a second signal during the drain would be counted here
echo "drained after $terms signal(s)"
SH
cp "$work/fakebin/frontier-worker" "$work/fakebin/frontier-trial"
chmod +x "$work/fakebin/"*
echo token > "$work/worker.token"
launch() {
  CUDA_VISIBLE_DEVICES=2,5 SLURM_JOB_ID=42 FRONTIER_COORDINATOR=coord:50051 FRONTIER_TOKEN_FILE="$work/worker.token" \
    FRONTIER_TLS_CA="$work/ca.crt" FRONTIER_BIN_DIR="$work/fakebin" FRONTIER_LOG_DIR="$work/logs" TMPDIR="$work" \
    "$src/deploy/slurm/node-workers.sh" > "$work/launcher.log" 2>&1 &
  launcher=$!; pids+=("$launcher")
}
node=$(hostname -s)
two_started() { [[ $(cat "$work"/logs/worker-*.log 2>/dev/null | grep -c '^env:') -eq 2 ]]; }
launch
wait_for 10 "two workers" two_started
for k in 0 1; do
  log="$work/logs/worker-$node-gpu$k.log"; gpu=$([[ $k == 0 ]] && echo 2 || echo 5)
  grep -q "FRONTIER_GPU=$gpu FRONTIER_TRIAL_IGNORE_SIGTERM=1 FRONTIER_TRIAL_BINARY=$work/fakebin/frontier-trial" "$log" ||
    fail "worker $k env: $(grep env: "$log")"
  for want in "--coordinator coord:50051" "--device cuda --slots 1" "--token-file $work/worker.token" \
              "--tls-ca $work/ca.crt" "--name $node-gpu$k" "--metrics-listen 0.0.0.0:947$k" "--drain-timeout 900" \
              "--trial-binary $src/deploy/slurm/../frontier-trial-on-gpu"; do
    grep -q -- "$want" "$log" || fail "worker $k lacks '$want': $(grep args: "$log")"
  done
done
echo "  one worker per GPU: GPU 2 -> $node-gpu0 (metrics :9470), GPU 5 -> $node-gpu1 (:9471)"
kill -TERM "$launcher"
set +e; wait "$launcher"; rc=$?; set -e
[[ $rc -eq 0 ]] || fail "launcher exited $rc after SIGTERM"
for k in 0 1; do grep -q "drained after 1 signal(s)" "$work/logs/worker-$node-gpu$k.log" || fail "worker $k was not drained by exactly one signal"; done
echo "  SIGTERM to the launcher: each worker drained with one signal, exit 0"
# Slurm may signal every process of the step: the workers first, then the launcher.
rm -f "$work"/logs/*
launch
wait_for 10 "two workers" two_started
for p in $(pgrep -P "$launcher"); do kill -TERM "$p"; done
kill -TERM "$launcher"
set +e; wait "$launcher"; rc=$?; set -e
[[ $rc -eq 0 ]] || fail "launcher exited $rc"
for k in 0 1; do grep -q "drained after 1 signal(s)" "$work/logs/worker-$node-gpu$k.log" || fail "worker $k got a second signal"; done
echo "  SIGTERM to every process of the step: still one signal per worker"

echo "== frontier-workers.sbatch"
mkdir -p "$work/slurmbin" "$work/submit/deploy"
cat > "$work/slurmbin/srun" <<'SH'
#!/bin/bash
# Stand-in srun: runs the task once, here, and forwards SIGTERM to it.
echo "srun $*" >> "$SRUN_LOG"
for last; do :; done
"$last" & task=$!
trap 'kill -TERM $task' TERM
while kill -0 "$task" 2>/dev/null; do wait "$task"; done
SH
chmod +x "$work/slurmbin/srun"
ln -s "$src/deploy/slurm" "$work/submit/deploy/slurm"
ln -s "$src/deploy/frontier-trial-on-gpu" "$work/submit/deploy/frontier-trial-on-gpu"
rm -f "$work"/logs/*
PATH="$work/slurmbin:$PATH" SRUN_LOG="$work/srun.log" SLURM_SUBMIT_DIR="$work/submit" SLURM_JOB_ID=43 \
  CUDA_VISIBLE_DEVICES=0,1 FRONTIER_COORDINATOR=coord:50051 FRONTIER_BIN_DIR="$work/fakebin" \
  FRONTIER_LOG_DIR="$work/logs" TMPDIR="$work" \
  bash "$src/deploy/slurm/frontier-workers.sbatch" > "$work/batch.log" 2>&1 & batch=$!; pids+=("$batch")
wait_for 10 "the batch job's workers" two_started
grep -q "srun --ntasks-per-node=1" "$work/srun.log" || fail "sbatch script did not srun the launcher: $(cat "$work/srun.log")"
kill -TERM "$batch"
set +e; wait "$batch"; rc=$?; set -e
[[ $rc -eq 0 ]] || fail "batch script exited $rc"
for k in 0 1; do grep -q "drained after 1 signal(s)" "$work/logs/worker-$node-gpu$k.log" || fail "batch worker $k not drained once"; done
echo "  sbatch: launcher started through srun; --signal=B:TERM drained both workers, exit 0"
echo "slurm and systemd ok"
