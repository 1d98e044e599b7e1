#!/usr/bin/env bash
# Runs on each node of a Slurm step (srun --ntasks-per-node=1): starts one
# frontier-worker per GPU allocated to the step on this node and waits for
# them. GPUs: the step's CUDA_VISIBLE_DEVICES (indices or UUIDs, as Slurm set
# it), else 0..SLURM_GPUS_ON_NODE-1, else every GPU nvidia-smi lists.
# SIGTERM/SIGINT drains every worker (each gets exactly one signal, also when
# Slurm already signalled the whole step); the exit status is the first
# non-zero status of a worker, else 0.
# Environment: FRONTIER_COORDINATOR (required), FRONTIER_TOKEN_FILE,
# FRONTIER_TLS_CA, FRONTIER_BIN_DIR (where frontier-worker and frontier-trial
# are; default: from PATH), FRONTIER_DRAIN_TIMEOUT (900),
# FRONTIER_METRICS_PORT_BASE (9470: GPU slot k serves /metrics on base+k),
# FRONTIER_WORKER_ARGS (more flags), FRONTIER_LOG_DIR (default: the job's folder).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${FRONTIER_COORDINATOR:?set FRONTIER_COORDINATOR=HOST:PORT}"
bin_dir="${FRONTIER_BIN_DIR:-$(dirname "$(command -v frontier-worker || echo /usr/local/bin/frontier-worker)")}"
log_dir="${FRONTIER_LOG_DIR:-${SLURM_SUBMIT_DIR:-$PWD}/frontier-logs-${SLURM_JOB_ID:-local}}"
node="$(hostname -s)"
mkdir -p "$log_dir"

gpus=()
if [[ -n "${CUDA_VISIBLE_DEVICES:-}" && "${CUDA_VISIBLE_DEVICES}" != NoDevFiles ]]; then
  IFS=, read -r -a gpus <<< "$CUDA_VISIBLE_DEVICES"
elif [[ -n "${SLURM_GPUS_ON_NODE:-}" ]]; then
  for ((g = 0; g < SLURM_GPUS_ON_NODE; g++)); do gpus+=("$g"); done
elif command -v nvidia-smi > /dev/null; then
  mapfile -t gpus < <(nvidia-smi --query-gpu=index --format=csv,noheader)
fi
[[ ${#gpus[@]} -gt 0 ]] || { echo "node-workers: no GPU allocated on $node" >&2; exit 1; }

common=(--coordinator "$FRONTIER_COORDINATOR" --device cuda --slots 1
        --trial-binary "$here/../frontier-trial-on-gpu"
        --drain-timeout "${FRONTIER_DRAIN_TIMEOUT:-900}")
[[ -n "${FRONTIER_TOKEN_FILE:-}" ]] && common+=(--token-file "$FRONTIER_TOKEN_FILE")
[[ -n "${FRONTIER_TLS_CA:-}" ]] && common+=(--tls-ca "$FRONTIER_TLS_CA")
threads=$(( $(nproc) / ${#gpus[@]} )); (( threads < 1 )) && threads=1
read -r -a extra <<< "${FRONTIER_WORKER_ARGS:-}"

pids=() logs=()
for k in "${!gpus[@]}"; do
  gpu="${gpus[$k]}" log="$log_dir/worker-$node-gpu$k.log"
  FRONTIER_GPU="$gpu" FRONTIER_TRIAL_BINARY="$bin_dir/frontier-trial" FRONTIER_TRIAL_IGNORE_SIGTERM=1 \
    "$bin_dir/frontier-worker" "${common[@]}" --name "$node-gpu$k" --threads-per-trial "$threads" \
    --metrics-listen "0.0.0.0:$(( ${FRONTIER_METRICS_PORT_BASE:-9470} + k ))" \
    --work-dir "${TMPDIR:-/tmp}/frontier-${SLURM_JOB_ID:-local}-$node-gpu$k" "${extra[@]}" > "$log" 2>&1 &
  pids+=($!) logs+=("$log")
  echo "node-workers: $node GPU $gpu -> worker $node-gpu$k (pid $!, log $log)"
done

# shellcheck disable=SC2317  # called by the trap
drain() {
  # A worker that Slurm already signalled says so in its log; a second signal
  # would make it stop at once instead of draining.
  sleep 1
  for i in "${!pids[@]}"; do
    grep -q "received SIG" "${logs[$i]}" 2>/dev/null || kill -TERM "${pids[$i]}" 2>/dev/null
  done
  echo "node-workers: draining ${#pids[@]} worker(s) on $node"
}
trap drain TERM INT

# Poll rather than `wait PID`: a trapped signal interrupts wait, and waiting
# again on a child that exited meanwhile is not reliable in every bash.
alive() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
while alive; do sleep 0.5 & wait $! 2>/dev/null; done
status=0
for p in "${pids[@]}"; do
  wait "$p"; rc=$?
  [[ $rc -ne 0 && $status -eq 0 ]] && status=$rc
done
exit "$status"
