#!/usr/bin/env bash
# Runs every libFuzzer harness for SECONDS each (default 30) and prints, per
# target, the executions and the crashes found (docs/hardening.md). Needs a
# FRONTIER_FUZZ build: FRONTIER_FUZZ_BUILD (default ./build-fuzz), made by
#   cmake -S . -B build-fuzz -DFRONTIER_FUZZ=ON -DFRONTIER_WITH_TORCH=OFF \
#         -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14
# A crash leaves its input in OUT/<target>/ (FRONTIER_FUZZ_OUT, default a
# temporary folder): copy it to tests/fuzz/regressions/<target>/ with the fix,
# and the fuzz.<target> ctest replays it from then on. Exit status 1 when any
# target crashed. FRONTIER_FUZZ_SEED fixes libFuzzer's random seed (CI: 1, so
# a run explores what the same run explored here; default: a fresh seed).
set -uo pipefail
seconds="${1:-30}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${FRONTIER_FUZZ_BUILD:-$root/build-fuzz}"
out="${FRONTIER_FUZZ_OUT:-$(mktemp -d -t frontier-fuzz-XXXXXX)}"
fuzz="$root/tests/fuzz"

seeds_of() {
  case "$1" in
    space_yaml) echo "$root/search_spaces $root/tests/integration" ;;
    trial_spec) echo "$root/worker/examples" ;;
    coordinator) echo "$fuzz/seeds/coordinator" ;;
    *) echo "$fuzz/seeds/$1" ;;
  esac
}

status=0
printf '%-18s %12s %10s %8s\n' target executions exec/s crashes
for target in space_yaml trial_spec trial_output result_reader profile_recording coordinator; do
  binary="$build/tests/fuzz/fuzz_$target"
  [[ -x "$binary" ]] || { echo "missing $binary: build it with FRONTIER_FUZZ=ON" >&2; exit 2; }
  mkdir -p "$out/$target/corpus"
  # Seeds: only the files of the kinds the harness reads.
  seeds=()
  for dir in $(seeds_of "$target"); do
    while IFS= read -r -d '' f; do seeds+=("$f"); done < <(find "$dir" -maxdepth 1 -type f \
      \( -name '*.yaml' -o -name '*.json' -o -name '*.txt' -o -name '*.bin' \) -print0)
  done
  cp "${seeds[@]}" "$out/$target/corpus/" 2> /dev/null
  ASAN_OPTIONS=detect_leaks=0 "$binary" "$out/$target/corpus" \
    -max_total_time="$seconds" -seed="${FRONTIER_FUZZ_SEED:-0}" -max_len=16384 -timeout=60 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$out/$target/" > "$out/$target/log" 2>&1
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$target/log" | tail -1)"
  crashes="$(find "$out/$target" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)"
  rate=$(( ${execs:-0} / seconds ))
  printf '%-18s %12s %10s %8s\n' "$target" "${execs:-?}" "$rate" "$crashes"
  [[ "$crashes" -eq 0 && -n "$execs" ]] || status=1
done
echo "inputs and logs: $out"
exit "$status"
