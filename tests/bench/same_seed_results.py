#!/usr/bin/python3
"""Same seed, same results, across two builds: a refactoring's check.

Runs one set of trial specs (the worker/examples, shortened, and variants that go through every phase:
deploy in three formats, a profile among the training steps, a diverging loss, a BEV op variant with
spot checks, an attention kernel in bf16 channels-last, two data-parallel ranks) with each of two
frontier-trial binaries, and compares every event of every run with timing and clock-derived fields
left out (step and latency times, throughput, MFU, phases, peaks, profiles). The rest (losses,
accuracies, evaluations, FLOP counts, parameters, deploy sizes and accuracies, gate and spot-check
errors) must be bit-identical. Both binaries run on this machine at the specs' thread counts.

    tests/bench/same_seed_results.py OLD/frontier-trial NEW/frontier-trial [--keep DIR]

Exit 0 when every run is identical, 1 with the differences listed.
"""
import argparse
import copy
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

import bench_main

ROOT = pathlib.Path(__file__).resolve().parents[2]
# A key that ends in one of TIMING_SUFFIXES or contains one of TIMING_WORDS holds a timing or a figure
# derived from a clock (an op's timed rounds' coverage and the formats' order are not).
TIMING_SUFFIXES = ("_s", "_ms")
TIMING_WORDS = ("time", "throughput", "mfu", "phases", "latency", "speedup", "bandwidth", "profile", "bottleneck",
                "rss", "peak_memory", "data_wait", "peak_flops", "wall", "seconds", "cv", "p10", "p90", "p99",
                "median", "mean", "min", "max", "settings", "calibrat", "comms", "exposed")


def example(name):
    return json.loads((ROOT / "worker" / "examples" / name).read_text())


def specs():
    base, bev, attention = example("baseline.json"), example("bev_lss.json"), example(
        "attention_bf16_channels_last.json")
    out = {}
    s = copy.deepcopy(base)
    s["task"].update(steps=60, eval_every=20)
    s["runtime"]["threads"] = 2
    s["latency"] = {"repetitions": 10, "warmup": 2}
    s["deploy"] = {"formats": ["float", "torchscript", "int8"], "repetitions": 5, "warmup": 1,
                   "calibration_batches": 2}
    out["base_deploy"] = s
    s = copy.deepcopy(base)
    s["task"].update(steps=40, eval_every=0, target={"metric": "val_accuracy", "value": 0.5})
    s["runtime"]["threads"] = 1
    s["profile"] = {"steps": 3, "start": 20}
    out["base_profile_in"] = s
    s = copy.deepcopy(base)
    s["task"].update(steps=20, schedule={"name": "constant", "warmup": 0})
    s["task"]["optimizer"]["lr"] = 100
    s["arch"]["norm"] = "none"
    s["runtime"]["threads"] = 1
    out["diverge"] = s
    s = copy.deepcopy(bev)
    s["task"].update(steps=24, eval_every=12)
    s["task"]["bev"]["train_samples"] = 64
    s["arch"]["bev"]["pooling"] = "depth_fused"
    s["runtime"]["spot_checks"] = 2
    s["latency"] = {"repetitions": 4, "warmup": 1}
    out["bev_variant"] = s
    s = copy.deepcopy(attention)
    s["task"].update(steps=20, eval_every=10)
    s["runtime"]["threads"] = 2
    s["arch"]["ops"] = {"attention_kernel": "chunked"}
    out["attention_chunked"] = s
    s = copy.deepcopy(base)
    s["task"].update(steps=16, eval_every=8)
    s["runtime"].update(threads=1, ranks=2)
    out["ranks2"] = s
    return out


def run(binary, spec_path, out_dir, name, ranks):
    """The run's events (rank 0's), one dict per JSON line."""
    env_base = dict(os.environ)
    procs = []
    for rank in range(ranks):
        env = dict(env_base)
        if ranks > 1:
            env.update(FRONTIER_RANK=str(rank), FRONTIER_WORLD_SIZE=str(ranks),
                       FRONTIER_RENDEZVOUS=f"file://{out_dir}/{name}.rendezvous")
        procs.append(subprocess.Popen([binary, "--spec", spec_path, "--progress-every", "0",
                                       "--artifact-dir", str(out_dir / "artifacts")],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env))
    outputs = [p.communicate()[0] for p in procs]
    (out_dir / f"{name}.out").write_text(outputs[0])
    return [json.loads(line) for line in outputs[0].splitlines() if line.strip()]


def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items()
                if not k.endswith(TIMING_SUFFIXES) and not any(w in k for w in TIMING_WORDS)}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def differences(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in the {'new' if k not in a else 'old'} run")
            else:
                out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} entries against {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return [] if a == b or both_nan else [f"{path}: {a!r} against {b!r}"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--keep", help="write the specs and outputs under this folder (default: a temporary one)")
    args = parser.parse_args()
    for binary in (args.old, args.new):
        if not os.access(binary, os.X_OK):
            raise OSError(f"{binary}: not an executable frontier-trial")
    work = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="same-seed-"))
    different = 0
    for name, spec in specs().items():
        spec_path = work / f"{name}.spec.json"
        work.mkdir(parents=True, exist_ok=True)
        spec_path.write_text(json.dumps(spec, indent=1))
        ranks = spec["runtime"].get("ranks", 1)
        runs = []
        for label, binary in (("old", args.old), ("new", args.new)):
            (work / label).mkdir(exist_ok=True)
            events = run(binary, str(spec_path), work / label, name, ranks)
            if not events or events[-1].get("event") != "result":
                raise ValueError(f"{name}: {binary} printed no result (outputs in {work / label})")
            runs.append(events)
        found = differences(strip(runs[0]), strip(runs[1]))
        status = runs[0][-1].get("status")
        print(f"{name:18} {status:10} {'identical' if not found else 'DIFFERENT'}"
              f" ({len(runs[0])} events, {len(json.dumps(strip(runs[0])))} bytes compared)")
        for line in found[:20]:
            print("   ", line)
        different += bool(found)
    return 1 if different else 0


if __name__ == "__main__":
    bench_main.run(main)
