#!/usr/bin/python3
"""The Python SDK's step time against frontier-trial's on the same network, and
against glibc's heap state (issue 44).

One network both can run: the quickstart baseline (worker/examples), built by
frontier-trial in C++ and by tests/bench/reference_model.py in Python, the
same batch size, optimizer, threads and steps (frontier-trial reads its
Fashion-MNIST batches, the Python loops train on the first one; step time
excludes data waits in both). Each round runs, in fresh processes, interleaved:
  trial      frontier-trial on the spec (its result's median step time)
  sdk        the Python network under the SDK (frontier_trial.start() sets
             frontier-trial's host allocator policy; the result's median)
  sdk+heap   the same after one 16 MiB block was allocated and freed before
             the model was built (glibc then raises its dynamic mmap and trim
             thresholds: the "heap state" a script's history leaves)
  bare       the same loop without the SDK, glibc's defaults (perf_counter
             around each step, the same warm-up excluded, median)
  bare+heap  bare after the same 16 MiB block
Prints each cell's median over rounds and the ratios sdk/trial,
sdk+heap/sdk and bare+heap/bare: the first two should be 1 within noise, the
third shows how much the heap state moves a loop the SDK does not manage.

usage: /usr/bin/python3 tests/bench/sdk_allocator.py [--build DIR] [--rounds 5] [--steps 60]
                                                     [--threads 2] [--json FILE]
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

ARCH = {"stem": {"kind": "conv3x3", "width": 24, "stride": 2, "depth": 1},
        "stages": [{"block": "basic", "width": 32, "depth": 1, "stride": 1},
                   {"block": "basic", "width": 64, "depth": 1, "stride": 2}],
        "norm": "batch", "activation": "relu"}

LOOP = r"""
import json, os, statistics, sys, time
sys.path.insert(0, os.path.join(ROOT, "worker", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
if SDK:
    import frontier_trial  # first: its import may re-execute the script (OPENBLAS_CORETYPE)
import torch
import reference_model
spec = json.load(open(SPEC))
task = spec["task"]
torch.set_num_threads(spec["runtime"]["threads"])
if SDK:
    trial = frontier_trial.start(spec=spec)
if HEAP:
    block = torch.empty(16 << 20, dtype=torch.uint8)  # one mapping of its own under glibc's defaults
    block[::4096] = 1
    del block  # freed: glibc raises its mmap threshold to 16 MiB and its trim threshold to 32 MiB
torch.manual_seed(spec["seed"])
model = reference_model.build(spec["arch"], 1, 10)
x, y = reference_model.first_batch(task, task["batch_size"])
o = task["optimizer"]
opt = torch.optim.SGD(model.parameters(), lr=o["lr"], momentum=o["momentum"], nesterov=o["nesterov"],
                      weight_decay=o["weight_decay"])
def one_step():
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss
if SDK:
    trial.count_flops(model, x)
    for _ in range(trial.steps):
        with trial.step(len(x)) as s:
            s.loss = one_step()
    trial.eval(val_accuracy=0.0, val_loss=0.0)
    result = trial.finish(test_accuracy=0.0, test_loss=0.0)
    print(json.dumps({"ms": result["step_time_ms"]["median"], "allocator": result["host_allocator"]}),
          file=sys.stderr)
else:
    times = []
    for step in range(task["steps"]):
        t0 = time.perf_counter()
        float(one_step().detach())
        if step >= task["warmup_steps"]:
            times.append(time.perf_counter() - t0)
    print(json.dumps({"ms": statistics.median(times) * 1e3, "allocator": "glibc defaults"}), file=sys.stderr)
"""


def last_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def run_cell(cell, spec_path, build, env):
    if cell == "trial":
        with tempfile.TemporaryDirectory() as artifacts:
            p = subprocess.run([os.path.join(build, "worker", "frontier-trial"), "--spec", spec_path,
                                "--artifact-dir", artifacts], capture_output=True, text=True, env=env)
        result = last_json(p.stdout)
        if p.returncode != 0 or not result or result.get("status") != "completed":
            sys.exit(f"frontier-trial failed ({p.returncode}): {p.stderr[-2000:]}")
        return result["step_time_ms"]["median"], result.get("host_allocator")
    sdk, heap = cell.startswith("sdk"), cell.endswith("+heap")
    code = (LOOP.replace("ROOT", repr(ROOT)).replace("SPEC", repr(spec_path))
            .replace("SDK", repr(sdk)).replace("HEAP", repr(heap)))
    p = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True, env=env)
    line = last_json(p.stderr)
    if p.returncode != 0 or not line:
        sys.exit(f"{cell} failed ({p.returncode}): {p.stderr[-2000:]}")
    return line["ms"], line["allocator"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the cells' times and the summary here")
    args = ap.parse_args()
    spec = {"schema": 1, "trial_id": "sdk-allocator", "seed": 1, "arch": ARCH,
            "task": {"dataset": "fashion-mnist", "batch_size": 128, "steps": args.steps, "eval_every": 0,
                     "warmup_steps": 10,
                     "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True,
                                   "weight_decay": 5e-4}},
            "runtime": {"precision": "fp32", "memory_format": "contiguous", "threads": args.threads},
            "profile": {"steps": 0}, "latency": {"repetitions": 0}}
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), FRONTIER_THREADS=str(args.threads))
    env.pop("GLIBC_TUNABLES", None)
    cells = ["trial", "sdk", "sdk+heap", "bare", "bare+heap"]
    times = {c: [] for c in cells}
    allocators = {}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        for r in range(args.rounds):
            order = cells[r % len(cells):] + cells[:r % len(cells)]  # rotated: no cell always first
            for cell in order:
                ms, allocators[cell] = run_cell(cell, f.name, args.build, env)
                times[cell].append(ms)
            print(f"round {r + 1}: " + ", ".join(f"{c} {times[c][-1]:.2f}" for c in cells) + " ms/step",
                  file=sys.stderr)
    finally:
        os.unlink(f.name)
    median = {c: statistics.median(v) for c, v in times.items()}
    summary = {"median_ms": median, "sdk_over_trial": median["sdk"] / median["trial"],
               "sdk_heap_over_sdk": median["sdk+heap"] / median["sdk"],
               "bare_heap_over_bare": median["bare+heap"] / median["bare"], "allocators": allocators,
               "rounds": args.rounds, "steps": args.steps, "threads": args.threads, "times_ms": times}
    print(", ".join(f"{c} {median[c]:.2f}" for c in cells) + " ms/step (median of "
          f"{args.rounds} interleaved rounds, {args.steps} steps, {args.threads} threads)")
    print(f"sdk/trial {summary['sdk_over_trial']:.3f}, sdk+heap/sdk {summary['sdk_heap_over_sdk']:.3f}, "
          f"bare+heap/bare {summary['bare_heap_over_bare']:.3f}")
    print("allocators: " + ", ".join(f"{c}: {a}" for c, a in allocators.items()))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(summary, out, indent=1)


if __name__ == "__main__":
    bench_main.run(main)
