#!/usr/bin/python3
"""Search quality through frontier-optuna-proposer (docs/proposers.md): the
problems of strategy_bench.py (ZDT1-3, DTLZ2, every variable discretized)
searched by the bridge the way the coordinator drives it, one Propose call
per configuration with every outcome so far told in the request (a new
study each call, the sampler reseeded from the seed and the number of
outcomes), next to the same Optuna sampler run directly (study.optimize).
Prints the hypervolume of everything evaluated after each budget, mean and
standard deviation over the seeds; the hypervolume and the problems are
strategy_bench.py's.

    FRONTIER_PROTO_PYTHON=build/python /usr/bin/python3 tests/bench/bridge_bench.py \
        --problems zdt1,dtlz2 --encodings ordinal --seeds 3 --budgets 50,100

--cache FILE keeps every run as it ends (one JSON line, strategy_bench.py's
format) and reuses those already there: strategy_bench.py's --cache holds the
same direct Optuna runs (optuna_run, same seeds), so pointing both at one file
runs each only once, and an interrupted run continues where it stopped.
--bench PATH adds Frontier's own strategies (tests/bench/strategy_bench.cc,
the same seeds) to the table.
"""
import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "proposers"), os.path.join(HERE, "..", "..", "proposers", "optuna")]

import strategy_bench as sb  # noqa: E402
import bench_main  # noqa: E402  (tests/bench/bench_main.py: the tool's error exit)


def levels(encoding):
    return 101 if encoding == "ordinal" else 21


def bridge_run(job):
    warnings.simplefilter("ignore")
    import frontier_proposer as fp
    import optuna_proposer

    problem, encoding, sampler, seed, evaluations = job
    n, k = sb.VARIABLES[problem], levels(encoding)
    request = fp.proposer_pb2.ProposeRequest(experiment_id="bench", experiment_name=problem, count=1, repeats=1,
                                            steps=1, seed=seed)
    for i in range(n):
        request.dimensions.add(name=f"x{i}", choices_json=[str(j) for j in range(k)],
                               ordinal=encoding == "ordinal", baseline_index=-1)
    request.objectives.add(metric="f1", maximize=False)
    request.objectives.add(metric="f2", maximize=False)
    proposer = optuna_proposer.OptunaProposer(sampler)
    objectives = []
    while len(objectives) < evaluations:
        response = proposer.propose(request)
        if not response.configs:
            break
        config = response.configs[0].config
        f = sb.evaluate(problem, [config.choices[f"x{i}"] / (k - 1) for i in range(n)])
        outcome = request.outcomes.add(status="completed", seeds=1, seeds_completed=1)
        outcome.config.CopyFrom(config)
        outcome.metrics["f1"], outcome.metrics["f2"] = f
        objectives.append(f)
    return {"problem": problem, "encoding": encoding, "algorithm": f"bridge-{sampler}", "seed": seed,
            "objectives": objectives}


def direct_run(job):
    problem, encoding, sampler, seed, evaluations = job
    return sb.optuna_run((problem, encoding, f"optuna-{sampler}", seed, evaluations))


def run_job(job):
    kind = job[0]
    return (bridge_run if kind == "bridge" else direct_run)(job[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", default="zdt1,zdt2,zdt3,dtlz2")
    parser.add_argument("--encodings", default="ordinal,categorical")
    parser.add_argument("--sampler", default="tpe", choices=["tpe", "nsga2", "random"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budgets", default="100,200")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cache", help="every run appended here as it ends; runs already there are reused")
    parser.add_argument("--bench", help="tests/bench/strategy_bench (built): Frontier's strategies in the table too")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    evaluations = max(budgets)
    problems, encodings = args.problems.split(","), args.encodings.split(",")
    for problem in problems:
        if problem not in sb.VARIABLES:
            parser.error(f"unknown problem '{problem}' (known: {', '.join(sb.VARIABLES)})")
    for encoding in encodings:
        if encoding not in ("ordinal", "categorical"):
            parser.error(f"unknown encoding '{encoding}' (known: ordinal, categorical)")
    jobs = [(kind, p, e, args.sampler, s, evaluations) for kind in ("bridge", "direct") for p in problems
            for e in encodings for s in range(args.seeds)]
    algorithm = {"bridge": f"bridge-{args.sampler}", "direct": f"optuna-{args.sampler}"}
    done = sb.cached_runs(args.cache, evaluations)
    key = (lambda job: (job[1], job[2], algorithm[job[0]], job[4]))
    runs = [done[key(job)] for job in jobs if key(job) in done]
    todo = [job for job in jobs if key(job) not in done]
    print(f"{len(runs)} runs from the cache, {len(todo)} to run", file=sys.stderr, flush=True)
    started = time.time()
    with multiprocessing.Pool(args.jobs) as pool:
        for run in pool.imap_unordered(run_job, todo):
            runs.append(run)
            print(f"{time.time() - started:.0f} s: {run['algorithm']} {run['problem']} {run['encoding']} "
                  f"seed {run['seed']}", file=sys.stderr, flush=True)
            if args.cache:
                with open(args.cache, "a") as f:
                    f.write(json.dumps(run) + "\n")
    if args.bench:
        ours = json.loads(subprocess.run([args.bench, "--seeds", str(args.seeds), "--evaluations", str(evaluations)],
                                         check=True, capture_output=True, text=True).stdout)
        runs += [r for r in ours["runs"] if r["problem"] in problems and r["encoding"] in encodings]
    table = {}
    for r in runs:
        for b in budgets:
            hv = sb.hypervolume(r["objectives"][:b], sb.REFERENCE[r["problem"]])
            table.setdefault((r["problem"], r["encoding"], r["algorithm"]), {}).setdefault(b, []).append(hv)
    order = [algorithm["bridge"], algorithm["direct"], "frontier-tpe", "frontier-nsga2", "frontier-sobol",
             "frontier-random"]
    print(f"Hypervolume of all evaluated points, mean ± sd over the seeds (of {args.seeds})\n")
    print("| problem | encoding | algorithm | seeds | " + " | ".join(f"{b} evals" for b in budgets) + " |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in budgets) + " |")
    sd = (lambda v: statistics.stdev(v) if len(v) > 1 else 0.0)
    for problem in problems:
        for encoding in encodings:
            for name in order:
                cells = table.get((problem, encoding, name))
                if not cells:
                    continue
                shown = " | ".join(f"{statistics.mean(cells[b]):.4f} ± {sd(cells[b]):.4f}" for b in budgets)
                print(f"| {problem} | {encoding} | {name} | {len(cells[budgets[0]])} | {shown} |")
    return 0


if __name__ == "__main__":
    bench_main.run(main)
