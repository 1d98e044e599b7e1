#!/usr/bin/python3
"""Is bev-synthetic a useful proxy? It is only if it ranks variants consistently.

Runs 8 variants (four lifters x two backbones) over 3 seeds with frontier-trial:
  lifters   lss+depth (LSS with BEVDepth-style depth supervision, weight
            --depth-loss-weight), lss (no depth supervision), ipm, mean_lift
  backbones b32 (stem 16, one basic stage of width 32: the bev_lss.yaml
            baseline) and b16 (stem 8, width 16: half the width)
then reports
  - val/test IoU per variant and seed,
  - Spearman rank correlation of the variants' val IoU (and test IoU)
    between every pair of seeds,
  - the noise budget: evaluation noise of one split (std of val - test IoU
    of the same model over sqrt 2; the splits are independent draws of the
    same size), seed noise (pooled std over seeds within a variant) and the
    spread of the variant means,
  - mean val IoU per lifter, and whether lss+depth beats the trivial lifters
    (ipm, mean_lift),
as JSON on stdout (and a line per trial on stderr).

  /usr/bin/python3 tests/bench/bev_ranking.py --trial build/worker/frontier-trial \
      [--steps 300] [--train-samples 1000] [--eval-samples 256] [--parallel 2] [--seeds 3] \
      [--depth-loss-weight 0.1]

The defaults are the study in docs/bev.md (~22 min on the shared 2-core machine).

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
import bench_main  # tests/bench/bench_main.py: the tool's error exit

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
        "bev": {"view_transform": "lss", "pooling": "fused", "depth_bins": 24, "channels": 32, "depth_loss_weight": 0.1,
                "encoder": [{"block": "basic", "width": 32, "depth": 1, "stride": 2}]},
    },
    "runtime": {"precision": "fp32", "threads": 1},
}


BACKBONES = {
    "b32": {"stem": {"kind": "conv3x3", "width": 16, "stride": 2, "depth": 1},
            "stages": [{"block": "basic", "width": 32, "depth": 1, "stride": 2}]},
    "b16": {"stem": {"kind": "conv3x3", "width": 8, "stride": 2, "depth": 1},
            "stages": [{"block": "basic", "width": 16, "depth": 1, "stride": 2}]},
}
LIFTERS = ["lss+depth", "lss", "ipm", "mean_lift"]


def variant(lifter, backbone):
    spec = copy.deepcopy(BASE)
    spec["arch"].update(copy.deepcopy(BACKBONES[backbone]))
    spec["arch"]["bev"]["view_transform"] = lifter.split("+")[0]
    if lifter != "lss+depth":
        spec["arch"]["bev"]["depth_loss_weight"] = 0.0
    if not lifter.startswith("lss"):
        spec["arch"]["bev"]["pooling"] = "naive"
    return f"{lifter}/{backbone}", spec


VARIANTS = [variant(l, b) for l in LIFTERS for b in BACKBONES]


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
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--train-samples", type=int, default=1000)
    ap.add_argument("--eval-samples", type=int, default=256)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--depth-loss-weight", type=float, default=0.1, help="arch.bev.depth_loss_weight of lss+depth")
    ap.add_argument("--lr", type=float, default=BASE["task"]["optimizer"]["lr"])
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
        spec["task"]["optimizer"]["lr"] = args.lr
        if name.startswith("lss+depth/"):
            spec["arch"]["bev"]["depth_loss_weight"] = args.depth_loss_weight
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

    test_table = {n: {s: results[(n, s)].get("test_iou") for s in seeds} for n in names}
    test_correlations = {}
    for a, b in itertools.combinations(seeds, 2):
        pairs = [(test_table[n][a], test_table[n][b]) for n in names
                 if test_table[n][a] is not None and test_table[n][b] is not None]
        if len(pairs) >= 3:
            test_correlations[f"{a}-{b}"] = spearman([p[0] for p in pairs], [p[1] for p in pairs])

    def std(v):
        m = sum(v) / len(v)
        return (sum((x - m) ** 2 for x in v) / (len(v) - 1)) ** 0.5 if len(v) > 1 else float("nan")

    # Noise budget. Evaluation noise of one split: val and test are independent
    # draws of the same size scored on the same model, so var(val - test) = 2 var(eval).
    diffs = [results[(n, s)]["val_iou"] - results[(n, s)]["test_iou"] for n in names for s in seeds
             if results[(n, s)].get("val_iou") is not None and results[(n, s)].get("test_iou") is not None]
    eval_noise = (sum(d * d for d in diffs) / len(diffs) / 2) ** 0.5 if diffs else None
    within = [[v for v in table[n].values() if v is not None] for n in names]
    pooled = [(std(v) ** 2, len(v) - 1) for v in within if len(v) > 1]
    seed_noise = (sum(v * k for v, k in pooled) / sum(k for _, k in pooled)) ** 0.5 if pooled else None
    means = {n: sum(v) / len(v) for n, v in zip(names, within) if v}

    def mean_iou(lifter):
        vals = [v for n in names if n.split("/")[0] == lifter for v in table[n].values() if v is not None]
        return sum(vals) / len(vals) if vals else None

    summary = {
        "steps": args.steps, "train_samples": args.train_samples, "eval_samples": args.eval_samples,
        "lr": args.lr, "depth_loss_weight": args.depth_loss_weight,
        "val_iou": {n: table[n] for n in names},
        "test_iou": test_table,
        "median_step_ms": {n: {s: results[(n, s)].get("step_time_ms", {}).get("median") for s in seeds} for n in names},
        "wall_s": {n: {s: round(results[(n, s)]["_wall_s"], 1) for s in seeds} for n in names},
        "spearman_between_seeds": correlations,
        "spearman_between_seeds_test_iou": test_correlations,
        "mean_val_iou_per_variant": means,
        "noise": {"eval_split_std": eval_noise, "seed_std": seed_noise,
                  "variant_means_std": std(list(means.values())) if len(means) > 1 else None},
        "mean_val_iou": {l: mean_iou(l) for l in LIFTERS},
    }
    m = summary["mean_val_iou"]
    if None not in (m["lss+depth"], m["ipm"], m["mean_lift"]):
        summary["lss_depth_beats_trivial_lifters"] = m["lss+depth"] > max(m["ipm"], m["mean_lift"])
    if None not in (m["lss"], m["ipm"], m["mean_lift"]):
        summary["lss_beats_trivial_lifters"] = m["lss"] > max(m["ipm"], m["mean_lift"])
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    bench_main.run(main)
