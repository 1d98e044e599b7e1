#!/usr/bin/env bash
# The HTML report in a real browser (issue 6): `frontier run` a tiny
# experiment (it also says where the coordinator's /metrics is), then headless
# Chromium (Debian's chromium; no sandbox, no GPU, no network, a fresh
# profile each run) takes a screenshot of the report, one of the report with
# its markers and front hidden (the reference picture) and dumps its DOM
# after layout. The plot must be there: one circle.config per configuration
# with data, the Pareto front drawn through the front's circles, and in the
# picture every circle at its place in its color and the front line
# (report_render_check.py). The screenshot is kept at
# BUILD_DIR/Testing/report_render/report.png.
#   report_render_test.sh BUILD_DIR SOURCE_DIR
# FRONTIER_TRIAL_BINARY: a frontier-trial to use when BUILD_DIR has none; KEEP_WORK=1 keeps the temporary folder.
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
echo "report renders in Chromium ok"
