#!/usr/bin/python3
"""ASHA vs the full grid on the quickstart space: compute spent and hypervolume.

Runs every trial of the grid of tests/bench/strategy_quickstart.yaml (the
quickstart space with an evaluation every 20 steps) once with frontier-trial,
keeping each trial's output, then replays the outputs through the real
Scheduler under strategy grid and under strategy asha over several queue
orders (tests/bench/strategy_replay.cc): compute is the summed step time
the trials ran, quality the report's hypervolume. Trial outputs are kept in
--runs, so a rerun only runs what is missing.

With --cores, one trial at a time runs on each of those cores, pinned
(taskset) at 1 intra-op thread, with the fp32 and bf16 peaks calibrated once
per core first: as `frontier run` runs its local workers (a trial's default
thread count is every core of the machine; pinned to one core, its OpenMP
threads would take turns on it, which slowed bf16 trials 10x).

    /usr/bin/python3 tests/bench/strategy_asha.py --replay build/tests/bench/strategy_replay \\
        --trial build/worker/frontier-trial --runs runs/asha-bench --cores 0,1 \\
        --table tests/bench/tables/quickstart_grid.json.gz

With --table the outputs are also compacted into a table as
tests/bench/tabular_grid.py writes one (the space, the machine, the peaks,
every trial's progress and eval lines and its result less its profile), which
`strategy_replay compare TABLE STRATEGY` replays without the run folder.
"""
import argparse
import datetime
import gzip
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tabular_grid  # noqa: E402  (compact, machine: the table's format)
import bench_main  # noqa: E402  (the tool's error exit)


def has_result(path):
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return any('"event":"result"' in line.replace(" ", "") for line in f)


def calibrate(trial, core):
    line = subprocess.run(["taskset", "-c", str(core), trial, "--calibrate", "--threads", "1", "--dtypes",
                           "fp32,bf16"], check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    c = json.loads(line)
    return dict(c["peaks"], source="calibrated:cpu-gemm", measured_at=c["measured_at"], threads=1, device="cpu")


def run_trials(args, index):
    """Every trial without a result, one at a time on each core of --cores (or unpinned when none)."""
    cores = [int(c) for c in args.cores.split(",")] if args.cores else [None]
    peaks = {core: calibrate(args.trial, core) for core in cores if core is not None}
    for core, peak in peaks.items():
        print(f"core {core}: fp32 {peak['fp32'] / 1e9:.1f}, bf16 {peak.get('bf16', 0) / 1e9:.1f} GFLOP/s",
              file=sys.stderr, flush=True)
    todo = [(i, e) for i, e in enumerate(index) if not has_result(os.path.join(args.runs, e["file"][:-5] + ".jsonl"))]
    lock = threading.Lock()

    def slot(core):
        while True:
            with lock:
                if not todo:
                    return
                i, entry = todo.pop(0)
            spec_path = os.path.join(args.runs, entry["file"])
            command = [args.trial, "--spec", spec_path, "--progress-every", "10"]
            if core is not None:
                with open(spec_path) as f:
                    spec = json.load(f)
                spec["runtime"]["threads"] = 1
                spec_path = os.path.join(args.runs, entry["file"][:-5] + ".pinned.json")
                with open(spec_path, "w") as f:
                    json.dump(spec, f, indent=2)
                command = ["taskset", "-c", str(core), args.trial, "--spec", spec_path, "--progress-every", "10",
                           "--peak-flops", json.dumps(peaks[core])]
            output = os.path.join(args.runs, entry["file"][:-5] + ".jsonl")
            started = time.time()
            with open(output + ".tmp", "w") as out:
                subprocess.run(command, stdout=out, check=False)
            os.replace(output + ".tmp", output)
            where = "" if core is None else f" core {core}"
            print(f"[{i + 1}/{len(index)}]{where} {entry['config']} seed {entry['seed']}: "
                  f"{time.time() - started:.0f} s", file=sys.stderr, flush=True)

    threads = [threading.Thread(target=slot, args=(core,)) for core in cores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return list(peaks.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", default="build/tests/bench/strategy_replay")
    parser.add_argument("--trial", default="build/worker/frontier-trial")
    parser.add_argument("--space", default=os.path.join(os.path.dirname(__file__), "strategy_quickstart.yaml"))
    parser.add_argument("--runs", default="runs/asha-bench", help="trial specs and outputs")
    parser.add_argument("--cores", help="one trial at a time on each of these cores (e.g. 0,1), 1 thread each; "
                        "default: one trial at a time, unpinned, at the spec's thread count")
    parser.add_argument("--strategy", default="{name: asha, min_steps: 20, eta: 3}")
    parser.add_argument("--workers", type=int, default=2, help="simulated workers in the replay")
    parser.add_argument("--table", help="also write the recorded grid as a table (.json.gz)")
    parser.add_argument("--orders", type=int, default=100,
                        help="ASHA queue orders (seeds) to replay; the spread between orders is wide, "
                        "10 give the mean to a few points")
    args = parser.parse_args()

    os.makedirs(args.runs, exist_ok=True)
    subprocess.run([args.replay, "specs", args.space, args.runs], check=True)
    with open(os.path.join(args.runs, "index.json")) as f:
        index = json.load(f)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.time()
    todo = sum(not has_result(os.path.join(args.runs, e["file"][:-5] + ".jsonl")) for e in index)
    peaks = run_trials(args, index)
    if args.table:
        with open(args.space) as f:
            space_text = f.read()
        doc = {"space": space_text, "machine": tabular_grid.machine(), "cores": args.cores or "",
               "peaks": peaks, "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
               "started_at": started.isoformat(timespec="seconds"), "wall_s": round(time.time() - t0, 1),
               "note": "wall_s and peaks are of this invocation, which ran only some trials (each trial's "
                       "start line has the peak it ran with)" if todo < len(index) else "",
               "trials": tabular_grid.compact(index, args.runs)}
        with gzip.open(args.table, "wt") as f:
            json.dump(doc, f, separators=(",", ":"))
        print(f"{len(index)} trials -> {args.table}", file=sys.stderr)
    subprocess.run([args.replay, "compare", args.space, args.runs, args.strategy, "--workers", str(args.workers),
                    "--orders", str(args.orders)], check=True)
    return 0


if __name__ == "__main__":
    bench_main.run(main)
