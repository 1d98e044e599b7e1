#!/usr/bin/python3
"""Runs the tabular benchmark's full grid once and writes its table.

Every trial of the grid of a space (default tests/bench/tables/fmnist_backbones.yaml:
the baseline and every runnable configuration at seeds 1..repeats) is run once
with frontier-trial, each slot pinned to its own core (taskset) with the peak
FLOP/s calibrated once per core before any trial, and its output kept in
--runs (a rerun only runs what is missing). Then the outputs are compacted
into the table (--table, default the space's name with .json.gz beside it):

    {"space": <the space file's text>, "machine": {...}, "command": "...",
     "started_at", "finished_at", "wall_s",
     "trials": [{"config": KEY, "seed": N, "events": [progress and eval lines],
                 "result": <the result line, less its profile>}]}

tests/bench/strategy_replay.cc replays the table through the real Scheduler.

    /usr/bin/python3 tests/bench/tabular_grid.py --trial build/worker/frontier-trial \\
        --specs build/tests/bench/strategy_replay --runs runs/tabular --cores 0,1
"""
import argparse
import concurrent.futures
import datetime
import gzip
import json
import os
import platform
import subprocess
import sys
import threading
import time
import bench_main  # tests/bench/bench_main.py: the tool's error exit

HERE = os.path.dirname(os.path.abspath(__file__))

# Result fields that the replay and the report never read and that make up
# most of a result line's size.
DROPPED = ("profile", "host_allocator", "bottleneck", "op")


def has_result(path):
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return any('"event":"result"' in line.replace(" ", "") for line in f)


def calibrate(trial, core):
    line = subprocess.run(["taskset", "-c", str(core), trial, "--calibrate", "--threads", "1", "--dtypes", "fp32"],
                          check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    c = json.loads(line)
    return {"fp32": c["peaks"]["fp32"], "source": "calibrated:cpu-gemm", "measured_at": c["measured_at"],
            "threads": 1, "device": "cpu"}


def machine():
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    return {"cpu": model, "cores": os.cpu_count(), "memory_gib": round(mem_kb / 2**20, 1),
            "os": platform.platform(), "host": platform.node()}


def compact(index, runs):
    trials = []
    for entry in index:
        events, result = [], None
        with open(os.path.join(runs, entry["file"][:-5] + ".jsonl")) as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                kind = e.get("event")
                if kind in ("progress", "eval"):
                    e.pop("event")
                    events.append(e if kind == "progress" else dict(e, eval=True))
                elif kind == "result":
                    result = {k: v for k, v in e.items() if k not in DROPPED}
        if result is None:
            raise SystemExit(f"{entry['file']}: no result line")
        trials.append({"config": entry["config"], "seed": entry["seed"], "events": events, "result": result})
    return trials


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trial", default="build/worker/frontier-trial")
    parser.add_argument("--specs", default="build/tests/bench/strategy_replay",
                        help="the replay tool, whose `specs` command writes the grid's trial specs")
    parser.add_argument("--space", default=os.path.join(HERE, "tables", "fmnist_backbones.yaml"))
    parser.add_argument("--runs", default="runs/tabular", help="trial specs and outputs")
    parser.add_argument("--cores", default="0,1", help="one trial at a time on each of these cores")
    parser.add_argument("--table", help="the table to write (default: beside the space, .json.gz)")
    args = parser.parse_args()
    table = args.table or os.path.splitext(args.space)[0] + ".json.gz"
    cores = [int(c) for c in args.cores.split(",")]

    os.makedirs(args.runs, exist_ok=True)
    subprocess.run([args.specs, "specs", args.space, args.runs], check=True)
    with open(os.path.join(args.runs, "index.json")) as f:
        index = json.load(f)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.time()
    peaks = {core: calibrate(args.trial, core) for core in cores}
    for core, peak in peaks.items():
        print(f"core {core}: fp32 peak {peak['fp32'] / 1e9:.1f} GFLOP/s", file=sys.stderr, flush=True)
    todo = [e for e in index if not has_result(os.path.join(args.runs, e["file"][:-5] + ".jsonl"))]
    free = list(cores)
    lock = threading.Lock()
    done = [len(index) - len(todo)]

    def run(entry):
        with lock:
            core = free.pop()
        try:
            output = os.path.join(args.runs, entry["file"][:-5] + ".jsonl")
            begun = time.time()
            with open(output + ".tmp", "w") as out:
                subprocess.run(["taskset", "-c", str(core), args.trial, "--spec",
                                os.path.join(args.runs, entry["file"]), "--peak-flops", json.dumps(peaks[core]),
                                "--artifact-dir", os.path.join(args.runs, "artifacts")],
                               stdout=out, stderr=subprocess.DEVNULL, check=False)
            os.replace(output + ".tmp", output)
            with lock:
                done[0] += 1
                print(f"[{done[0]}/{len(index)}] core {core} {entry['config']} seed {entry['seed']}: "
                      f"{time.time() - begun:.1f} s", file=sys.stderr, flush=True)
        finally:
            with lock:
                free.append(core)

    with concurrent.futures.ThreadPoolExecutor(len(cores)) as pool:
        for f in [pool.submit(run, e) for e in todo]:
            f.result()
    wall = time.time() - t0
    with open(args.space) as f:
        space_text = f.read()
    doc = {"space": space_text, "machine": machine(), "cores": cores, "peaks": list(peaks.values()),
           "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
           "started_at": started.isoformat(timespec="seconds"), "wall_s": round(wall, 1),
           "note": "wall_s covers only the trials this invocation ran" if len(todo) < len(index) else "",
           "trials": compact(index, args.runs)}
    with gzip.open(table, "wt") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{len(index)} trials ({len(todo)} run now, {wall / 60:.1f} min) -> {table}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    bench_main.run(main)
