#!/usr/bin/python3
"""Python SDK overhead: a PyTorch training loop with frontier_trial vs the same
loop without it (same model, batch, threads, data), interleaved round by round.

Each round runs both loops in fresh processes; each process times the whole
loop after warm-up from outside the SDK (wall time / steps), so the SDK's own
work (timing, synchronization, progress lines, bookkeeping) is inside the
figure. Prints the median over rounds of each and the ratio sdk / bare.

usage: /usr/bin/python3 tests/bench/sdk_overhead.py [--rounds 5] [--steps 60] [--threads 2]
                                                    [--attention none|mhsa|linear] [--width 64]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import bench_main  # tests/bench/bench_main.py: the tool's error exit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

LOOP = r"""
import io, json, os, sys, time, torch
sys.path.insert(0, os.path.join(ROOT, "worker", "python"))
sys.path.insert(0, os.path.join(ROOT, "search_spaces", "byo_pytorch"))
import torch.nn.functional as F
import train as byo
torch.set_num_threads(THREADS)
torch.manual_seed(0)
model = byo.Net(WIDTH, ATTENTION, 4)
x, y = torch.randn(128, 1, 28, 28), torch.randint(0, 10, (128,))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
batches = ((x, y) for _ in iter(int, 1))
def one_step(a, b):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(a), b)
    loss.backward()
    opt.step()
    return loss
if SDK:
    import frontier_trial
    out = io.StringIO()
    trial = frontier_trial.start(spec={"trial_id": "bench", "task": {"steps": STEPS + WARMUP, "warmup_steps": WARMUP}},
                                 out=out)
    trial.count_flops(model, x)
    data = trial.batches(batches)
    for i in range(STEPS + WARMUP):
        if i == WARMUP:
            t0 = time.perf_counter()
        a, b = next(data)
        with trial.step(len(a)) as s:
            s.loss = one_step(a, b)
            s.lr = 0.05
        trial.should_stop()
    t1 = time.perf_counter()
    trial.finish()
else:
    for i in range(STEPS + WARMUP):
        if i == WARMUP:
            t0 = time.perf_counter()
        a, b = next(batches)
        loss = one_step(a, b)
        float(loss.detach())
    t1 = time.perf_counter()
print(json.dumps({"ms_per_step": (t1 - t0) * 1e3 / STEPS}))
"""


def run(sdk, args):
    code = (LOOP.replace("ROOT", repr(ROOT)).replace("THREADS", str(args.threads)).replace("WIDTH", str(args.width))
            .replace("ATTENTION", repr(args.attention)).replace("STEPS", str(args.steps))
            .replace("WARMUP", "10").replace("SDK", "True" if sdk else "False"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
    if p.returncode != 0:
        sys.exit(f"loop failed ({p.returncode}): {p.stderr[-2000:]}")
    return json.loads(p.stdout.splitlines()[-1])["ms_per_step"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--attention", default="none")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    bare, sdk = [], []
    for r in range(args.rounds):
        order = [False, True] if r % 2 == 0 else [True, False]
        for with_sdk in order:
            (sdk if with_sdk else bare).append(run(with_sdk, args))
        print(f"round {r + 1}: bare {bare[-1]:.2f} ms/step, sdk {sdk[-1]:.2f} ms/step", file=sys.stderr)
    b, s = statistics.median(bare), statistics.median(sdk)
    summary = {"bare_ms_per_step": b, "sdk_ms_per_step": s, "sdk_over_bare": s / b, "rounds": args.rounds,
               "steps": args.steps, "threads": args.threads, "attention": args.attention, "width": args.width}
    print(json.dumps(summary) if args.json else
          f"bare {b:.2f} ms/step, sdk {s:.2f} ms/step, sdk/bare {s / b:.3f} "
          f"(median of {args.rounds} interleaved rounds, {args.steps} steps, {args.threads} threads)")


if __name__ == "__main__":
    bench_main.run(main)
