#!/usr/bin/env bash
# Metrics with a real Prometheus (issue 6): frontier-server (SQLite store) and
# one frontier-worker serve /metrics on loopback, a throwaway Prometheus
# (Debian's `prometheus`, temporary storage, loopback port, 1 s scrapes)
# scrapes both with metrics/prometheus.yml's jobs and loads
# metrics/rules/*.yml, while a 6-trial experiment runs. Then, through
# Prometheus' HTTP API: the expected series with the expected values
# (completed trials == the experiment's size, ...); every PromQL expression of
# the Grafana dashboards and the alert rules accepted and (dashboards) with
# data during the run; every rule healthy in Prometheus. promtool checks the
# config and the rules and runs the rules' unit tests. Finally every SQL query
# of the dashboards runs against the store of the run.
#   metrics_prometheus_test.sh BUILD_DIR SOURCE_DIR
# FRONTIER_TRIAL_BINARY overrides BUILD_DIR/worker/frontier-trial; KEEP_WORK=1 keeps the temporary folder.
set -euo pipefail
build="$1"; src="$2"
trial_binary="${FRONTIER_TRIAL_BINARY:-$build/worker/frontier-trial}"
metrics="$src/metrics"
check=("/usr/bin/python3" "$src/tests/integration/metrics_check.py")
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n "${KEEP_WORK:-}" ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log; do echo "== $f"; tail -25 "$f"; done
  exit 1
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
command -v prometheus > /dev/null && command -v promtool > /dev/null ||
  fail "prometheus/promtool not installed (deploy/install-deps.sh installs the Debian package prometheus)"
[[ -x "$trial_binary" ]] || fail "no trial runner at $trial_binary (build with LibTorch or set FRONTIER_TRIAL_BINARY)"
cd "$work"

# Static checks of the shipped files.
promtool check config "$metrics/prometheus.yml" || fail "promtool check config"
promtool check rules "$metrics"/rules/frontier-alerts.yml || fail "promtool check rules"
(cd "$metrics/rules" && promtool test rules frontier-alerts.test.yml) || fail "promtool test rules"
/usr/bin/python3 -c 'import sys, yaml; [yaml.safe_load(open(f)) for f in sys.argv[1:]]' \
  "$metrics/prometheus-kubernetes.yml" "$metrics"/grafana/provisioning/*/*.yml || fail "YAML does not parse"

grpc_port=$(free_port); coordinator_port=$(free_port); worker_port=$(free_port); prom_port=$(free_port)
addr="127.0.0.1:$grpc_port"
prom="http://127.0.0.1:$prom_port"

# Prometheus: the shipped config's jobs and rules, pointed at this run's ports, scraping every second.
/usr/bin/python3 - "$metrics/prometheus.yml" prometheus.yml "127.0.0.1:$coordinator_port" "127.0.0.1:$worker_port" <<'PY'
import os, sys, yaml
shipped, out, coordinator, worker = sys.argv[1:]
config = yaml.safe_load(open(shipped))
config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
base = os.path.dirname(shipped)
config["rule_files"] = [os.path.join(base, f) for f in config["rule_files"]]
jobs = {j["job_name"]: j for j in config["scrape_configs"]}
assert set(jobs) == {"frontier-coordinator", "frontier-worker"}, jobs
jobs["frontier-coordinator"]["static_configs"] = [{"targets": [coordinator]}]
jobs["frontier-worker"]["static_configs"] = [{"targets": [worker]}]
yaml.safe_dump(config, open(out, "w"))
PY
promtool check config prometheus.yml > /dev/null || fail "the test's Prometheus config"
prometheus --config.file=prometheus.yml --storage.tsdb.path="$work/tsdb" --web.listen-address="127.0.0.1:$prom_port" \
  --log.level=warn > prometheus.log 2>&1 & pids+=($!)
since=$(date +%s)

"$build/server/frontier-server" --listen "$addr" --store "$work/metrics.db" --metrics-listen "127.0.0.1:$coordinator_port" \
  > server.log 2>&1 & pids+=($!)
"$build/worker/frontier-worker" --coordinator "$addr" --trial-binary "$trial_binary" --threads-per-trial 1 \
  --name metrics-w1 --metrics-listen "127.0.0.1:$worker_port" > worker.log 2>&1 & pids+=($!)
for _ in $(seq 100); do grep -q "metrics at http://127.0.0.1:$coordinator_port/metrics" server.log && break; sleep 0.1; done
grep -q "metrics at http://127.0.0.1:$coordinator_port/metrics" server.log || fail "frontier-server does not say where /metrics is"
grep "metrics at" server.log worker.log

ready() { /usr/bin/python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" 2> /dev/null; }
for _ in $(seq 100); do ready "$prom/-/ready" && break; sleep 0.2; done
ready "$prom/-/ready" || fail "Prometheus did not become ready"
"${check[@]}" wait-targets --prom "$prom" --timeout 60 frontier-coordinator frontier-worker || fail "scrape targets"

frontier="$build/server/frontier"
exp="$("$frontier" submit "$src/tests/integration/metrics_space.yaml" --server "$addr")"
echo "submitted $exp"
timeout 240 "$frontier" watch "$exp" --server "$addr" > watch.log || fail "the experiment did not complete"
total=$("$frontier" status "$exp" --server "$addr" --output json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["trials"]["total"])')
configs=$(/usr/bin/python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT COUNT(DISTINCT config_json) FROM trials WHERE experiment_id = ?", (sys.argv[2],)).fetchone()[0])' "$work/metrics.db" "$exp")
echo "$exp completed: $total trials, $configs configurations"
sleep 3  # a few more scrapes and rule evaluations after the end

"${check[@]}" series --prom "$prom" --experiment "$exp" --trials "$total" --worker-host metrics-w1 || fail "series"
"${check[@]}" promql --prom "$prom" --metrics-dir "$metrics" --experiment "$exp" --since "$since" || fail "PromQL"
"${check[@]}" sql --metrics-dir "$metrics" --experiment "$exp" --configs "$configs" --sqlite "$work/metrics.db" ||
  fail "dashboard SQL on SQLite"
echo "metrics with Prometheus ok"
