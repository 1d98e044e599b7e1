#!/usr/bin/python3
"""Is bev-synthetic a useful proxy? It is only if it ranks variants consistently.

Runs 8 variants (view transforms x backbone blocks, plus two LSS settings)
over 3 seeds with frontier-trial, then reports
  - val/test IoU per variant and seed,
  - Spearman rank correlation of the variants' val IoU between every pair of seeds,
  - whether lss beats the trivial lifters (ipm, mean_lift) in mean IoU,
as JSON on stdout (and a table on stderr).

  /usr/bin/python3 tests/bench/bev_ranking.py --trial build/worker/frontier-trial \
      [--steps 200] [--train-samples 1000] [--eval-samples 128] [--parallel 2] [--seeds 3]

Each trial runs with 1 intra-op thread; --parallel trials at a time.
"""
import argparse
import concurrent.futures
import copy
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

BASE = {
    "schema": 1,
    "task": {
        "dataset": "bev-synthetic",
        "bev": {"cameras": 6, "height": 32, "width": 88, "grid": 48, "resolution": 1.0, "max_boxes": 10,
                "train_samples": 1000, "val_samples": 128, "test_samples": 128, "data_seed": 1, "noise": 0.02},
        "batch_size": 8, "steps": 200, "eval_every": 0, "warmup_steps": 10,
        "optimizer": {"name": "adamw", "lr": 2.0e-3, "weight_decay": 0.01},
        "schedule": {"name": "cosine", "warmup": 20}, "grad_clip": 5.0,
    },
    "arch": {
        "stem": {"kind": "conv3x3", "width": 16, "stride": 2, "depth": 1},
        "stages": [{"block": "basic", "width": 32, "depth": 1, "stride": 2}],
        "norm": "batch", "activation": "relu",
        "bev": {"view_transform": "lss", "pooling": "fused", "depth_bins": 24, "channels": 32,
                "encoder": [{"block": "basic", "width": 32, "depth": 1, "stride": 2}]},
    },
    "runtime": {"precision": "fp32", "threads": 1},
}


def variant(name, view_transform, block, **bev):
    spec = copy.deepcopy(BASE)
    spec["arch"]["bev"]["view_transform"] = view_transform
    if view_transform != "lss":
        spec["arch"]["bev"]["pooling"] = "naive"
    spec["arch"]["stages"][0]["block"] = block
    spec["arch"]["bev"].update(bev)
    return name, spec


VARIANTS = [
    variant("lss/basic", "lss", "basic"),
    variant("lss/fused_mbconv", "lss", "fused_mbconv"),
    variant("lss/basic/12bins", "lss", "basic", depth_bins=12),
    variant("lss/basic/enc64", "lss", "basic", encoder=[{"block": "basic", "width": 64, "depth": 1, "stride": 2}]),
    variant("ipm/basic", "ipm", "basic"),
    variant("ipm/fused_mbconv", "ipm", "fused_mbconv"),
    variant("mean_lift/basic", "mean_lift", "basic"),
    variant("mean_lift/fused_mbconv", "mean_lift", "fused_mbconv"),
]


def spearman(a, b):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):  # average ranks of ties
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va > 0 and vb > 0 else float("nan")


def run_trial(trial, spec, seed, workdir):
    spec = copy.deepcopy(spec)
    spec["seed"] = seed
    spec["trial_id"] = f"{spec['trial_id']}-s{seed}"
    path = os.path.join(workdir, spec["trial_id"].replace("/", "_") + ".json")
    with open(path, "w") as f:
        json.dump(spec, f)
    start = time.time()
    out = subprocess.run([trial, "--spec", path, "--progress-every", "0"], capture_output=True, text=True)
    lines = [l for l in out.stdout.splitlines() if '"event":"result"' in l.replace(" ", "")]
    result = json.loads(lines[-1]) if lines else {"status": "failed", "error": out.stderr[-500:]}
    result["_wall_s"] = time.time() - start
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trial", default="build/worker/frontier-trial")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--train-samples", type=int, default=1000)
    ap.add_argument("--eval-samples", type=int, default=128)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--variants", type=int, default=len(VARIANTS), help="run only the first N variants")
    args = ap.parse_args()

    jobs = []
    for name, spec in VARIANTS[: args.variants]:
        spec = copy.deepcopy(spec)
        spec["trial_id"] = name
        spec["task"]["steps"] = args.steps
        spec["task"]["bev"]["train_samples"] = args.train_samples
        spec["task"]["bev"]["val_samples"] = args.eval_samples
        spec["task"]["bev"]["test_samples"] = args.eval_samples
        for seed in range(1, args.seeds + 1):
            jobs.append((name, spec, seed))

    results = {}
    with tempfile.TemporaryDirectory() as workdir, \
            concurrent.futures.ThreadPoolExecutor(max_workers=args.parallel) as pool:
        futures = {pool.submit(run_trial, args.trial, spec, seed, workdir): (name, seed) for name, spec, seed in jobs}
        for future in concurrent.futures.as_completed(futures):
            name, seed = futures[future]
            r = future.result()
            results[(name, seed)] = r
            print(f"{name} seed {seed}: {r.get('status')} val_iou {r.get('val_iou')} test_iou {r.get('test_iou')} "
                  f"median step {r.get('step_time_ms', {}).get('median')} ms wall {r['_wall_s']:.0f} s",
                  file=sys.stderr, flush=True)

    names = [n for n, _ in VARIANTS[: args.variants]]
    seeds = list(range(1, args.seeds + 1))
    table = {n: {s: results[(n, s)].get("val_iou") for s in seeds} for n in names}
    correlations = {}
    for a, b in itertools.combinations(seeds, 2):
        pairs = [(table[n][a], table[n][b]) for n in names if table[n][a] is not None and table[n][b] is not None]
        if len(pairs) >= 3:
            correlations[f"{a}-{b}"] = spearman([p[0] for p in pairs], [p[1] for p in pairs])

    def mean_iou(prefix):
        vals = [v for n in names if n.startswith(prefix) for v in table[n].values() if v is not None]
        return sum(vals) / len(vals) if vals else None

    summary = {
        "steps": args.steps, "train_samples": args.train_samples, "eval_samples": args.eval_samples,
        "val_iou": {n: table[n] for n in names},
        "test_iou": {n: {s: results[(n, s)].get("test_iou") for s in seeds} for n in names},
        "median_step_ms": {n: {s: results[(n, s)].get("step_time_ms", {}).get("median") for s in seeds} for n in names},
        "spearman_between_seeds": correlations,
        "mean_val_iou": {"lss": mean_iou("lss/"), "ipm": mean_iou("ipm/"), "mean_lift": mean_iou("mean_lift/")},
    }
    m = summary["mean_val_iou"]
    if None not in m.values():
        summary["lss_beats_trivial_lifters"] = m["lss"] > max(m["ipm"], m["mean_lift"])
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
