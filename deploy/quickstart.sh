#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: installs the packages, builds
# Frontier, and runs the quickstart experiment (search_spaces/quickstart.yaml)
# on the embedded default: a coordinator with a SQLite store and local
# workers, all on this machine. Prints the Pareto report and writes an HTML
# page under runs/quickstart/. Extra arguments go to `frontier run`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FRONTIER_BUILD_DIR:-$root/build}"

"$root/deploy/install-deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target frontier frontier-worker frontier-trial frontier_cpu_memory
cd "$root"
exec "$build/server/frontier" run search_spaces/quickstart.yaml --runs-dir runs/quickstart "$@"
