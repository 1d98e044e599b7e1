#!/usr/bin/python3
"""Goodput benchmark: how much of the workers' time trains models.

Runs `frontier run` on the quickstart space and on tests/bench/goodput_short.yaml
(12 trials of 60 steps) with 1 and 2 local workers, and prints for each run its
wall time, the device-seconds the trials held, the measured training steps'
share of them (the report's goodput, docs/report.md#goodput) and with the
warm-up steps included, a completed trial's fixed cost split into start-up
(the process, data, model, FLOP count and the lease outside the process; also
the mean over trials that were not their worker's first, from the store) and
measurement (gate, evaluation, latency, profile), and its mean phases
(docs/trial-output.md, phases).

With --profile-seeds first,all each run is made twice: the space as it is
(seed 1 of each configuration profiled, the default) and with `profile:
{seeds: all}` appended (every seed profiled, as before 2026-12-06), side by
side on the same machine.

With --test-sizes full,1 each run is also made with `task.test_size: 1`
inserted in the space (a test split of one image: the evaluation is the
validation split's alone), side by side: what the test split costs.

With --optuna it also runs the short space's configs as Optuna trials in one
Python process (Debian's python3-optuna and python3-torch: the network of
tests/bench/reference_model.py, Fashion-MNIST read once, the same steps, batch,
optimizer and threads, and at the end the same evaluation as a Frontier trial's:
the 5,000 validation and 10,000 test images at the training batch), and prints for both the
ratio of wall time to summed step time: what an in-process loop with no
start-up, isolation or measurement costs against Frontier's trials.

usage: /usr/bin/python3 tests/bench/goodput.py [--build DIR] [--spaces quickstart,short]
                                               [--workers 1,2] [--profile-seeds first,all]
                                               [--test-sizes full,1] [--optuna] [--json FILE]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import bench_main  # tests/bench/bench_main.py: the tool's error exit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SPACES = {"quickstart": os.path.join(ROOT, "search_spaces/quickstart.yaml"),
          "short": os.path.join(HERE, "goodput_short.yaml")}
PHASES = ["start", "data", "model", "flops", "gate", "warmup", "train", "eval", "latency", "profile", "other"]
# The fixed cost in two parts: starting a trial (its process, data, model and FLOP count, the lease around the
# process) and the measurements its spec asks for (the correctness gate, the evaluation, latency, profile).
START_UP = ["start", "data", "model", "flops", "other"]
MEASUREMENT = ["gate", "eval", "latency", "profile"]


def run_frontier(build, space, workers, profile_seeds="first", test_size="full"):
    """`frontier run` in a scratch folder: (wall seconds, the report's JSON). With profile_seeds "all" or a
    test_size other than "full" the space runs from a copy there, with `profile: {seeds: all}` appended or
    `test_size` inserted in its task (the spaces have no profile section, no test_size and no paths
    relative to their folder)."""
    with tempfile.TemporaryDirectory(prefix="goodput-") as runs:
        if profile_seeds == "all" or test_size != "full":
            with open(space) as f:
                text = f.read()
            if profile_seeds == "all":
                text += "\nprofile: {steps: 3, seeds: all}\n"
            if test_size != "full":
                text = text.replace("\ntask:\n", f"\ntask:\n  test_size: {int(test_size)}\n", 1)
            space = os.path.join(runs, "space.yaml")
            with open(space, "w") as f:
                f.write(text)
        start = time.monotonic()
        done = subprocess.run([os.path.join(build, "server/frontier"), "run", space, "--workers", str(workers),
                               "--runs-dir", runs, "-o", "json", "--metrics-listen", "0"],
                              capture_output=True, text=True, check=False)
        wall = time.monotonic() - start
        if done.returncode != 0:
            sys.exit(f"frontier run {space} --workers {workers} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        # stdout: the progress lines, the report's JSON, then the HTML report's path.
        start_of_report = done.stdout.find("\n{") + 1
        report, _ = json.JSONDecoder().raw_decode(done.stdout[start_of_report:])
        return wall, report, trial_start_ups(os.path.join(runs, "frontier.db"))


def trial_start_ups(db):
    """Each completed trial's start-up seconds (START_UP phases plus its lease outside the process) in lease
    order, as (worker, seconds, whether it is its worker's first trial)."""
    import sqlite3
    rows = sqlite3.connect(db).execute(
        "SELECT worker_id, started_ms, finished_ms, result_json FROM trials "
        "WHERE state = 'completed' AND result_json <> '' ORDER BY started_ms").fetchall()
    seen, out = set(), []
    for worker, started_ms, finished_ms, result_json in rows:
        phases = json.loads(result_json).get("phases")
        if not phases:
            continue
        outside = max(0.0, (finished_ms - started_ms) / 1000.0 - phases["wall_s"])
        out.append((worker, sum(phases.get(p + "_s", 0.0) for p in START_UP) + outside, worker not in seen))
        seen.add(worker)
    return out


def frontier_row(name, workers, wall, report, start_ups, profile_seeds, test_size):
    goodput = report.get("goodput")
    if not goodput:
        sys.exit(f"{name}: the report has no goodput (are the results from this build's frontier-trial?)")
    trials = goodput["trials"]
    steps_s = sum(c["cost"]["train_s"] for c in report["configs"])  # summed step time, warm-up included
    row = {"space": name, "workers": workers, "profile_seeds": profile_seeds, "test_size": test_size,
           "trials": trials, "wall_s": wall,
           "device_s": goodput["device_s"],
           "measured_train_s": goodput["train_s"], "goodput": goodput["share"],
           "training_share": steps_s / goodput["device_s"],
           "fixed_cost_s": goodput["fixed_cost_s"], "outside_process_s": goodput["outside_process_s"],
           "summed_step_s": steps_s, "wall_per_step_s": wall * workers / steps_s if steps_s else None,
           "phases": {p: goodput["phases"].get(p + "_s", 0.0) / trials for p in PHASES}}
    row["start_up_s"] = sum(row["phases"][p] for p in START_UP) + row["outside_process_s"]
    row["measurement_s"] = sum(row["phases"][p] for p in MEASUREMENT)
    later = [s for _, s, first in start_ups if not first]
    row["start_up_later_trials_s"] = sum(later) / len(later) if later else None
    row["start_up_later_trials_max_s"] = max(later) if later else None
    return row


def fashion_mnist(split):
    d = "/usr/share/datasets/fashion-mnist"
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(d, f"{prefix}-images-idx3-ubyte.gz")) as f:
        images = f.read()[16:]
    with gzip.open(os.path.join(d, f"{prefix}-labels-idx1-ubyte.gz")) as f:
        labels = f.read()[8:]
    return images, labels


def run_optuna(space_path):
    """The short space's grid as Optuna trials in this process: (wall seconds, summed step seconds, trials)."""
    import optuna
    import torch
    import yaml
    sys.path.insert(0, HERE)
    import reference_model

    start = time.monotonic()
    space = yaml.safe_load(open(space_path))
    task, base = space["task"], space["baseline"]
    torch.set_num_threads(base["runtime"].get("threads", 1))

    def tensors(split):
        images, labels = fashion_mnist(split)
        x = ((torch.frombuffer(bytearray(images), dtype=torch.uint8).view(-1, 1, 28, 28).float() / 255.0)
             - 0.2860) / 0.3530
        return x, torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()

    # Frontier's splits (docs/trial-spec.md): the training file's last 5,000 images validate, the test file tests.
    x_all, y_all = tensors("train")
    train_size = x_all.shape[0] - 5000
    evaluated = [(x_all[train_size:], y_all[train_size:]), tensors("test")]
    batch = task["batch_size"]
    o = task["optimizer"]
    summed = {"step_s": 0.0}
    grid = {k: list(v) for k, v in space["space"].items()}

    def objective(trial):
        arch = json.loads(json.dumps(base["arch"]))
        for key, values in grid.items():
            stage, field = key.split(".")
            arch["stages"][int(stage[len("stages["):-1])][field] = trial.suggest_categorical(key, values)
        torch.manual_seed(trial.number)
        model = reference_model.build(arch, 1, 10)
        opt = torch.optim.SGD(model.parameters(), lr=o["lr"], momentum=o["momentum"], nesterov=o["nesterov"],
                              weight_decay=o["weight_decay"])
        generator = torch.Generator().manual_seed(trial.number)
        for _ in range(task["steps"]):
            index = torch.randint(0, train_size, (batch,), generator=generator)
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x_all[index]), y_all[index])
            loss.backward()
            opt.step()
            summed["step_s"] += time.perf_counter() - t0
        # At the training batch, as Frontier's trials evaluate: at batch 1,000 this loop's evaluation of
        # 10,000 images took about 9 s a trial (2026-12-07), at 128 about 1 s.
        model.eval()
        with torch.no_grad():
            correct = [sum((model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
                           for i in range(0, x.shape[0], batch)) for x, y in evaluated]
        return correct[0] / evaluated[0][1].shape[0]

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    configs = 1
    for values in grid.values():
        configs *= len(values)
    trials = configs * space.get("repeats", 1)
    for repeat in range(space.get("repeats", 1)):
        study = optuna.create_study(direction="maximize", sampler=optuna.samplers.GridSampler(grid, seed=repeat))
        study.optimize(objective, n_trials=configs)
    return time.monotonic() - start, summed["step_s"], trials


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--spaces", default="quickstart,short")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--profile-seeds", default="first",
                    help="first, all or first,all: which seeds of a configuration are profiled, each a run")
    ap.add_argument("--test-sizes", default="full",
                    help="full, 1 or full,1: the space's test split as it is, or of one image, each a run")
    ap.add_argument("--optuna", action="store_true", help="also the short space as in-process Optuna trials")
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args()
    profile_seeds = args.profile_seeds.split(",")
    if any(seeds not in ("first", "all") for seeds in profile_seeds):
        sys.exit(f"--profile-seeds: expected first, all or first,all, got {args.profile_seeds!r}")
    test_sizes = args.test_sizes.split(",")
    if any(size != "full" and not size.isdigit() for size in test_sizes):
        sys.exit(f"--test-sizes: expected full or a number of images, got {args.test_sizes!r}")

    rows = []
    for name in args.spaces.split(","):
        for workers in (int(w) for w in args.workers.split(",")):
            for seeds, test_size in ((s, t) for s in profile_seeds for t in test_sizes):
                wall, report, start_ups = run_frontier(args.build, SPACES[name], workers, seeds, test_size)
                rows.append(frontier_row(name, workers, wall, report, start_ups, seeds, test_size))
                r = rows[-1]
                print(f"{name:10s} workers {workers}, profiled seeds {seeds}, test split {test_size}: "
                      f"{r['trials']} trials in {wall:.1f} s "
                      f"wall, {r['device_s']:.1f} device-s; goodput {r['goodput']:.3f}; fixed cost "
                      f"{r['fixed_cost_s']:.2f} s a trial; wall x workers / summed step time "
                      f"{r['wall_per_step_s']:.2f}")
                later = r["start_up_later_trials_s"]
                print(f"           training share, warm-up steps included: {r['training_share']:.3f}; fixed cost = "
                      f"start-up {r['start_up_s']:.3f} s ({'+'.join(START_UP)}, outside the process; a worker's "
                      f"later trials: mean {later if later is None else f'{later:.3f}'} s, max "
                      f"{r['start_up_later_trials_max_s'] or 0:.3f}) + measurement {r['measurement_s']:.3f} s "
                      f"({'+'.join(MEASUREMENT)})")
                print("           phases (mean s a trial): " +
                      ", ".join(f"{p} {r['phases'][p]:.3f}" for p in PHASES) +
                      f", outside the process {r['outside_process_s']:.3f}")
                sys.stdout.flush()
    if args.optuna:
        wall, step_s, trials = run_optuna(SPACES["short"])
        rows.append({"space": "short", "runner": "optuna in-process", "trials": trials, "wall_s": wall,
                     "summed_step_s": step_s, "wall_per_step_s": wall / step_s})
        print(f"short      optuna in one process: {trials} trials in {wall:.1f} s wall, summed step time "
              f"{step_s:.1f} s; wall / summed step time {wall / step_s:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    bench_main.run(main)
