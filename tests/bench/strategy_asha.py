#!/usr/bin/python3
"""ASHA vs the full grid on the quickstart space: compute spent and hypervolume.

Runs every trial of the grid of tests/bench/strategy_quickstart.yaml (the
quickstart space with an evaluation every 20 steps) once with frontier-trial,
keeping each trial's output, then replays the outputs through the real
Scheduler under strategy grid and under strategy asha over several queue
orders (tests/bench/strategy_replay.cc): compute is the summed step time
the trials ran, quality the report's hypervolume. Trial outputs are kept in
--runs, so a rerun only runs what is missing.

    /usr/bin/python3 tests/bench/strategy_asha.py --replay build/tests/bench/strategy_replay \\
        --trial build/worker/frontier-trial --runs runs/asha-bench
"""
import argparse
import json
import os
import subprocess
import sys
import time


def has_result(path):
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return any('"event":"result"' in line.replace(" ", "") for line in f)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", default="build/tests/bench/strategy_replay")
    parser.add_argument("--trial", default="build/worker/frontier-trial")
    parser.add_argument("--space", default=os.path.join(os.path.dirname(__file__), "strategy_quickstart.yaml"))
    parser.add_argument("--runs", default="runs/asha-bench", help="trial specs and outputs")
    parser.add_argument("--strategy", default="{name: asha, min_steps: 20, eta: 3}")
    parser.add_argument("--workers", type=int, default=2, help="simulated workers in the replay")
    parser.add_argument("--orders", type=int, default=100,
                        help="ASHA queue orders (seeds) to replay; the spread between orders is wide, "
                        "10 give the mean to a few points")
    args = parser.parse_args()

    os.makedirs(args.runs, exist_ok=True)
    subprocess.run([args.replay, "specs", args.space, args.runs], check=True)
    with open(os.path.join(args.runs, "index.json")) as f:
        index = json.load(f)
    for i, entry in enumerate(index):
        output = os.path.join(args.runs, entry["file"][:-5] + ".jsonl")
        if has_result(output):
            continue
        started = time.time()
        with open(output + ".tmp", "w") as out:
            subprocess.run([args.trial, "--spec", os.path.join(args.runs, entry["file"]), "--progress-every", "10"],
                           stdout=out, check=False)
        os.replace(output + ".tmp", output)
        print(f"[{i + 1}/{len(index)}] {entry['config']} seed {entry['seed']}: {time.time() - started:.0f} s",
              file=sys.stderr, flush=True)
    subprocess.run([args.replay, "compare", args.space, args.runs, args.strategy, "--workers", str(args.workers),
                    "--orders", str(args.orders)], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
