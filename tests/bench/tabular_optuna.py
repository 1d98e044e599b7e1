#!/usr/bin/python3
"""Optuna's samplers over the tabular benchmark's table, beside Frontier's strategies.

Reads the table (tests/bench/tables/fmnist_backbones.json.gz, written by
tests/bench/tabular_grid.py), runs Debian's python3-optuna over its space with
every trial answered from the table (a configuration's objectives are the mean
over its seeds, as the report's), and writes the order in which each sampler
asked for configurations, one sequence per seed. Then it runs
`strategy_replay table` with those sequences, so that Frontier's strategies
(replayed through the real Scheduler) and Optuna's are scored by one
implementation of the hypervolume, at the same budgets.

Samplers: TPESampler(multivariate=True) and NSGAIISampler, otherwise their
defaults. Numeric dimensions (width, depth, kernel) are ordinal
(suggest_int over the choice's index), the others categorical. A
configuration Optuna asks for again is answered again from the table and not
counted twice (its cost and its evaluation count are those of its first ask):
this favours Optuna. Each run stops once it has asked for --share of the
grid's configurations (distinct) or after 4x that many asks. On a rebased
table (tests/bench/tabular_rebase.py) the baseline is a configuration of
the space, "baseline_config": an ask for it is answered with the baseline's
outcome at no cost and not counted, as a repeat is (no Frontier strategy
proposes the baseline).

    /usr/bin/python3 tests/bench/tabular_optuna.py --replay build/tests/bench/strategy_replay
"""
import argparse
import gzip
import json
import math
import multiprocessing
import os
import shlex
import subprocess
import sys

import yaml

import bench_main  # tests/bench/bench_main.py: the tool's error exit

HERE = os.path.dirname(os.path.abspath(__file__))


def config_key(config):
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def load(table_path):
    with gzip.open(table_path, "rt") as f:
        doc = json.load(f)
    space = yaml.safe_load(doc["space"])
    outcomes = {}
    for t in doc["trials"]:
        r = t["result"]
        if r.get("status", "completed") != "completed":
            continue
        o = outcomes.setdefault(t["config"], [])
        o.append((r["val_accuracy"], r["throughput"]["samples_per_s"], r.get("peak_memory_mb", 0.0)))
    means = {k: tuple(sum(v[i] for v in vs) / len(vs) for i in range(3)) for k, vs in outcomes.items()}
    if doc.get("baseline_config"):  # a rebased table: the baseline's configuration is answered by "{}"
        means[doc["baseline_config"]] = means["{}"]
    return doc, space, means


def run(job):
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    sampler_name, seed, table_path, share = job
    doc, space, means = load(table_path)
    baseline_config = doc.get("baseline_config")
    dims = space["space"]
    memory_max = next((c["max"] for c in space.get("constraints", []) if c["metric"] == "peak_memory_mb"), None)
    target = math.ceil(share * (len(means) - bool(baseline_config)))
    constraints = (lambda trial: [trial.user_attrs["memory"] - memory_max]) if memory_max else None
    if sampler_name == "optuna-tpe":
        sampler = optuna.samplers.TPESampler(multivariate=True, seed=seed, constraints_func=constraints)
    else:
        sampler = optuna.samplers.NSGAIISampler(seed=seed, constraints_func=constraints)
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    sequence, seen = [], set()
    for _ in range(4 * target):
        trial = study.ask()
        config = {}
        for name, choices in dims.items():
            if all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices):
                config[name] = choices[trial.suggest_int(name, 0, len(choices) - 1)]
            else:
                config[name] = trial.suggest_categorical(name, choices)
        key = config_key(config)
        if key not in means:
            raise SystemExit(f"the table has no configuration {key}")
        accuracy, throughput, memory = means[key]
        trial.set_user_attr("memory", memory)
        study.tell(trial, [accuracy, throughput])
        if key == baseline_config:
            continue  # the baseline, which every replay runs first
        sequence.append(key)
        seen.add(key)
        if len(seen) + 1 >= target:  # + the baseline, which every replay runs first
            break
    return sampler_name, seed, sequence


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", default="build/tests/bench/strategy_replay")
    parser.add_argument("--table", default=os.path.join(HERE, "tables", "fmnist_backbones.json.gz"))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--share", type=float, default=0.5, help="stop after this share of the grid's configurations")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default="runs/tabular-optuna", help="where the sequences are written")
    parser.add_argument("--replay-args", default="", help="more arguments for strategy_replay table")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    jobs = [(s, seed, args.table, args.share) for s in ("optuna-tpe", "optuna-nsga2") for seed in range(args.seeds)]
    with multiprocessing.Pool(args.jobs) as pool:
        results = pool.map(run, jobs)
    files = []
    for name in ("optuna-tpe", "optuna-nsga2"):
        path = os.path.join(args.out, name + ".json")
        with open(path, "w") as f:
            json.dump({"name": name, "sequences": [seq for n, _, seq in results if n == name]}, f)
        files.append(path)
    command = [args.replay, "table", args.table] + shlex.split(args.replay_args)
    for path in files:
        command += ["--sequences", path]
    return subprocess.run(command).returncode


if __name__ == "__main__":
    bench_main.run(main)
