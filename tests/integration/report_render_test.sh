#!/usr/bin/env bash
# The HTML report in a real browser (issue 6): `frontier run` a tiny
# experiment (it also says where the coordinator's /metrics is), then headless
# Chromium (Debian's chromium; no sandbox, no GPU, no network, a fresh
# profile each run) takes a screenshot of the report, one of the report with
# its markers and front hidden (the reference picture) and dumps its DOM
# after layout. The plot must be there: one circle.config per configuration
# with data, the Pareto front drawn through the front's circles, and in the
# picture every circle at its place in its color and the front line
# (report_render_check.py); every view of the page laid out, the points
# spread over the plot, no label over another label or a point, each point
# where its table values put it on the drawn scales. Then the read commands
# straight from the store, with no server. The screenshots (the window and
# the whole page) are kept at BUILD_DIR/Testing/report_render/.
#   report_render_test.sh BUILD_DIR SOURCE_DIR
# FRONTIER_TRIAL_BINARY: a frontier-trial to use when BUILD_DIR has none; KEEP_WORK=1 keeps the temporary folder;
# REPORT_STORE=FILE [REPORT_EXPERIMENT=EXP]: also check (and keep screenshots of) that store's report, e.g. the
# quickstart's runs/quickstart/frontier.db.
set -euo pipefail
build="$1"; src="$2"
work="$(mktemp -d)"
cleanup() { [[ -n "${KEEP_WORK:-}" ]] && echo "kept $work" || rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.log "$work"/runs/*/worker-*.log; do [[ -f "$f" ]] && { echo "== $f"; tail -20 "$f"; }; done; exit 1; }
chromium=$(command -v chromium || command -v chromium-browser || true)
[[ -n "$chromium" ]] || fail "chromium not installed (deploy/install-deps.sh installs the Debian package chromium)"
# frontier-worker runs the frontier-trial next to it, else the one on PATH.
if [[ -n "${FRONTIER_TRIAL_BINARY:-}" ]]; then export PATH="$(dirname "$FRONTIER_TRIAL_BINARY"):$PATH"; fi
cd "$work"

"$build/server/frontier" run "$src/tests/integration/tiny.yaml" --workers 1 --runs-dir runs > run.log 2>&1 ||
  fail "frontier run failed"
grep -E "^metrics: coordinator http://127\.0\.0\.1:[0-9]+/metrics" run.log || fail "frontier run does not say where /metrics is"
exp="$(sed -n 's/^experiment \(exp-[0-9]*\) .*/\1/p' run.log | head -1)"
html="$work/runs/$exp.html"
[[ -s "$html" ]] || fail "no HTML report at $html"
configs=$(/usr/bin/python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT COUNT(DISTINCT config_json) FROM results WHERE experiment_id = ? AND state = ?", (sys.argv[2], "completed")).fetchone()[0])' runs/frontier.db "$exp")
echo "$exp: $configs configurations with results; report $html"

size=1440,1200
browse() {  # browse PROFILE ARGS... : one headless Chromium run with a fresh profile
  local profile="$work/$1"; shift
  timeout 90 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --disable-extensions \
    --disable-dev-shm-usage --hide-scrollbars --force-device-scale-factor=1 --user-data-dir="$profile" \
    --window-size="$size" "$@"
}
browse profile-shot --screenshot="$work/report.png" "file://$html" > chromium-screenshot.log 2>&1 ||
  fail "chromium --screenshot failed"
[[ -s report.png ]] || fail "chromium wrote no screenshot"
check=(/usr/bin/python3 "$src/tests/integration/report_render_check.py")
"${check[@]}" hide-marks "$html" "$work/without-marks.html"
browse profile-reference --screenshot="$work/without-marks.png" "file://$work/without-marks.html" \
  > chromium-reference.log 2>&1 || fail "chromium --screenshot of the page without markers failed"
"${check[@]}" probe "$html" "$work/probe.html"
browse profile-dom --dump-dom "file://$work/probe.html" > dom.html 2> chromium-dom.log || fail "chromium --dump-dom failed"

artifacts="$build/Testing/report_render"
mkdir -p "$artifacts"
cp report.png without-marks.png dom.html "$artifacts/"; cp "$html" "$artifacts/report.html"
echo "screenshot: $artifacts/report.png (report: $artifacts/report.html)"
"${check[@]}" check dom.html report.png --configs "$configs" --without-marks without-marks.png ||
  fail "the rendered report"
# Every view is there, the points fill the plot, labels overlap nothing, points sit at their values (issue 21).
"${check[@]}" views dom.html || fail "the report's views"
size=1440,5600 browse profile-full --screenshot="$work/report-full.png" "file://$html" > chromium-full.log 2>&1 ||
  fail "chromium --screenshot of the whole page failed"
cp report-full.png "$artifacts/"
echo "report renders in Chromium ok (whole page: $artifacts/report-full.png)"

# Reads without a server (issue 21): the coordinator of `frontier run` is gone; the store answers, through
# the code the coordinator answers with.
frontier="$build/server/frontier"; db="$work/runs/frontier.db"
"$frontier" status "$exp" --db "$db" > status.txt 2>&1 || fail "status --db: $(cat status.txt)"
grep -q "^$exp  tiny-e2e  completed  6/6 done" status.txt || fail "status --db printed: $(cat status.txt)"
"$frontier" list --db "$db" | grep -q "^$exp  tiny-e2e" || fail "list --db does not list $exp"
[[ $("$frontier" trials "$exp" --db "$db" -o csv | wc -l) == 7 ]] || fail "trials --db -o csv: not a header and 6 trials"
"$frontier" report "$exp" --db "$db" > report.txt 2>&1 || fail "report --db: $(cat report.txt)"
grep -q "^experiment $exp (tiny-e2e): 3 configs" report.txt || fail "report --db printed: $(head -3 report.txt)"
wide=$(/usr/bin/python3 -c 'import sys; print(sum(len(l.rstrip("\n")) > 120 for l in open(sys.argv[1], encoding="utf-8")))' report.txt)
[[ "$wide" == 0 ]] || fail "$wide lines of the terminal report are wider than 120 columns"
"$frontier" pareto "$exp" --store "sqlite:$db" -o json > pareto.json || fail "pareto --store sqlite:"
# Beside the run's page, so that the artifact links (relative to the page) are the same too.
"$frontier" report "$exp" --db "$db" --html "$(dirname "$html")/report-db.html" > /dev/null || fail "report --db --html"
cmp -s "$html" "$(dirname "$html")/report-db.html" || fail "the HTML report read from the store differs from the coordinator's"
grep -q "<section id=\"artifacts\"" "$html" || fail "the run's HTML report does not list the trials' artifacts (traces)"
"$frontier" compare "$exp" 2 baseline --db "$db" > compare.txt 2>&1 || fail "compare --db: $(cat compare.txt)"
grep -q "parity of A against B" compare.txt || fail "compare printed: $(cat compare.txt)"
code=0; "$frontier" report "$exp" --db "$work/no-such.db" > missing.txt 2>&1 || code=$?
[[ $code == 1 ]] && grep -q "no store at" missing.txt && [[ ! -e "$work/no-such.db" ]] ||
  fail "report --db of a missing file: exit $code, $(cat missing.txt)"
code=0; "$frontier" compare "$exp" 2 nothing --db "$db" > nothing.txt 2>&1 || code=$?
[[ $code == 2 ]] && grep -q "names no config" nothing.txt || fail "compare of an unknown config: exit $code, $(cat nothing.txt)"
cp report.txt compare.txt "$artifacts/"
echo "reads without a server ok: status, list, trials, report, pareto, compare"

# A store of one's own (REPORT_STORE=runs/quickstart/frontier.db, REPORT_EXPERIMENT defaults to
# exp-000001): its report through the same checks, its screenshots kept as quickstart-*.png.
if [[ -n "${REPORT_STORE:-}" ]]; then
  other="${REPORT_EXPERIMENT:-exp-000001}"
  "$frontier" report "$other" --db "$REPORT_STORE" --html "$work/quickstart.html" > /dev/null ||
    fail "report $other --db $REPORT_STORE"
  "${check[@]}" probe "$work/quickstart.html" "$work/quickstart-probe.html"
  browse profile-q --dump-dom "file://$work/quickstart-probe.html" > quickstart-dom.html 2> chromium-q.log ||
    fail "chromium --dump-dom of the $other report failed"
  browse profile-q1 --screenshot="$work/quickstart-report.png" "file://$work/quickstart.html" > /dev/null 2>&1
  size=1440,5600 browse profile-q2 --screenshot="$work/quickstart-report-full.png" "file://$work/quickstart.html" \
    > /dev/null 2>&1
  cp quickstart-report.png quickstart-report-full.png quickstart.html "$artifacts/"
  "$frontier" report "$other" --db "$REPORT_STORE" > "$artifacts/quickstart-report.txt"
  quality=$(grep -q '<th>val IoU</th>' "$work/quickstart.html" && echo "val IoU" || echo "val acc")
  "${check[@]}" views quickstart-dom.html --quality-column "$quality" || fail "the views of the $other report"
  echo "the $other report of $REPORT_STORE renders ok: $artifacts/quickstart-report-full.png"
fi
