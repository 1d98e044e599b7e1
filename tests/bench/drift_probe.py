#!/usr/bin/python3
"""Is this machine's speed drifting, and does the drift reach every core?

Core 0 runs frontier-trial of SPEC (500 steps, no evaluation) REPEATS times,
pinned; core 1 runs a 1-thread fp32 GEMM loop (LibTorch from Python),
GFLOP/s per 0.2 s window. Prints the trial's steps/s per 10-step window (from
the arrival times of its progress lines), the probe's GFLOP/s over the same
windows, and their Pearson correlation, per window and over windows of 3, 5
and 10 windows; with the coefficient of variation of the trial's rate, raw
and divided by the probe's. A correlation near 1 means the machine itself
slows down (another tenant, the host's clock), not Frontier's processes.
The probe's absolute GFLOP/s is not a peak (Python's OpenBLAS may pick
generic kernels); only its changes count. docs/worker.md has a run.

    /usr/bin/python3 tests/bench/drift_probe.py build/worker/frontier-trial SPEC [REPEATS]

SPEC: a trial spec of one thread, e.g. runs/asha-bench/000.pinned.json from
tests/bench/strategy_asha.py. Needs 2 cores.
"""
import json
import os
import shutil
import statistics as st
import subprocess
import sys
import tempfile
import threading
import time

if len(sys.argv) < 3:
    sys.exit(__doc__)
trial_bin, spec_path = sys.argv[1], sys.argv[2]
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
work = tempfile.mkdtemp(prefix="frontier-drift-")
stop = False
probe = []


def probe_loop():
    os.sched_setaffinity(0, {1})
    import torch
    torch.set_num_threads(1)
    n = 384
    a, b = torch.randn(n, n), torch.randn(n, n)
    while not stop:
        t0, k = time.time(), 0
        while time.time() - t0 < 0.2:
            torch.mm(a, b)
            k += 1
        t1 = time.time()
        probe.append(((t0 + t1) / 2, 2 * n ** 3 * k / (t1 - t0) / 1e9))



th = threading.Thread(target=probe_loop)
th.start()
time.sleep(2)
windows = []
spec = json.load(open(spec_path))
spec["task"]["steps"] = 500
spec["task"]["eval_every"] = 0
with open(os.path.join(work, "spec.json"), "w") as f:
    json.dump(spec, f)
for _ in range(repeats):
    p = subprocess.Popen(["taskset", "-c", "0", trial_bin, "--spec", os.path.join(work, "spec.json")],
                         stdout=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    last = None
    for line in p.stdout:
        t = time.time()
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") == "progress":
            if last is not None and e["step"] - last[1] == 10:
                windows.append((last[0], t, 10 / (t - last[0]), e.get("step_time_ms")))
            last = (t, e["step"])
    p.wait()
stop = True
th.join()
shutil.rmtree(work, ignore_errors=True)

xs, ys = [], []
for t0, t1, rate, _ in windows:
    g = [v for (tm, v) in probe if t0 <= tm <= t1]
    if g:
        xs.append(rate)
        ys.append(sum(g) / len(g))


def pearson(a, b):
    ma, mb = st.mean(a), st.mean(b)
    return sum((x - ma) * (y - mb) for x, y in zip(a, b)) / (
        sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5


def blocks(v, k):
    return [st.mean(v[i:i + k]) for i in range(0, len(v) - k + 1, k)]


def cv(v):
    return st.stdev(v) / st.mean(v)


normalized = [x / y for x, y in zip(xs, ys)]
out = {"windows": len(xs), "trial_steps_per_s_mean": st.mean(xs), "probe_gflops_mean": st.mean(ys), "by_block": []}
for k in (1, 3, 5, 10):
    bx, by, bn = blocks(xs, k), blocks(ys, k), blocks(normalized, k)
    out["by_block"].append({"windows_per_block": k, "blocks": len(bx), "pearson_r": round(pearson(bx, by), 3),
                            "trial_rate_cv": round(cv(bx), 3), "probe_cv": round(cv(by), 3),
                            "trial_rate_over_probe_cv": round(cv(bn), 3)})
print(json.dumps(out, indent=1))
