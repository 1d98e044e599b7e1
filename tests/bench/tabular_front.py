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
import bench_main  # tests/bench/bench_main.py: the tool's error exit


def value(result, metric):
    """The objective's number in a result: a plain number, or throughput's samples_per_s."""
    v = result.get(metric)
    if isinstance(v, dict):
        v = v.get("samples_per_s")
    return v


def means_of(doc, space):
    """Each configuration's means of the objectives and constrained metrics over its completed seeds, and
    the configurations whose every seed completed."""
    metrics = [o["metric"] for o in space["objectives"]] + [c["metric"] for c in space.get("constraints", [])]
    sums, seeds = {}, {}
    for t in doc["trials"]:
        seeds[t["config"]] = seeds.get(t["config"], 0) + 1
        r = t["result"]
        if r.get("status", "completed") != "completed":
            continue
        entry = sums.setdefault(t["config"], {"n": 0, **{m: 0.0 for m in metrics}})
        entry["n"] += 1
        for m in metrics:
            entry[m] += value(r, m)
    means = {k: {m: e[m] / e["n"] for m in metrics} for k, e in sums.items()}
    complete = {k for k, e in sums.items() if e["n"] == seeds[k]}
    return means, complete


def front_of(means, space):
    """The non-dominated feasible configurations (pairwise, on the objectives' means, larger is better after
    orienting), in the means' order, and the set of feasible ones."""
    constraints = space.get("constraints", [])
    objectives = [(o["metric"], o.get("goal", "maximize") == "maximize") for o in space["objectives"]]

    def feasible(m):
        return all(("min" not in c or m[c["metric"]] >= c["min"]) and ("max" not in c or m[c["metric"]] <= c["max"])
                   for c in constraints)

    points = {k: [m[o] if up else -m[o] for o, up in objectives] for k, m in means.items() if feasible(m)}

    def dominates(a, b):
        return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))

    front = [k for k, p in points.items() if not any(dominates(q, p) for j, q in points.items() if j != k)]
    return front, set(points)


def main():
    table_path, out_path = sys.argv[1], sys.argv[2]
    with gzip.open(table_path, "rt") as f:
        doc = json.load(f)
    space = yaml.safe_load(doc["space"])
    objectives = [(o["metric"], o.get("goal", "maximize") == "maximize") for o in space["objectives"]]
    if len(objectives) != 2:
        sys.exit(f"{table_path}: the sweep is for 2 objectives, the space has {len(objectives)}")
    means, _ = means_of(doc, space)
    front, feasible = front_of(means, space)
    front = sorted(front)
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
    print(f"{len(means)} configurations, {len(feasible)} feasible, front of {len(front)}, "
          f"hypervolume {hypervolume:.6f}")


if __name__ == "__main__":
    bench_main.run(main)
