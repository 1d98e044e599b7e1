#!/usr/bin/python3
"""The same simulated work as load_generator.cc through Optuna's RDB storage.

N processes run ask/tell loops against one study on PostgreSQL (each trial:
ask, one intermediate report, tell), as Optuna users scale out. Prints one JSON
line with trials/s. Run with /usr/bin/python3 (Debian's python3-optuna and
python3-psycopg2).

usage: optuna_load.py URL WORKERS TRIALS
"""
import json
import multiprocessing
import sys
import time

import optuna

import bench_main  # tests/bench/bench_main.py: the tool's error exit


def work(url, study_name, n):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=study_name, storage=url, sampler=optuna.samplers.RandomSampler())
    for _ in range(n):
        trial = study.ask()
        x = trial.suggest_float("width_mult", 1.0, 2.0)
        trial.report(1.0, step=1)
        study.tell(trial, 0.8 + 0.1 * (x - 1.0))


def main():
    url, workers, trials = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    name = f"load-{workers}-{time.time_ns()}"
    # Single-objective: Optuna's Trial.report (the intermediate value) is not
    # supported for multi-objective studies.
    optuna.create_study(study_name=name, storage=url, direction="maximize")
    per = trials // workers
    t0 = time.perf_counter()
    procs = [multiprocessing.Process(target=work, args=(url, name, per)) for _ in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - t0
    print(json.dumps({"workers": workers, "trials": per * workers, "run_s": elapsed,
                      "trials_per_s": per * workers / elapsed}))


if __name__ == "__main__":
    bench_main.run(main)
