# Sourced by the `frontier run` end-to-end tests: runs SPACE with 2 local
# workers in a fresh temporary folder (removed on exit), prints the run's output
# (and the workers' logs when it fails) and sets `work` and `exp` (the
# experiment id printed by `frontier run`).
# Usage: source frontier_run.sh BUILD SPACE
frontier_run() {
  local build="$1" space="$2"
  work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
  cd "$work"
  "$build/server/frontier" run "$space" --workers 2 --runs-dir runs > run.out 2>&1 || {
    echo "frontier run failed:"; cat run.out
    for f in runs/*/worker-*.log; do echo "== $f"; tail -20 "$f"; done
    exit 1; }
  cat run.out
  exp="$(sed -n 's/^experiment \(exp-[0-9]*\) .*/\1/p' run.out | head -1)"
  [[ -n "$exp" ]] || { echo "no experiment id in the output"; exit 1; }
}
