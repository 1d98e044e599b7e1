#!/usr/bin/python3
"""Optuna's study load and best-trials query at N completed trials, on the
PostgreSQL that Frontier's report queries ran on (tests/bench/coordinator_load.sh,
section report), printed as one JSON line.

The study is what load_generator --fill-store writes for Frontier: two
objectives (val_accuracy and throughput, both maximized), two float parameters
(width_mult, lr), N completed trials with random objective values. Its first
two trials are added through Optuna (study.add_trials); the other N - 2 are
copies of the second one's rows written by SQL, one statement per table, with
their own random values (Optuna's own path commits each trial in its own
transactions: minutes for 100,000). That the copies read back as Optuna's
trials is checked after the timing: load_study sees N trials, each COMPLETE
with two values and two parameters, and best_trials is the front computed
here from the values in the table.

Then, each in a fresh Python process as a user's script would, timed from
after `import optuna` (the interpreter's start and the imports, about 1 s,
are left out):
  load: optuna.load_study(...); study.trials  (every trial, its params and values)
  best: optuna.load_study(...); study.best_trials  (the Pareto front)
with the process's peak resident memory (the imports included).

usage: /usr/bin/python3 optuna_report.py URL TRIALS   (URL: postgresql+psycopg2://...)
"""
import json
import resource
import subprocess
import sys
import time

import bench_main  # tests/bench/bench_main.py: the tool's error exit

STUDY = "report-at-scale"


def fill(url, trials):
    import optuna
    import psycopg2

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=STUDY, storage=url, directions=["maximize", "maximize"])
    dists = {"width_mult": optuna.distributions.FloatDistribution(1.0, 2.0),
             "lr": optuna.distributions.FloatDistribution(0.001, 0.1, log=True)}
    study.add_trials([optuna.trial.create_trial(params={"width_mult": 1.0 + i / 10, "lr": 0.01},
                                                distributions=dists, values=[0.8 + i / 100, 1000.0 + i])
                      for i in range(2)])
    conn = psycopg2.connect(url.replace("postgresql+psycopg2:", "postgresql:"))
    with conn, conn.cursor() as cur:
        cur.execute("SELECT study_id FROM studies WHERE study_name = %s", (STUDY,))
        study_id = cur.fetchone()[0]
        cur.execute("SELECT trial_id FROM trials WHERE study_id = %s AND number = 1", (study_id,))
        template = cur.fetchone()[0]
        for table in ("trial_user_attributes", "trial_system_attributes", "trial_intermediate_values"):
            cur.execute(f"SELECT count(*) FROM {table} WHERE trial_id = %s", (template,))
            if cur.fetchone()[0]:
                sys.exit(f"optuna_report: Optuna {optuna.__version__} wrote {table} rows for a created trial; "
                         "the SQL copy does not copy them")
        cur.execute("""INSERT INTO trials (number, study_id, state, datetime_start, datetime_complete)
                       SELECT g, study_id, state, datetime_start, datetime_complete
                       FROM trials, generate_series(2, %s) g WHERE trial_id = %s""", (trials - 1, template))
        cur.execute("""INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json)
                       SELECT t.trial_id, p.param_name, p.param_value, p.distribution_json
                       FROM trials t JOIN trial_params p ON p.trial_id = %s
                       WHERE t.study_id = %s AND t.number >= 2""", (template, study_id))
        cur.execute("""INSERT INTO trial_values (trial_id, objective, value, value_type)
                       SELECT t.trial_id, v.objective,
                              CASE v.objective WHEN 0 THEN 0.8 + 0.1 * random() ELSE 1000 + 100 * random() END,
                              v.value_type
                       FROM trials t JOIN trial_values v ON v.trial_id = %s
                       WHERE t.study_id = %s AND t.number >= 2""", (template, study_id))
        cur.execute("""SELECT t.number, v.objective, v.value FROM trials t JOIN trial_values v USING (trial_id)
                       WHERE t.study_id = %s""", (study_id,))
        values = {}
        for number, objective, value in cur.fetchall():
            values.setdefault(number, [0.0, 0.0])[objective] = value
    conn.close()
    return values


def front_of(values):
    """The trial numbers no other trial beats on both objectives (both maximized)."""
    front, best_second = set(), float("-inf")
    for number, (first, second) in sorted(values.items(), key=lambda kv: (-kv[1][0], -kv[1][1])):
        if second > best_second:
            front.add(number)
            best_second = second
    return front


def measure(url, query):
    """In this process: the query's seconds and answer, from after the import."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t0 = time.perf_counter()
    study = optuna.load_study(study_name=STUDY, storage=url)
    trials = study.trials if query == "load" else study.best_trials
    seconds = time.perf_counter() - t0
    ok = all(t.state == optuna.trial.TrialState.COMPLETE and len(t.values) == 2 and len(t.params) == 2
             for t in trials)
    print(json.dumps({"s": seconds, "trials": len(trials), "numbers": sorted(t.number for t in trials),
                      "all_complete": ok,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--measure":
        return measure(sys.argv[2], sys.argv[3])
    if len(sys.argv) != 3:
        sys.exit("usage: optuna_report.py URL TRIALS")
    url = sys.argv[1]
    try:
        trials = int(sys.argv[2])
    except ValueError:
        sys.exit(f"optuna_report: TRIALS: '{sys.argv[2]}' is not an integer")
    if trials < 2:
        sys.exit("optuna_report: TRIALS: at least 2")
    t0 = time.perf_counter()
    values = fill(url, trials)
    fill_s = time.perf_counter() - t0
    out = {"trials": trials, "fill_s": round(fill_s, 2)}
    for query in ("load", "best"):
        run = subprocess.run([sys.executable, __file__, "--measure", url, query], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"optuna_report: the {query} query failed: {run.stderr.strip()}")
        answer = json.loads(run.stdout)
        expected = set(values) if query == "load" else front_of(values)
        if set(answer["numbers"]) != expected or not answer["all_complete"]:
            sys.exit(f"optuna_report: the {query} query read {answer['trials']} trials, not the "
                     f"{len(expected)} written (or not every one complete with 2 values and 2 params)")
        out[query] = {"s": round(answer["s"], 3), "trials": answer["trials"],
                      "peak_rss_mib": round(answer["peak_rss_mib"], 1)}
    print(json.dumps(out))


if __name__ == "__main__":
    bench_main.run(main)
