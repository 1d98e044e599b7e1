#!/bin/sh
# docs/byo-model.md's install, offline: a venv over Debian's packages, then pip
# without build isolation and without an index (Debian's setuptools builds it).
# The package is copied first so that the build leaves nothing in the source tree.
# usage: install_offline.sh REPO
set -eu
root=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$root/worker/python" "$scratch/python"
rm -rf "$scratch/python/build" "$scratch/python"/*.egg-info
/usr/bin/python3 -m venv --system-site-packages "$scratch/venv"
"$scratch/venv/bin/pip" install --no-build-isolation --no-index "$scratch/python" >"$scratch/pip.log" 2>&1 ||
  { cat "$scratch/pip.log"; echo "install_offline: pip install failed" >&2; exit 1; }
cd /
"$scratch/venv/bin/python" - "$scratch" <<'PY'
import sys
import frontier_trial
assert frontier_trial.__file__.startswith(sys.argv[1] + "/venv/"), frontier_trial.__file__
print("installed offline:", frontier_trial.__file__)
PY
