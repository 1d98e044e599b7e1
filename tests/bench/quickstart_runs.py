#!/usr/bin/python3
"""Two honesty benchmarks of issue 16 on the quickstart space, from real runs.

  ranking   Two identical `frontier run` of the quickstart (same seeds, same
            machine, 2 local workers): Kendall tau-b of the 18 configs'
            median step time, MFU and validation accuracy between the runs,
            and the largest per-config ratio of median step time (target:
            tau >= 0.95 for step time and MFU).
  adaptive  The quickstart with its fixed `repeats: 2` and with
            `repeats: {min: 2, max: 6}`: per run, the front configs (the
            baseline left out), how many have a conclusive parity verdict
            (at parity / worse), and the compute spent (device-seconds, the
            report's cost), with the ratio adaptive / fixed (target: every
            front config conclusive at <= 1.5x).

  /usr/bin/python3 tests/bench/quickstart_runs.py ranking  --frontier build/server/frontier --dir /tmp/qs
  /usr/bin/python3 tests/bench/quickstart_runs.py adaptive --frontier build/server/frontier --dir /tmp/qs
  (--reuse: take runs already in --dir instead of running them again; the
  fixed run of `adaptive` is the first run of `ranking` when both share --dir)

--fp32-only drops bf16 from the precision dimension (9 configs): on a CPU
without AMX or avx512_bf16 (the AMD EPYC of earlier measurements), bf16
trials ran ~20x slower than fp32 ones and one quickstart run took over an
hour. With avx512_bf16 (Intel Xeon model 207) bf16 runs as fast as fp32 and
a whole quickstart run takes about 9 minutes.

Prints JSON on stdout; the runs' own output goes to DIR/NAME.log.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
import bench_main  # tests/bench/bench_main.py: the tool's error exit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPACE = os.path.join(ROOT, "search_spaces", "quickstart.yaml")


def run(frontier, space, directory, name, reuse, workers):
    runs_dir = os.path.join(directory, name)
    db = os.path.join(runs_dir, "frontier.db")
    if not (reuse and os.path.exists(db)):
        os.makedirs(runs_dir, exist_ok=True)
        if os.path.exists(db):
            os.remove(db)
        started = time.time()
        with open(os.path.join(directory, name + ".log"), "w") as log:
            subprocess.run([frontier, "run", space, "--workers", str(workers), "--runs-dir", runs_dir, "--db", db],
                           stdout=log, stderr=subprocess.STDOUT, check=True)
        print(f"{name}: {time.time() - started:.0f} s", file=sys.stderr)
    out = subprocess.run([frontier, "report", "exp-000001", "--db", db, "-o", "json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def mean(config, metric):
    m = config["metrics"].get(metric)
    return None if m is None else m["mean"]


def kendall_tau_b(xs, ys):
    concordant = discordant = ties_x = ties_y = 0
    n = len(xs)
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + ties_x) * (concordant + discordant + ties_y)) ** 0.5
    return (concordant - discordant) / denominator if denominator else float("nan")


def base_space(args):
    """The quickstart space, or its fp32-only copy in --dir."""
    if not args.fp32_only:
        return SPACE
    with open(SPACE) as f:
        text = f.read()
    text, count = re.subn(r"(?m)^  precision: \[fp32, bf16\]$", "  precision: [fp32]", text)
    assert count == 1, "the quickstart space no longer says `precision: [fp32, bf16]`"
    path = os.path.join(args.dir, "quickstart_fp32.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def ranking(args):
    space = base_space(args)
    a = run(args.frontier, space, args.dir, "fixed-a", args.reuse, args.workers)
    b = run(args.frontier, space, args.dir, "fixed-b", args.reuse, args.workers)
    by_key = {c["config_key"]: c for c in b["configs"]}
    keys = [c["config_key"] for c in a["configs"] if c["config_key"] in by_key]
    result = {"configs": len(keys)}
    for metric in ("step_time_ms", "mfu", "val_accuracy"):
        pairs = [(mean(a_c, metric), mean(by_key[a_c["config_key"]], metric))
                 for a_c in a["configs"] if a_c["config_key"] in by_key]
        pairs = [p for p in pairs if p[0] is not None and p[1] is not None]
        result["tau_" + metric] = kendall_tau_b([p[0] for p in pairs], [p[1] for p in pairs])
    ratios = []
    for a_c in a["configs"]:
        x, y = mean(a_c, "step_time_ms"), mean(by_key.get(a_c["config_key"], a_c), "step_time_ms")
        if x and y:
            ratios.append((max(x, y) / min(x, y), a_c["label"]))
    worst = max(ratios)
    result["largest_step_time_ratio"] = worst[0]
    result["largest_step_time_ratio_config"] = worst[1]
    result["mfu_max"] = max(mean(c, "mfu") or 0 for r in (a, b) for c in r["configs"])
    print(json.dumps(result, indent=2))


def front_summary(report):
    front = [c for c in report["configs"] if c["on_front"] and not c["is_baseline"]]
    conclusive = [c for c in front if c["parity"] in ("at parity", "worse")]
    verdicts = {}
    for c in report["configs"]:
        if not c["is_baseline"]:
            verdicts[c["parity"]] = verdicts.get(c["parity"], 0) + 1
    return {
        "front": len(front),
        "front_conclusive": len(conclusive),
        "front_inconclusive": [c["label"] for c in front if c not in conclusive],
        "verdicts_all_variants": verdicts,
        "trials": sum(c["trials_total"] for c in report["configs"]),
        "device_s": sum(c["cost"]["device_s"] for c in report["configs"]),
    }


def adaptive(args):
    base = base_space(args)
    fixed = run(args.frontier, base, args.dir, "fixed-a", args.reuse, args.workers)
    with open(base) as f:
        text = f.read()
    adaptive_text, count = re.subn(r"(?m)^repeats: 2$", "repeats: {min: 2, max: 6}", text)
    assert count == 1, "the quickstart space no longer says `repeats: 2`"
    space = os.path.join(args.dir, "quickstart_adaptive.yaml")
    with open(space, "w") as f:
        f.write(adaptive_text)
    adapt = run(args.frontier, space, args.dir, "adaptive", args.reuse, args.workers)
    result = {"fixed_2_seeds": front_summary(fixed), "adaptive_2_to_6": front_summary(adapt)}
    result["compute_ratio"] = result["adaptive_2_to_6"]["device_s"] / result["fixed_2_seeds"]["device_s"]
    print(json.dumps(result, indent=2))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["ranking", "adaptive"])
    parser.add_argument("--frontier", default=os.path.join(ROOT, "build", "server", "frontier"))
    parser.add_argument("--dir", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--fp32-only", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    ranking(args) if args.what == "ranking" else adaptive(args)


if __name__ == "__main__":
    bench_main.run(main)
