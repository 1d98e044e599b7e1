#!/usr/bin/env bash
# CI's fuzz step (docs/hardening.md): configures a second, torch-free build
# with clang-14, ASan and UBSan (FRONTIER_FUZZ), builds only the six
# libFuzzer harnesses and runs each for SECONDS (default 30) with
# tests/fuzz/run.sh. Exit status 1 when any harness crashed: its input is in
# the printed folder; with the fix it belongs in tests/fuzz/regressions/.
# The seed is fixed (FRONTIER_FUZZ_SEED, default 1 here): CI explores what the
# same command explored on a developer's machine, and then some.
#   tests/fuzz/ci.sh [SECONDS]       FRONTIER_FUZZ_BUILD (default ./build-fuzz)
# Optimized for fuzzing rather than debugging (-O1, line tables only,
# assertions kept): the harnesses compile in a fraction of a RelWithDebInfo
# build's time and still symbolize every frame of a report.
set -euo pipefail
seconds="${1:-30}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${FRONTIER_FUZZ_BUILD:-$root/build-fuzz}"
targets=(fuzz_space_yaml fuzz_trial_spec fuzz_trial_output fuzz_result_reader fuzz_profile_recording fuzz_coordinator)

command -v clang++-14 > /dev/null || { echo "fuzz: clang++-14 is missing (deploy/install-deps.sh)" >&2; exit 2; }
start=$(date +%s)
cmake -S "$root" -B "$build" -DFRONTIER_FUZZ=ON -DFRONTIER_WITH_TORCH=OFF -DFRONTIER_BUILD_TESTS=ON \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only" \
  > /dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" > "$build/fuzz-build.log" 2>&1 ||
  { tail -50 "$build/fuzz-build.log"; echo "fuzz: the harnesses did not build" >&2; exit 1; }
echo "fuzz: harnesses built in $(( $(date +%s) - start )) s; running each for $seconds s"
FRONTIER_FUZZ_BUILD="$build" FRONTIER_FUZZ_SEED="${FRONTIER_FUZZ_SEED:-1}" "$root/tests/fuzz/run.sh" "$seconds"
