#!/usr/bin/python3
"""Runner overhead benchmark: frontier-trial vs a bare LibTorch loop vs Python.

Runs, side by side and interleaved round by round, on the same spec (model,
batch size, optimizer, threads, precision, layout):
  runner  build/worker/frontier-trial --spec S   (its reported median step time)
  bare    build/tests/bench/bare_loop S          (bare_loop.cc: the same model, no data pipeline)
  python  /usr/bin/python3 reference_model.py S  (Debian's python3-torch, same LibTorch version)
and prints each one's median step time (median over rounds of the per-run
medians) and the ratios runner/bare and runner/python, plus peak resident
memory (the runner holds the dataset once; the loops hold one batch).

usage: /usr/bin/python3 tests/bench/runner_overhead.py [--build DIR] [--spec FILE]
                                                       [--steps N] [--rounds N] [--threads N]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import bench_main  # tests/bench/bench_main.py: the tool's error exit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


# glibc tunables equal to what ConfigureHostAllocator() sets in frontier-trial
# and bare_loop, so that Python runs under the same allocator policy.
PYTHON_ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
                        "MALLOC_TOP_PAD_": str(64 << 20)}


def last_json_line(cmd, env=None):
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode != 0 or not lines:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--spec", default=os.path.join(ROOT, "worker/examples/baseline.json"))
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", action="store_true", help="print only the JSON summary")
    args = ap.parse_args()

    spec = json.load(open(args.spec))
    spec["task"]["steps"] = args.steps
    spec["task"]["eval_every"] = 0
    spec["task"].pop("target", None)
    spec.setdefault("runtime", {})["threads"] = args.threads
    spec["runtime"]["device"] = "cpu"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        spec_path = f.name

    commands = {
        "runner": [os.path.join(args.build, "worker/frontier-trial"), "--spec", spec_path, "--progress-every", "0"],
        "bare": [os.path.join(args.build, "tests/bench/bare_loop"), spec_path],
        "python": ["/usr/bin/python3", os.path.join(HERE, "reference_model.py"), spec_path],
    }
    runs = {name: [] for name in commands}
    for r in range(args.rounds):
        for name, cmd in commands.items():
            res = last_json_line(cmd, dict(os.environ, **PYTHON_ALLOCATOR_ENV) if name == "python" else None)
            if name == "runner":
                if res.get("status") != "completed":
                    sys.exit(f"runner trial did not complete: {res.get('error')}")
                res = {"median_step_time_ms": res["step_time_ms"]["median"], "params": res["params"],
                       "peak_rss_mb": res["process_peak_rss_mb"], "dataset_mb": res["dataset_bytes"] / 2**20}
            runs[name].append(res)
            if not args.json:
                print(f"round {r + 1} {name:6s} median step {res['median_step_time_ms']:.3f} ms", file=sys.stderr)
    os.unlink(spec_path)

    params = {name: rs[0]["params"] for name, rs in runs.items()}
    if len(set(params.values())) != 1:
        sys.exit(f"the three models differ in parameter count: {params}")
    med = {name: statistics.median(r["median_step_time_ms"] for r in rs) for name, rs in runs.items()}
    per_round = [runs["runner"][i]["median_step_time_ms"] / runs["bare"][i]["median_step_time_ms"]
                 for i in range(args.rounds)]
    summary = {
        "spec": os.path.relpath(args.spec, ROOT), "steps": args.steps, "rounds": args.rounds,
        "threads": args.threads, "batch_size": spec["task"]["batch_size"], "params": params["runner"],
        "median_step_time_ms": med,
        "runner_over_bare": med["runner"] / med["bare"],
        "runner_over_bare_per_round": per_round,
        "runner_over_python": med["runner"] / med["python"],
        "peak_rss_mb": {name: max(r["peak_rss_mb"] for r in rs) for name, rs in runs.items()},
        "runner_dataset_mb": runs["runner"][0]["dataset_mb"],
    }
    if args.json:
        print(json.dumps(summary))
        return
    print(f"spec {summary['spec']}: batch {summary['batch_size']}, {args.steps} steps x {args.rounds} rounds, "
          f"{args.threads} threads, {params['runner']} parameters")
    for name in commands:
        print(f"  {name:6s} median step time {med[name]:8.3f} ms   peak RSS {summary['peak_rss_mb'][name]:7.1f} MB")
    print(f"  runner / bare   = {summary['runner_over_bare']:.3f}  (per round: "
          + ", ".join(f"{x:.3f}" for x in per_round) + ")")
    print(f"  runner / python = {summary['runner_over_python']:.3f}")
    print(f"  runner holds the dataset once: {summary['runner_dataset_mb']:.1f} MB of uint8 images and labels; "
          f"RSS beyond the bare loop: {summary['peak_rss_mb']['runner'] - summary['peak_rss_mb']['bare']:.1f} MB")
    print(json.dumps(summary))


if __name__ == "__main__":
    bench_main.run(main)
