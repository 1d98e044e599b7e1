#!/usr/bin/env bash
# Artifacts that outlive the worker (issue 21, part 7): command trials write
# files to their artifact folder; `frontier run`'s workers upload them to the
# embedded coordinator's artifact store (RUNS_DIR/artifacts) in chunks; with
# the workers' own copies deleted, `frontier artifacts --db` lists and fetches
# them byte for byte, the HTML report links them relative to the page, and a
# symbolic link in the folder was not followed.
set -euo pipefail
build="$1"; src="$2"
source "$src/tests/integration/frontier_run.sh"
frontier_run "$build" "$src/tests/integration/artifacts.yaml"
frontier="$build/server/frontier"
fail() { echo "FAIL: $*"; exit 1; }
db="$work/runs/frontier.db"
trial="$exp-t0001"
[[ -f "$work/runs/artifacts/$exp/$trial/trace.json" ]] || fail "no trace.json in the artifact store: $(find "$work/runs/artifacts")"
cp "$work/runs/$exp/artifacts/$trial/trace.json" "$work/trace.orig"
rm -rf "$work/runs/$exp/artifacts"  # the workers' copies: gone with them
"$frontier" artifacts "$exp" --trial "$trial" --db "$db" > list.txt || fail "artifacts --db: $(cat list.txt)"
cat list.txt
[[ "$(awk '{print $1}' list.txt | tr '\n' ' ')" == "plots/loss.csv trace.json " ]] || fail "listed: $(cat list.txt)"
grep -q "^trace.json  *$(stat -c %s "$work/trace.orig")$" list.txt || fail "trace.json's size"
"$frontier" artifacts "$exp" --trial "$trial" --db "$db" --get trace.json -o "$work/got" > get.txt || fail "--get: $(cat get.txt)"
grep -q "^wrote $work/got/trace.json ([0-9]* bytes)$" get.txt || fail "--get printed: $(cat get.txt)"
cmp "$work/got/trace.json" "$work/trace.orig" || fail "the fetched trace differs from the trial's"
"$frontier" artifacts "$exp" --trial "$trial" --db "$db" --all -o "$work/all" > /dev/null || fail "--all"
[[ "$(cat "$work/all/plots/loss.csv")" == "$(printf 'step,loss\n1,0.5\n2,0.25')" ]] || fail "plots/loss.csv"
[[ ! -e "$work/runs/artifacts/$exp/$trial/host-link" ]] || fail "the worker followed a symbolic link"
grep -q "<a href=\"artifacts/$exp/$trial/trace.json\">trace.json</a>" "$work/runs/$exp.html" || fail "the run's HTML report does not link the trace"
mkdir -p "$work/pages"
"$frontier" report "$exp" --db "$db" --html "$work/pages/report.html" > /dev/null || fail "report --db --html"
grep -q "<a href=\"../runs/artifacts/$exp/$trial/trace.json\">" "$work/pages/report.html" || fail "the page elsewhere does not link the trace relative to itself"
code=0; "$frontier" artifacts "$exp" --trial "$exp-t0099" --db "$db" > missing.txt 2>&1 || code=$?
[[ $code == 3 ]] && grep -q "has no trial" missing.txt || fail "an unknown trial: exit $code, $(cat missing.txt)"
echo "artifacts outlived the workers: listed, fetched, linked"
