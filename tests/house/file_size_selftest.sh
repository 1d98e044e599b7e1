#!/usr/bin/env bash
# The file-size check must bite: in a scratch tree (not a checkout, so every
# file counts), a source file one line past the limit fails and is named; a
# test file of any length and a source file at the limit pass.
# usage: file_size_selftest.sh SOURCE_DIR
set -euo pipefail
check="$1/tests/house/check_file_size.py"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$work/server/store" "$work/tests/server"
seq 800 > "$work/server/store/at_limit.cc"
seq 5000 > "$work/tests/server/long_test.cc"
seq 5000 > "$work/server/store/store_test.cc"
if ! /usr/bin/python3 "$check" --root "$work" > "$work/out"; then
  echo "FAIL: files within the rules were refused:"; cat "$work/out"; exit 1
fi
seq 801 > "$work/server/store/past_limit.cc"
if /usr/bin/python3 "$check" --root "$work" > "$work/out"; then
  echo "FAIL: an 801-line source file was accepted"; exit 1
fi
grep -q '^server/store/past_limit.cc: 801 lines' "$work/out" ||
  { echo "FAIL: the refusal does not name the file and its count:"; cat "$work/out"; exit 1; }
echo "refused as expected: $(cat "$work/out")"
