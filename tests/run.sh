#!/usr/bin/env bash
# The test command: installs the Debian packages, configures, builds and runs
# the test suites with ctest, then prints the 20 slowest tests.
#   ./tests/run.sh            every test (what CI runs)
#   ./tests/run.sh --quick    leaves out the tests labelled `slow` (the long
#                             end-to-end, deployment and CUDA compile checks)
# Other arguments go to ctest (e.g. -R Flop). FRONTIER_BUILD_DIR (default
# ./build) is the build folder. Where the time goes: docs/testing.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FRONTIER_BUILD_DIR:-$root/build}"
ctest_args=(--output-on-failure)
for arg in "$@"; do
  if [[ $arg == --quick ]]; then ctest_args+=(--label-exclude slow); else ctest_args+=("$arg"); fi
done

start=$SECONDS
"$root/deploy/install-deps.sh"
installed=$SECONDS
# -g1 (line tables: backtraces name files and lines) instead of RelWithDebInfo's -g: a LibTorch
# unit compiles in about two thirds of the time (docs/testing.md, Where the build time goes).
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DFRONTIER_BUILD_TESTS=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
built=$SECONDS
cd "$build"
# Two tests at a time on two cores: the unit test cases side by side; the scripts that start workers
# and train (the end-to-end runs) are RUN_SERIAL, alone (tests/CMakeLists.txt).
set +e
ctest -j"$(nproc)" "${ctest_args[@]}" 2>&1 | tee "$build/ctest-output.log"
status=${PIPESTATUS[0]}
set -e
echo
echo "The 20 slowest tests (seconds):"
# awk, not head: head would close the pipe early, sort would die of SIGPIPE, and pipefail would make
# the script exit 141 here.
sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/p' "$build/ctest-output.log" |
  sort -rn | awk 'NR <= 20 {printf "  %8.1f  %s\n", $1, $2}'
echo "tests/run.sh: packages $((installed - start)) s, configure and build $((built - installed)) s," \
     "ctest $((SECONDS - built)) s, in all $((SECONDS - start)) s"
exit "$status"
