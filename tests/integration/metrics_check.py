#!/usr/bin/env python3
"""Checks for the metrics integration tests (metrics_prometheus_test.sh, metrics_sql_postgres_test.sh).

  metrics_check.py wait-targets --prom URL JOB...        every job's targets are up
  metrics_check.py series --prom URL --experiment EXP --trials N --worker-host NAME
                                                         the expected series, with the expected values
  metrics_check.py promql --prom URL --metrics-dir DIR --experiment EXP --since UNIX_S
                                                         every PromQL expression of the dashboards and rules
  metrics_check.py sql --metrics-dir DIR --experiment EXP --configs N (--sqlite DB | --postgres URL)
                                                         every SQL query of the dashboards

Dashboards are metrics/grafana/dashboards/*.json; Grafana's variables are substituted the way Grafana would
($experiment -> the experiment id, $__rate_interval -> 1m, ...). Exits non-zero with every failure listed.
"""
import argparse
import glob
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import yaml

FAILURES = []


def fail(message):
    FAILURES.append(message)
    print("FAIL " + message, flush=True)


def ok(message):
    print("ok   " + message, flush=True)


def finish():
    if FAILURES:
        print(f"\n{len(FAILURES)} check(s) failed:", file=sys.stderr)
        for f in FAILURES:
            print("  - " + f, file=sys.stderr)
        sys.exit(1)
    print("all checks passed")


# ---- Prometheus HTTP API ----

def api(prom, path, **params):
    """GET PROM/api/v1/PATH?params; returns (data, error) from Prometheus' JSON envelope."""
    query = urllib.parse.urlencode(params, doseq=True)
    try:
        with urllib.request.urlopen(f"{prom}/api/v1/{path}?{query}", timeout=20) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:  # 400/422: a bad expression; the body says why
        try:
            body = json.load(e)
        except Exception:
            return None, f"HTTP {e.code}"
    except Exception as e:
        return None, str(e)
    if body.get("status") != "success":
        return None, f'{body.get("errorType")}: {body.get("error")}'
    return body["data"], None


def instant(prom, expr):
    """The instant vector of `expr` as [(labels, value)], or raises with Prometheus' error."""
    data, error = api(prom, "query", query=expr)
    if error:
        raise RuntimeError(error)
    if data["resultType"] == "scalar":
        return [({}, float(data["result"][1]))]
    return [(r["metric"], float(r["value"][1])) for r in data["result"]]


# ---- Grafana dashboards ----

def dashboard_files(metrics_dir):
    files = sorted(glob.glob(os.path.join(metrics_dir, "grafana", "**", "*.json"), recursive=True))
    if not files:
        raise SystemExit(f"no dashboards under {metrics_dir}/grafana")
    return files


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def datasource_type(target, panel):
    ds = target.get("datasource") or panel.get("datasource") or {}
    return ds.get("type", "") if isinstance(ds, dict) else ""


def dashboard_queries(metrics_dir, kind):
    """(where, query) of every query of datasource type `kind` ("prometheus" or "postgres"): panel targets and
    template variables."""
    out = []
    for path in dashboard_files(metrics_dir):
        d = json.load(open(path))
        name = os.path.basename(path)
        for p in walk_panels(d.get("panels", [])):
            for t in p.get("targets", []):
                if datasource_type(t, p) != kind:
                    continue
                q = t.get("expr") if kind == "prometheus" else t.get("rawSql")
                if not q:
                    fail(f"{name}: panel '{p.get('title')}' target {t.get('refId')} has no query")
                    continue
                out.append((f"{name}: '{p.get('title')}' {t.get('refId')}", q))
        for v in d.get("templating", {}).get("list", []):
            ds = v.get("datasource") or {}
            if v.get("type") == "query" and isinstance(ds, dict) and ds.get("type") == kind:
                q = v["query"]["query"] if isinstance(v.get("query"), dict) else v.get("query")
                out.append((f"{name}: variable ${v['name']}", q))
    return out


def grafana_substitute(query, experiment, sql=False):
    # SQL: Grafana puts the value in as is (the query quotes it); PromQL: inside a quoted label matcher.
    q = query.replace("${experiment}", experiment).replace("$experiment", experiment)
    for var, value in (("$__rate_interval", "1m"), ("$__interval", "15s"), ("$__range", "1h")):
        q = q.replace("${" + var[1:] + "}", value).replace(var, value)
    leftover = re.findall(r"\$\{?\w+", q)
    if leftover:
        fail(f"unknown Grafana variable(s) {leftover} in: {query}")
    return q


def check_datasources(metrics_dir):
    """Every datasource a dashboard names is provisioned, with the same type."""
    provisioned = {}
    for path in glob.glob(os.path.join(metrics_dir, "grafana", "provisioning", "datasources", "*.yml")):
        for ds in yaml.safe_load(open(path)).get("datasources", []):
            provisioned[ds["uid"]] = ds["type"]
    for path in dashboard_files(metrics_dir):
        d = json.load(open(path))
        ids = [p["id"] for p in walk_panels(d.get("panels", []))]
        if len(ids) != len(set(ids)):
            fail(f"{os.path.basename(path)}: duplicate panel ids")
        for p in walk_panels(d.get("panels", [])):
            for holder in [p] + p.get("targets", []):
                ds = holder.get("datasource")
                if isinstance(ds, dict) and provisioned.get(ds.get("uid")) != ds.get("type"):
                    fail(f"{os.path.basename(path)}: '{p.get('title')}' uses datasource {ds}, not provisioned "
                         f"({provisioned})")
    ok(f"dashboards use only the provisioned datasources {sorted(provisioned)}")


# ---- subcommands ----

def cmd_wait_targets(a):
    deadline = time.time() + a.timeout
    while True:
        data, error = api(a.prom, "targets")
        up = {}
        if data:
            for t in data["activeTargets"]:
                up.setdefault(t["labels"]["job"], []).append(t["health"] == "up")
        missing = [j for j in a.jobs if not up.get(j) or not all(up[j])]
        if not missing:
            ok(f"targets up: {', '.join(a.jobs)}")
            return
        if time.time() > deadline:
            raise SystemExit(f"targets not up after {a.timeout} s: {missing}; {error or json.dumps(data)[:2000]}")
        time.sleep(0.5)


def cmd_series(a):
    e, n, host = a.experiment, a.trials, a.worker_host
    # (expression, predicate on the single value, what it means)
    checks = [
        ('up{job="frontier-coordinator"}', lambda v: v == 1, "the coordinator is scraped"),
        ('up{job="frontier-worker"}', lambda v: v == 1, "the worker is scraped"),
        (f'frontier_coordinator_trials{{experiment="{e}",state="completed"}}', lambda v: v == n,
         f"completed trials == the experiment's size {n}"),
        (f'sum(frontier_coordinator_trials{{experiment="{e}"}})', lambda v: v == n, f"trials of {e} == {n}"),
        (f'sum(frontier_coordinator_trials{{experiment="{e}",state!="completed"}})', lambda v: v == 0,
         "no trial in another state"),
        ('frontier_coordinator_experiments{state="completed"}', lambda v: v == 1, "one completed experiment"),
        ('frontier_coordinator_experiments{state="running"}', lambda v: v == 0, "no running experiment"),
        ("frontier_coordinator_queue_depth", lambda v: v == 0, "the queue is empty"),
        ("frontier_coordinator_leases_granted_total", lambda v: v == n, f"{n} leases granted"),
        ("frontier_coordinator_trial_retries_total", lambda v: v == 0, "no retries"),
        ("frontier_coordinator_leases_expired_total", lambda v: v == 0, "no expired leases"),
        ('frontier_coordinator_attempts_finished_total{outcome="completed"}', lambda v: v == n,
         f"{n} attempts completed"),
        ('sum(frontier_coordinator_attempts_finished_total{outcome!="completed"})', lambda v: v == 0,
         "no other attempt outcome"),
        ("frontier_coordinator_workers_connected", lambda v: v == 1, "one worker connected"),
        (f'frontier_coordinator_worker_last_heartbeat_age_seconds{{host="{host}"}}', lambda v: 0 <= v < 30,
         "the worker was heard from within 30 s"),
        ('frontier_coordinator_rpc_duration_seconds_count{method="RegisterWorker",code="OK"}', lambda v: v == 1,
         "one RegisterWorker"),
        ('frontier_coordinator_rpc_duration_seconds_count{method="CompleteTrial",code="OK"}', lambda v: v == n,
         f"{n} CompleteTrial"),
        # The first trial comes from a LeaseTrial call, the others with the completion before them (lease_next).
        ('sum(frontier_coordinator_rpc_duration_seconds_count{method="LeaseTrial"})', lambda v: v >= 1,
         ">= 1 LeaseTrial"),
        ('frontier_coordinator_rpc_duration_seconds_count{method="SubmitExperiment",code="OK"}', lambda v: v == 1,
         "one SubmitExperiment"),
        ('frontier_coordinator_store_operation_duration_seconds_count{operation="lease_next_trial"}',
         lambda v: v >= n, "lease_next_trial store calls timed"),
        ('frontier_coordinator_store_operation_duration_seconds_count{operation="finish_trial_and_lease"}',
         lambda v: v == n, f"{n} completions that asked for the next trial (finish_trial_and_lease store calls)"),
        ("sum(frontier_coordinator_store_errors_total) or vector(0)", lambda v: v == 0, "no store errors"),
        ("frontier_worker_trials_started_total", lambda v: v == n, f"the worker started {n} trials"),
        ('frontier_worker_trials_finished_total{outcome="completed"}', lambda v: v == n,
         f"the worker completed {n} trials"),
        ('sum(frontier_worker_trials_finished_total{outcome!="completed"})', lambda v: v == 0,
         "no other worker outcome"),
        ("frontier_worker_busy_slots", lambda v: v == 0, "the worker is idle now"),
        ("max_over_time(frontier_worker_busy_slots[10m])", lambda v: v == 1, "the worker was busy"),
        ("frontier_worker_slots", lambda v: v == 1, "one slot"),
        (f'frontier_worker_step_time_seconds_count{{experiment="{e}"}}', lambda v: v >= n,
         "step times sampled (at least one per trial)"),
        (f'histogram_quantile(0.5, sum by (le) (frontier_worker_step_time_seconds_bucket{{experiment="{e}"}}))',
         lambda v: 0 < v < 10, "a plausible median step time"),
        (f'frontier_worker_finished_trial_mfu_ratio_count{{experiment="{e}"}}', lambda v: v == n,
         f"{n} final MFUs"),
        (f'frontier_worker_finished_trial_mfu_ratio_sum{{experiment="{e}"}} / '
         f'frontier_worker_finished_trial_mfu_ratio_count{{experiment="{e}"}}', lambda v: 0 < v <= 1,
         "a plausible mean MFU"),
        ('frontier_worker_device_memory_peak_bytes{slot="0"}', lambda v: v >= 0, "peak memory of slot 0"),
        (f'max(max_over_time(frontier_worker_current_trial{{experiment="{e}"}}[10m]))', lambda v: 1 <= v <= n,
         "the current-trial gauge showed a trial of the experiment"),
        (f'max(max_over_time(frontier_worker_trial_throughput_samples_per_second{{experiment="{e}"}}[10m]))',
         lambda v: v > 0, "a running trial's throughput was scraped"),
        (f'max(max_over_time(frontier_worker_trial_mfu_ratio{{experiment="{e}"}}[10m]))', lambda v: 0 < v <= 1,
         "a running trial's MFU was scraped"),
        (f'max(max_over_time(frontier_worker_trial_data_wait_ratio{{experiment="{e}"}}[10m]))',
         lambda v: 0 <= v <= 1, "a running trial's data-wait fraction was scraped"),
        (f'count(frontier_worker_current_trial{{experiment="{e}"}}) or vector(0)', lambda v: v == 0,
         "no current trial once the experiment is done"),
    ]
    deadline = time.time() + a.timeout
    while True:
        failures = []
        for expr, predicate, meaning in checks:
            try:
                result = instant(a.prom, expr)
            except RuntimeError as error:
                failures.append(f"{meaning}: {expr}: {error}")
                continue
            if len(result) != 1 or not predicate(result[0][1]):
                failures.append(f"{meaning}: {expr} = {[(r[0], r[1]) for r in result]}")
        if not failures or time.time() > deadline:
            break
        time.sleep(1)
    for expr, _, meaning in checks:
        if not any(f.startswith(meaning + ":") for f in failures):
            ok(f"{meaning}: {expr}")
    for f in failures:
        fail(f)
    finish()


def cmd_promql(a):
    check_datasources(a.metrics_dir)
    names, error = api(a.prom, "label/__name__/values")
    if error:
        raise SystemExit(f"cannot list metric names: {error}")
    names = set(names)

    def known_names(where, expr):
        for name in sorted(set(re.findall(r"\bfrontier_[a-z0-9_]+", expr))):
            if name not in names:
                fail(f"{where}: no series named {name} in Prometheus (typo, or never exported)")

    now = time.time()
    queries = dashboard_queries(a.metrics_dir, "prometheus")
    for where, query in queries:
        label_values = re.fullmatch(r"\s*label_values\(\s*([^,]+?)\s*,\s*(\w+)\s*\)\s*", query)
        if label_values:
            metric, label = label_values.groups()
            known_names(where, metric)
            values, error = api(a.prom, f"label/{label}/values", **{"match[]": metric, "start": a.since})
            if error or a.experiment not in (values or []):
                fail(f"{where}: {query} -> {values} {error or ''} (expected {a.experiment})")
            else:
                ok(f"{where}: {query} -> {values}")
            continue
        expr = grafana_substitute(query, a.experiment)
        known_names(where, expr)
        # The query API accepts it ...
        data, error = api(a.prom, "query", query=expr)
        if error:
            fail(f"{where}: rejected: {error}\n       {expr}")
            continue
        # ... and it had data at some point of the run (a typo in a label or metric name has none).
        data, error = api(a.prom, "query_range", query=expr, start=a.since, end=now, step="1s")
        values = [float(v[1]) for r in (data or {}).get("result", []) for v in r["values"]]
        if error or not any(math.isfinite(v) for v in values):
            fail(f"{where}: no data during the run ({error or str(len(values)) + ' values'}):\n       {expr}")
        else:
            ok(f"{where}: {len(values)} samples: {expr[:100]}")

    rules_files = sorted(glob.glob(os.path.join(a.metrics_dir, "rules", "*.yml")))
    rule_count = 0
    for path in rules_files:
        doc = yaml.safe_load(open(path))
        if "groups" not in doc:  # a promtool unit-test file
            continue
        for group in doc["groups"]:
            for rule in group["rules"]:
                rule_count += 1
                where = f"{os.path.basename(path)}: {rule.get('alert') or rule.get('record')}"
                known_names(where, rule["expr"])
                data, error = api(a.prom, "query", query=rule["expr"])
                if error:
                    fail(f"{where}: rejected: {error}")
                else:
                    ok(f"{where}: accepted ({len(data['result'])} series now)")
    if rule_count == 0:
        fail("no alert rules found")
    # Prometheus loaded the same rules file and evaluates it: every rule healthy.
    data, error = api(a.prom, "rules")
    loaded = [r for g in (data or {}).get("groups", []) for r in g["rules"]]
    if error or len(loaded) != rule_count:
        fail(f"Prometheus has {len(loaded)} rules loaded, the files {rule_count} ({error or ''})")
    for r in loaded:
        if r.get("health") != "ok":
            fail(f"rule {r['name']}: health {r.get('health')}: {r.get('lastError')}")
        else:
            ok(f"rule {r['name']} evaluated by Prometheus: health ok, state {r.get('state')}")
    print(f"{len(queries)} dashboard queries and {rule_count} rules checked")
    finish()


def run_postgres(url, query):
    """Rows of `query` via psql (tab-separated), or raises with psql's error."""
    r = subprocess.run(["psql", url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-A", "-t", "-F", "\t", "-c", query],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    return [line.split("\t") for line in r.stdout.splitlines() if line != ""]


def run_sqlite(path, query):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [list(row) for row in db.execute(query).fetchall()]
    except sqlite3.Error as e:
        raise RuntimeError(str(e))
    finally:
        db.close()


def cmd_sql(a):
    run = (lambda q: run_sqlite(a.sqlite, q)) if a.sqlite else (lambda q: run_postgres(a.postgres, q))
    store = f"SQLite {a.sqlite}" if a.sqlite else f"PostgreSQL {a.postgres}"
    queries = dashboard_queries(a.metrics_dir, "postgres")
    if not queries:
        fail("no SQL queries in the dashboards")
    # What a healthy run of N configs (the baseline among them) returns, by panel title and refId.
    expected_rows = {
        ("Throughput vs validation accuracy", "A"): a.configs - 1,  # the variants
        ("Throughput vs validation accuracy", "B"): 1,  # the baseline
        ("Configurations", "A"): a.configs,
        ("Failed, diverged and stopped trials", "A"): 0,
    }
    for where, query in queries:
        sql = grafana_substitute(query, a.experiment, sql=True)
        try:
            rows = run(sql)
        except RuntimeError as error:
            fail(f"{where}: {store} rejected it: {error}\n{sql}")
            continue
        expected = [n for (title, ref), n in expected_rows.items() if f"'{title}" in where and where.endswith(ref)]
        if expected and len(rows) != expected[0]:
            fail(f"{where}: {len(rows)} rows on {store}, expected {expected[0]}: {rows}")
            continue
        if "Throughput vs validation accuracy" in where:
            for config, throughput, accuracy, seeds in rows:
                if not (float(throughput) > 0 and 0 <= float(accuracy) <= 1 and int(seeds) >= 1):
                    fail(f"{where}: implausible point {config}: throughput {throughput}, accuracy {accuracy}")
        ok(f"{where}: {len(rows)} rows on {store}")
    print(f"{len(queries)} SQL queries checked on {store}")
    finish()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("wait-targets")
    p.add_argument("--prom", required=True)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("jobs", nargs="+")
    p = sub.add_parser("series")
    p.add_argument("--prom", required=True)
    p.add_argument("--experiment", required=True)
    p.add_argument("--trials", type=int, required=True)
    p.add_argument("--worker-host", required=True)
    p.add_argument("--timeout", type=float, default=20, help="seconds to wait for the values to settle")
    p = sub.add_parser("promql")
    p.add_argument("--prom", required=True)
    p.add_argument("--metrics-dir", required=True)
    p.add_argument("--experiment", required=True)
    p.add_argument("--since", type=float, required=True, help="start of the run, Unix seconds")
    p = sub.add_parser("sql")
    p.add_argument("--metrics-dir", required=True)
    p.add_argument("--experiment", required=True)
    p.add_argument("--configs", type=int, required=True, help="configurations of the experiment, baseline included")
    store = p.add_mutually_exclusive_group(required=True)
    store.add_argument("--sqlite")
    store.add_argument("--postgres")
    a = parser.parse_args()
    {"wait-targets": cmd_wait_targets, "series": cmd_series, "promql": cmd_promql, "sql": cmd_sql}[a.command](a)


if __name__ == "__main__":
    main()
