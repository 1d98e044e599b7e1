#!/usr/bin/python3
"""The tabular benchmark's front and hypervolume, computed apart from Frontier.

Reads the table (tests/bench/tables/fmnist_backbones.json.gz) with nothing of
Frontier's: each configuration's objective means over its completed seeds,
feasibility on its constraints' means, the non-dominated feasible
configurations by pairwise comparison, and the exact 2-D hypervolume of that
front in baseline-normalized space (each objective's mean over the
baseline's, reference point the origin: docs/report.md) by a sweep. Writes
{"front": [config keys], "hypervolume": H} to OUT for `strategy_replay check
TABLE --expect OUT`, which compares the Scheduler's replay and the report with
it (ctest bench.tabular_front): two independent computations of one answer.

usage: tabular_front.py TABLE.json.gz OUT.json
"""
import gzip
import json
import sys

import yaml


def value(result, metric):
    """The objective's number in a result: a plain number, or throughput's samples_per_s."""
    v = result.get(metric)
    if isinstance(v, dict):
        v = v.get("samples_per_s")
    return v


def main():
    table_path, out_path = sys.argv[1], sys.argv[2]
    with gzip.open(table_path, "rt") as f:
        doc = json.load(f)
    space = yaml.safe_load(doc["space"])
    objectives = [(o["metric"], o.get("goal", "maximize") == "maximize") for o in space["objectives"]]
    if len(objectives) != 2:
        sys.exit(f"{table_path}: the sweep is for 2 objectives, the space has {len(objectives)}")
    constraints = space.get("constraints", [])
    metrics = [m for m, _ in objectives] + [c["metric"] for c in constraints]
    sums = {}
    for t in doc["trials"]:
        r = t["result"]
        if r.get("status", "completed") != "completed":
            continue
        entry = sums.setdefault(t["config"], {"n": 0, **{m: 0.0 for m in metrics}})
        entry["n"] += 1
        for m in metrics:
            entry[m] += value(r, m)
    means = {k: {m: e[m] / e["n"] for m in metrics} for k, e in sums.items()}

    def feasible(m):
        return all(("min" not in c or m[c["metric"]] >= c["min"]) and ("max" not in c or m[c["metric"]] <= c["max"])
                   for c in constraints)

    def oriented(m):  # larger is better in both
        return [m[metric] if maximize else -m[metric] for metric, maximize in objectives]

    candidates = {k: oriented(m) for k, m in means.items() if feasible(m)}

    def dominates(a, b):
        return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))

    front = sorted(k for k, p in candidates.items()
                   if not any(dominates(q, p) for j, q in candidates.items() if j != k))
    base = means["{}"]
    points = []
    for k in front:
        point = []
        for metric, maximize in objectives:
            point.append(means[k][metric] / base[metric] if maximize else base[metric] / means[k][metric])
        points.append(point)
    # Sweep: by the first coordinate descending, each point adds the strip above the best second so far.
    hypervolume, best_y = 0.0, 0.0
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if y > best_y:
            hypervolume += x * (y - best_y)
            best_y = y
    with open(out_path, "w") as f:
        json.dump({"front": front, "hypervolume": hypervolume}, f, indent=1)
    print(f"{len(means)} configurations, {len(candidates)} feasible, front of {len(front)}, "
          f"hypervolume {hypervolume:.6f}")


if __name__ == "__main__":
    main()
