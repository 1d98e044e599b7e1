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
"""
import argparse
import multiprocessing
import os
import statistics
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "proposers"), os.path.join(HERE, "..", "..", "proposers", "optuna")]

import strategy_bench as sb  # noqa: E402


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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", default="zdt1,zdt2,zdt3,dtlz2")
    parser.add_argument("--encodings", default="ordinal,categorical")
    parser.add_argument("--sampler", default="tpe", choices=["tpe", "nsga2", "random"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budgets", default="100,200")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    jobs = [(p, e, args.sampler, s, max(budgets)) for p in args.problems.split(",")
            for e in args.encodings.split(",") for s in range(args.seeds)]
    with multiprocessing.Pool(args.jobs) as pool:
        runs = pool.map(bridge_run, jobs) + pool.map(direct_run, jobs)
    table = {}
    for r in runs:
        for b in budgets:
            hv = sb.hypervolume(r["objectives"][:b], sb.REFERENCE[r["problem"]])
            table.setdefault((r["problem"], r["encoding"], r["algorithm"]), {}).setdefault(b, []).append(hv)
    print(f"Hypervolume of all evaluated points, mean ± sd over {args.seeds} seeds\n")
    print("| problem | encoding | algorithm | " + " | ".join(f"{b} evals" for b in budgets) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in budgets) + " |")
    for (problem, encoding, algorithm), cells in sorted(table.items()):
        sd = (lambda v: statistics.stdev(v) if len(v) > 1 else 0.0)
        shown = " | ".join(f"{statistics.mean(cells[b]):.4f} ± {sd(cells[b]):.4f}" for b in budgets)
        print(f"| {problem} | {encoding} | {algorithm} | {shown} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
