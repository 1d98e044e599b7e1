#!/usr/bin/env bash
# A frontier-trial stand-in for the deployment rehearsal: no LibTorch, a
# couple of seconds per trial. Speaks the runner's output protocol
# (docs/trial-output.md): a start event, progress events, then one result
# line. Appends "TRIAL ATTEMPT WORKER started|finished" to
# $FRONTIER_REHEARSAL_LEDGER so the test can see which attempts ran where.
# usage: fake_trial.sh --spec FILE [--progress-every N]
set -euo pipefail
spec=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --spec) spec="$2"; shift 2 ;;
    *) shift ;;
  esac
done
[[ -f "$spec" ]] || { echo "fake_trial: no --spec file" >&2; exit 64; }
trial=$(sed -n 's/.*"trial_id": *"\([^"]*\)".*/\1/p' "$spec" | head -1)
attempt=$(basename "$spec" .json); attempt="${attempt##*-attempt}"
ledger="${FRONTIER_REHEARSAL_LEDGER:-/dev/null}"
seconds="${FRONTIER_FAKE_TRIAL_SECONDS:-2}"
echo "$trial $attempt ${FRONTIER_REHEARSAL_WORKER:-?} started" >> "$ledger"
echo "{\"event\":\"start\",\"trial_id\":\"$trial\"}"
steps=10
for ((step = 1; step <= steps; step++)); do
  sleep "$(awk -v s="$seconds" -v n="$steps" 'BEGIN { printf "%.3f", s / n }')"
  echo "{\"event\":\"progress\",\"trial_id\":\"$trial\",\"step\":$step,\"loss\":$(awk -v k="$step" 'BEGIN { printf "%.4f", 2.0 / k }')}"
done
# Deterministic, distinct metrics per trial so the report has something to rank.
hash=$(printf '%s' "$trial" | cksum | cut -d' ' -f1)
acc=$(awk -v h="$hash" 'BEGIN { printf "%.4f", 0.5 + (h % 400) / 1000 }')
ms=$(awk -v h="$hash" 'BEGIN { printf "%.3f", 1.0 + (h % 97) / 10 }')
echo "{\"event\":\"eval\",\"trial_id\":\"$trial\",\"step\":$steps,\"val_accuracy\":$acc}"
echo "$trial $attempt ${FRONTIER_REHEARSAL_WORKER:-?} finished" >> "$ledger"
printf '{"event":"result","schema":1,"status":"completed","trial_id":"%s","steps":%d,' "$trial" "$steps"
printf '"step_time_ms":{"median":%s,"p10":%s,"p90":%s,"mean":%s,"cv":0.01},' "$ms" "$ms" "$ms" "$ms"
printf '"throughput":{"samples_per_s":%s},"val_accuracy":%s,"test_accuracy":%s,"val_loss":0.5}\n' \
  "$(awk -v m="$ms" 'BEGIN { printf "%.1f", 64000 / m }')" "$acc" "$acc"
