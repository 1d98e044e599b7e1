#!/usr/bin/env bash
# The test command: installs the Debian packages, configures, builds and runs
# every test suite with ctest. Extra arguments go to ctest (e.g. -R Flop).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FRONTIER_BUILD_DIR:-$root/build}"

"$root/deploy/install-deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRONTIER_BUILD_TESTS=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
# Serial: the training tests use every core themselves.
ctest --output-on-failure "$@"
