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
#     passes the batch shell's SIGTERM (--signal=B:TERM) on;
#  5. frontier-multinode.sbatch (bash -n, then run) with fake_srun as srun and
#     a stand-in worker that launches a 4-rank, 2-node trial the way
#     --rank-launcher srun does: one worker with --rank-launcher srun, one
#     slot and the shared work dir; the per-node check step; each rank sees
#     its SLURM_PROCID/NTASKS/NODEID, the worker's FRONTIER_RENDEZVOUS (on
#     FRONTIER_IFNAME's address, --rendezvous-host), the cores and GPU per rank (SRUN_CPUS_PER_TASK, SLURM_GPUS_PER_TASK), the
#     Gloo/NCCL interface, and none of a RANK/WORLD_SIZE left in the
#     submitting shell; SIGTERM drains the worker once; a batch shell that is
#     not on the allocation's first node, or a node check that fails, stops
#     the job before any worker starts.
#     With BUILD_DIR, every flag it gives the worker is in the built
#     frontier-worker's --help.
#   slurm_systemd_test.sh SOURCE_DIR [BUILD_DIR]
set -euo pipefail
src="$(cd "$1" && pwd)"
build="${2:-}"
work="$(mktemp -d)"; pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  # the multi-node stand-in worker outlives a killed batch shell
  if [[ -f "$work/mn/worker.pid" ]]; then kill -9 "$(cat "$work/mn/worker.pid")" 2>/dev/null || true; fi
  rm -rf "$work"
}
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

echo "== frontier-multinode.sbatch"
bash -n "$src/deploy/slurm/frontier-multinode.sbatch" || fail "bash -n frontier-multinode.sbatch"
grep -q '^#SBATCH --nodes=' "$src/deploy/slurm/frontier-multinode.sbatch" || fail "frontier-multinode.sbatch asks for no nodes"
mkdir -p "$work/mn/bin" "$work/mn/slurmbin" "$work/mn/logs" "$work/mn/shared"
ln -s "$src/tests/deploy/fake_srun" "$work/mn/slurmbin/srun"
cat > "$work/mn/slurmbin/scontrol" <<'SH'
#!/bin/bash
# Stand-in scontrol: `show hostnames LIST` prints the allocation's nodes, first node first.
[[ "$1 $2" == "show hostnames" ]] || exit 1
printf '%s\n' "$FAKE_FIRST_NODE" node-b
SH
cat > "$work/mn/bin/frontier-worker" <<'SH'
#!/bin/bash
# Stand-in agent: records its flags, runs one trial of 4 ranks on 2 nodes as
# --rank-launcher srun does, then drains on the first SIGTERM.
terms=0
trap 'terms=$((terms + 1)); echo "received SIGTERM ($terms)"' TERM
echo "args: $*"
echo $$ > "$(dirname "$FRONTIER_LOG_DIR")/worker.pid"
flag() { local want=$1; shift; while [[ $# -gt 1 ]]; do [[ "$1" == "$want" ]] && { echo "$2"; return; }; shift; done; }
work_dir=$(flag --work-dir "$@") trial=$(flag --trial-binary "$@")
host=$(flag --rendezvous-host "$@"); host=${host:-$(flag --name "$@")}  # the real worker's default
echo '{"runtime": {"ranks": 4, "nodes": 2}}' > "$work_dir/trial-1.json"
FRONTIER_RENDEZVOUS="tcp://$host:29511" srun --nodes=2 --ntasks=4 --ntasks-per-node=2 --kill-on-bad-exit=1 \
  --export=ALL "$trial" --spec "$work_dir/trial-1.json" > "$work_dir/trial-1.out"
echo "trial exited $?"
while [[ $terms -eq 0 ]]; do sleep 0.1; done
sleep 1
echo "drained after $terms signal(s)"
SH
cat > "$work/mn/bin/frontier-trial" <<'SH'
#!/bin/bash
# Stand-in rank: prints what it was given.
[[ -r "$2" ]] || { echo "rank $SLURM_PROCID: cannot read $2" >&2; exit 1; }
echo "rank=$SLURM_PROCID world=$SLURM_NTASKS node=$SLURM_NODEID local=$SLURM_LOCALID" \
     "store=$FRONTIER_RENDEZVOUS cpus=${SRUN_CPUS_PER_TASK:-} gpus=${SLURM_GPUS_PER_TASK:-}" \
     "gloo=${GLOO_SOCKET_IFNAME:-} nccl=${NCCL_SOCKET_IFNAME:-} timeout=${FRONTIER_DIST_TIMEOUT_S:-}" \
     "RANK=${RANK:-unset} WORLD_SIZE=${WORLD_SIZE:-unset} FRONTIER_RANK=${FRONTIER_RANK:-unset}"
SH
chmod +x "$work/mn/bin/"* "$work/mn/slurmbin/scontrol"
# The batch script as Slurm would run it on this host (env execs bash, so a
# background run's $! is the batch shell itself).
mn_env=(env PATH="$work/mn/slurmbin:$PATH" SLURMD_NODENAME="$node" SLURM_SUBMIT_DIR="$work/mn"
        SLURM_JOB_ID=44 SLURM_JOB_NODELIST="$node,node-b" SLURM_JOB_NUM_NODES=2 SLURM_CPUS_PER_TASK=3
        SLURM_GPUS_PER_NODE=4 FRONTIER_COORDINATOR=coord:50051 FRONTIER_TOKEN_FILE="$work/worker.token"
        FRONTIER_BIN_DIR="$work/mn/bin" FRONTIER_WORK_DIR="$work/mn/shared" FRONTIER_LOG_DIR="$work/mn/logs"
        FRONTIER_IFNAME=lo FRONTIER_DIST_TIMEOUT_S=120 RANK=5 WORLD_SIZE=9 FRONTIER_RANK=5)
multinode() {  # multinode FIRST_NODE [VAR=VALUE...]
  local first=$1; shift
  # (bounded: a script that wrongly starts its worker would wait for SIGTERM)
  timeout -k 5 20 "${mn_env[@]}" FAKE_FIRST_NODE="$first" "$@" bash "$src/deploy/slurm/frontier-multinode.sbatch" \
    > "$work/mn/batch.log" 2>&1
}
"${mn_env[@]}" FAKE_FIRST_NODE="$node" bash "$src/deploy/slurm/frontier-multinode.sbatch" > "$work/mn/batch.log" 2>&1 &
batch=$!; pids+=("$batch")
mn_log="$work/mn/logs/worker-$node.log"
trial_done() { grep -q "trial exited" "$mn_log"; }
wait_for 20 "the multi-node worker's trial" trial_done
grep -q "trial exited 0" "$mn_log" || fail "the stand-in trial failed: $(cat "$mn_log" "$work/mn/batch.log")"
for want in "--rank-launcher srun" "--slots 1" "--device cuda" "--work-dir $work/mn/shared" \
            "--trial-binary $work/mn/bin/frontier-trial" "--coordinator coord:50051" "--token-file $work/worker.token" \
            "--name $node-x2" "--rendezvous-host 127.0.0.1"; do
  grep -q -- "$want" "$mn_log" || fail "multi-node worker lacks '$want': $(grep args: "$mn_log")"
done
if [[ -n "$build" && -x "$build/worker/frontier-worker" ]]; then
  "$build/worker/frontier-worker" --help > "$work/mn/worker-help.txt"
  mapfile -t given < <(grep -m1 '^args:' "$mn_log" | grep -o -- ' --[a-z][a-z0-9-]*' | sed 's/^ //')
  [[ ${#given[@]} -gt 5 ]] || fail "no flags of the multi-node worker found: $(grep args: "$mn_log")"
  for f in "${given[@]}"; do
    grep -q -- "$f " "$work/mn/worker-help.txt" || fail "frontier-multinode.sbatch passes $f, which frontier-worker --help does not list"
  done
  echo "  every flag it passes is in $build/worker/frontier-worker --help"
else
  echo "  (no built frontier-worker given: its flags are not checked against --help)"
fi
grep -q "2 node(s) see $work/mn/shared" "$work/mn/batch.log" || fail "no node check: $(cat "$work/mn/batch.log")"
common="store=tcp://127.0.0.1:29511 cpus=3 gpus=1 gloo=lo nccl=lo timeout=120 RANK=unset WORLD_SIZE=unset FRONTIER_RANK=unset"
want_ranks="rank=0 world=4 node=0 local=0 $common
rank=1 world=4 node=0 local=1 $common
rank=2 world=4 node=1 local=0 $common
rank=3 world=4 node=1 local=1 $common"
got_ranks=$(sort "$work/mn/shared/trial-1.out")
[[ "$got_ranks" == "$want_ranks" ]] || fail "the ranks saw:
$got_ranks
expected:
$want_ranks"
echo "  one worker (--rank-launcher srun, 1 slot, shared work dir); node check on 2 nodes; 4 ranks on 2 nodes"
echo "  see their rank, the rendezvous on lo's address, 3 cores and 1 GPU each, Gloo/NCCL on lo, no stale RANK"
kill -TERM "$batch"
gone() { ! kill -0 "$1" 2> /dev/null; }
wait_for 20 "the multi-node batch script to drain and exit" gone "$batch"
set +e; wait "$batch"; rc=$?; set -e
[[ $rc -eq 0 ]] || fail "multi-node batch script exited $rc: $(cat "$work/mn/batch.log")"
grep -q "drained after 1 signal(s)" "$mn_log" || fail "multi-node worker not drained once: $(cat "$mn_log")"
echo "  --signal=B:TERM drained the worker with one signal, exit 0"
rm -f "$work"/mn/logs/*
set +e; multinode node-a; rc=$?; set -e
[[ $rc -ne 0 ]] || fail "the batch script ran although this host is not the first node"
grep -q "first node is node-a" "$work/mn/batch.log" || fail "no reason given: $(cat "$work/mn/batch.log")"
[[ ! -e "$mn_log" ]] || fail "a worker started on a host that is not the first node"
echo "  not on the allocation's first node: exit $rc before any worker starts"
set +e; multinode "$node" FRONTIER_IFNAME=no-such-if0; rc=$?; set -e
if [[ $rc -eq 0 ]] || ! grep -q "no IPv4 address on FRONTIER_IFNAME=no-such-if0" "$work/mn/batch.log"; then
  fail "an interface without an address was not refused: $(cat "$work/mn/batch.log")"
fi
[[ ! -e "$mn_log" ]] || fail "a worker started without a rendezvous address"
echo "  FRONTIER_IFNAME without an IPv4 address here: exit $rc before any worker starts"
# A second node that does not see the work dir: its tasks run with an empty
# tmpfs over it (a mount namespace of their own; root only).
if unshare -m true 2> /dev/null; then
  rm -f "$work/mn/slurmbin/srun"  # a link to fake_srun: writing through it would change the source tree
  cat > "$work/mn/slurmbin/srun" <<'SH'
#!/bin/bash
# fake_srun, but the tasks of node 1 see an empty FAKE_UNSHARED_DIR.
opts=(); while [[ $# -gt 0 && "$1" == -* ]]; do opts+=("$1"); shift; done
exec "$FAKE_SRUN" "${opts[@]}" "$(dirname "$0")/on-node" "$@"
SH
  cat > "$work/mn/slurmbin/on-node" <<'SH'
#!/bin/bash
# shellcheck disable=SC2016
[[ "$SLURM_NODEID" == 1 ]] && exec unshare -m sh -c 'mount -t tmpfs none "$0" && exec "$@"' "$FAKE_UNSHARED_DIR" "$@"
exec "$@"
SH
  chmod +x "$work/mn/slurmbin/srun" "$work/mn/slurmbin/on-node"
  set +e
  multinode "$node" FAKE_SRUN="$src/tests/deploy/fake_srun" FAKE_UNSHARED_DIR="$work/mn/shared"; rc=$?
  set -e
  [[ $rc -ne 0 ]] || fail "the batch script ran although node 1 does not see the work dir"
  grep -q "is not the folder the worker writes" "$work/mn/batch.log" || fail "no reason given: $(cat "$work/mn/batch.log")"
  [[ ! -e "$mn_log" ]] || fail "a worker started although a node does not see the work dir"
  echo "  a node without the shared work dir: exit $rc before any worker starts"
else
  echo "  (not root: the unshared-work-dir case is not rehearsed)"
fi
echo "slurm and systemd ok"
