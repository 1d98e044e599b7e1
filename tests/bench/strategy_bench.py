#!/usr/bin/python3
"""Multi-objective search quality: Frontier's strategies vs Optuna's samplers.

Runs tests/bench/strategy_bench.cc (Frontier's tpe, nsga2, sobol and random
on ZDT1, ZDT2, ZDT3 with 30 variables and DTLZ2 with 2 objectives and 11
variables, every variable discretized) and the same problems with Debian's
python3-optuna (TPESampler with multivariate=True, NSGAIISampler and
RandomSampler, otherwise their defaults; one trial at a time, as
study.optimize runs), then prints the hypervolume of everything evaluated
after 100 and 200 evaluations: mean and standard deviation over the seeds,
one implementation of the hypervolume for all. TPESampler runs on the
discrete encodings only (it is the slow part: about 45 s of CPU per
200-trial ordinal run); the defaults (5 seeds) take about 15 minutes on 2
cores. Reference points (minimization): (1.1, 11) for
ZDT1-3, (3.6, 3.6) for DTLZ2.

Encodings: "ordinal" (101 ordered levels per variable, x = i/100; Optuna:
suggest_int), "categorical" (21 unordered levels, x = i/20; Optuna:
suggest_categorical), and for Optuna alone "continuous" (suggest_float), the
usual form of the problems, as a reference: Frontier's strategies search
discrete spaces only.

    /usr/bin/python3 tests/bench/strategy_bench.py --bench build/tests/bench/strategy_bench
"""
import argparse
import json
import math
import multiprocessing
import os
import statistics
import subprocess
import sys

import bench_main  # tests/bench/bench_main.py: the tool's error exit

REFERENCE = {"zdt1": (1.1, 11.0), "zdt2": (1.1, 11.0), "zdt3": (1.1, 11.0), "dtlz2": (3.6, 3.6)}
VARIABLES = {"zdt1": 30, "zdt2": 30, "zdt3": 30, "dtlz2": 11}


def zdt_g(x):
    return 1 + 9 * sum(x[1:]) / (len(x) - 1)


def evaluate(problem, x):
    if problem == "dtlz2":
        g = sum((v - 0.5) ** 2 for v in x[1:])
        return [(1 + g) * math.cos(x[0] * math.pi / 2), (1 + g) * math.sin(x[0] * math.pi / 2)]
    g = zdt_g(x)
    r = x[0] / g
    if problem == "zdt1":
        return [x[0], g * (1 - math.sqrt(r))]
    if problem == "zdt2":
        return [x[0], g * (1 - r * r)]
    return [x[0], g * (1 - math.sqrt(r) - r * math.sin(10 * math.pi * x[0]))]


def hypervolume(points, reference):
    """Area dominated by `points` (minimized) inside the box below `reference`."""
    inside = sorted(p for p in points if p[0] < reference[0] and p[1] < reference[1])
    area, best_f2 = 0.0, reference[1]
    for f1, f2 in inside:
        if f2 < best_f2:
            area += (reference[0] - f1) * (best_f2 - f2)
            best_f2 = f2
    return area


def cached_runs(path, evaluations):
    """The runs in the cache file `path` (one JSON object a line) with at least `evaluations`
    evaluations, by (problem, encoding, algorithm, seed); {} without the file."""
    done = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                run = json.loads(line)
                if len(run["objectives"]) >= evaluations:
                    done[(run["problem"], run["encoding"], run["algorithm"], run["seed"])] = run
    return done


def optuna_run(job):
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    problem, encoding, sampler_name, seed, evaluations = job
    n = VARIABLES[problem]
    if sampler_name == "optuna-tpe":
        sampler = optuna.samplers.TPESampler(multivariate=True, seed=seed)
    elif sampler_name == "optuna-nsga2":
        sampler = optuna.samplers.NSGAIISampler(seed=seed)
    else:
        sampler = optuna.samplers.RandomSampler(seed=seed)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)

    def objective(trial):
        if encoding == "ordinal":
            x = [trial.suggest_int(f"x{i}", 0, 100) / 100 for i in range(n)]
        elif encoding == "categorical":
            x = [trial.suggest_categorical(f"x{i}", list(range(21))) / 20 for i in range(n)]
        else:
            x = [trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(n)]
        return tuple(evaluate(problem, x))

    study.optimize(objective, n_trials=evaluations)
    return {"problem": problem, "encoding": encoding, "algorithm": sampler_name, "seed": seed,
            "objectives": [list(t.values) for t in study.trials]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default="build/tests/bench/strategy_bench", help="the strategy_bench binary")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budgets", default="100,200")
    parser.add_argument("--jobs", type=int, default=2, help="Optuna runs in parallel")
    parser.add_argument("--json", help="also write every hypervolume here")
    parser.add_argument("--cache", help="Optuna runs: append each here as it ends, and reuse those already there")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    evaluations = max(budgets)

    ours = json.loads(subprocess.run([args.bench, "--seeds", str(args.seeds), "--evaluations", str(evaluations)],
                                     check=True, capture_output=True, text=True).stdout)
    runs = ours["runs"]
    # The TPE runs first: they are the longest, so the pool ends evenly.
    jobs = [(problem, encoding, "optuna-tpe", seed, evaluations)
            for encoding in ("ordinal", "categorical")
            for problem in REFERENCE
            for seed in range(args.seeds)]
    jobs += [(problem, encoding, sampler, seed, evaluations)
             for problem in REFERENCE
             for encoding in ("ordinal", "categorical", "continuous")
             for sampler in ("optuna-nsga2", "optuna-random")
             for seed in range(args.seeds)]
    # Each Optuna run is appended to --cache as it ends, and a later
    # invocation with the same cache runs only what is missing.
    done = cached_runs(args.cache, evaluations)
    todo = [job for job in jobs if tuple(job[:4]) not in done]
    runs += [done[tuple(job[:4])] for job in jobs if tuple(job[:4]) in done]
    with multiprocessing.Pool(args.jobs) as pool:
        for run in pool.imap_unordered(optuna_run, todo):
            runs.append(run)
            if args.cache:
                with open(args.cache, "a") as f:
                    f.write(json.dumps(run) + "\n")

    table = {}  # (problem, encoding, algorithm) -> budget -> [hypervolume per seed]
    for run in runs:
        key = (run["problem"], run["encoding"], run["algorithm"])
        for budget in budgets:
            hv = hypervolume(run["objectives"][:budget], REFERENCE[run["problem"]])
            table.setdefault(key, {}).setdefault(budget, []).append(hv)

    order = ["frontier-tpe", "optuna-tpe", "frontier-nsga2", "optuna-nsga2", "frontier-sobol", "frontier-random",
             "optuna-random"]
    tpe = ours["tpe"]
    print(f"Hypervolume of all evaluated points, mean ± sd over {args.seeds} seeds "
          f"(Frontier tpe: {tpe['startup']} startup, rounds of {tpe['batch']}, {tpe['candidates']} candidates; "
          f"nsga2 population {ours['population']}; Optuna defaults: TPESampler multivariate, 10 startup, "
          f"24 candidates; NSGAIISampler population 50)\n")
    print("| problem | encoding | algorithm | " + " | ".join(f"{b} evals" for b in budgets) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in budgets) + " |")
    for problem in REFERENCE:
        for encoding in ("ordinal", "categorical", "continuous"):
            for algorithm in order:
                cells = table.get((problem, encoding, algorithm))
                if not cells:
                    continue
                # One seed has no spread: its sd is "-".
                shown = " | ".join(f"{statistics.mean(cells[b]):.4f} ± "
                                   + (f"{statistics.stdev(cells[b]):.4f}" if len(cells[b]) > 1 else "-")
                                   for b in budgets)
                print(f"| {problem} | {encoding} | {algorithm} | {shown} |")

    def compare(title, ours_of, theirs):
        print(f"\n{title}, difference of means (ours - theirs):")
        behind = 0
        for problem in REFERENCE:
            for encoding in ("ordinal", "categorical"):
                deltas, names = [], []
                for b in budgets:
                    name = ours_of(problem, encoding, b)
                    names.append(name)
                    deltas.append(statistics.mean(table[(problem, encoding, name)][b]) -
                                  statistics.mean(table[(problem, encoding, theirs)][b]))
                verdict = "matches or beats" if all(d >= 0 for d in deltas) else "BEHIND"
                behind += verdict == "BEHIND"
                print(f"  {problem:6} {encoding:12} " +
                      "  ".join(f"{b}: {d:+.4f} ({n})" for b, d, n in zip(budgets, deltas, names)) +
                      f"  -> {verdict}")
        print(f"  rows behind: {behind} of {2 * len(REFERENCE)}")

    ours_names = [a for a in order if a.startswith("frontier-")]

    def best_of_ours(problem, encoding, budget):
        return max(ours_names, key=lambda a: statistics.mean(table[(problem, encoding, a)][budget]))

    compare("Frontier tpe vs Optuna TPESampler (same encoding)", lambda p, e, b: "frontier-tpe", "optuna-tpe")
    compare("Frontier's best strategy per row vs Optuna TPESampler", best_of_ours, "optuna-tpe")
    compare("Frontier nsga2 vs Optuna NSGAIISampler", lambda p, e, b: "frontier-nsga2", "optuna-nsga2")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({f"{p}/{e}/{a}": cells for (p, e, a), cells in table.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    bench_main.run(main)
