#!/usr/bin/env bash
# npm-deps.sh DIR: installs the pinned validators of tests/deploy/npm
# (package.json + package-lock.json) into DIR/node_modules with `npm ci`, once:
# again only when the lock file changes. Prints DIR. Needs node and npm, and
# the npm registry the first time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$1"
command -v npm > /dev/null || { echo "npm-deps.sh: npm is not installed (deploy/install-deps.sh installs it)" >&2; exit 1; }
mkdir -p "$dir"
stamp="$dir/.lock-sha256"
want="$(sha256sum "$here/npm/package-lock.json" | cut -d' ' -f1)"
if [[ ! -d "$dir/node_modules" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  cp "$here/npm/package.json" "$here/npm/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error > npm-ci.log 2>&1) ||
    { echo "npm-deps.sh: npm ci failed:" >&2; tail -20 "$dir/npm-ci.log" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
echo "$dir"
