#!/usr/bin/python3
"""docs/byo-model.md's complete SDK script, run as it is written there.

Takes the ```python block after the `<!-- tested: docs.byo_example -->`
marker, writes it to a scratch folder and runs it with /usr/bin/python3 and
worker/python on PYTHONPATH: once as a trial (a spec with 24 steps, an
evaluation every 8, seed 2) whose output must follow the trial protocol
(tests/worker/python/protocol.py) with FLOPs, latency, the evaluations and
no warnings, and once as a local run (no spec), which must complete too.

usage: byo_example.py --root REPO
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

MARKER = "<!-- tested: docs.byo_example -->"


def example(root):
    text = open(os.path.join(root, "docs", "byo-model.md"), encoding="utf-8").read()
    at = text.find(MARKER)
    if at < 0:
        sys.exit(f"docs/byo-model.md: no {MARKER} marker")
    block = re.match(r"\s*```python\n(.*?)```", text[at + len(MARKER):], re.S)
    if not block:
        sys.exit(f"docs/byo-model.md: no ```python block right after {MARKER}")
    return block.group(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    args.root = os.path.abspath(args.root)
    sys.path.insert(0, os.path.join(args.root, "tests", "worker", "python"))
    import protocol

    env = dict(os.environ, PYTHONPATH=os.path.join(args.root, "worker", "python"), FRONTIER_THREADS="1",
               OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    with tempfile.TemporaryDirectory(prefix="byo-example-") as scratch:
        script = os.path.join(scratch, "train.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(example(args.root))
        spec = os.path.join(scratch, "spec.json")
        with open(spec, "w") as f:
            json.dump({"schema": 1, "trial_id": "doc", "seed": 2, "params": {"width": 16},
                       "task": {"steps": 24, "eval_every": 8, "warmup_steps": 4}}, f)
        as_trial = subprocess.run(["/usr/bin/python3", script, "--spec", spec], capture_output=True, text=True,
                                  env=env, cwd=scratch, timeout=600)
        try:
            _, result = protocol.check_output(as_trial.stdout, as_trial.returncode)
        except protocol.ProtocolError as e:
            sys.exit(f"the example as a trial broke the protocol: {e}\nstderr: {as_trial.stderr[-3000:]}")
        problems = []
        if result["status"] != "completed":
            problems.append(f"status {result['status']}: {result.get('error')}")
        if [e["step"] for e in result["evals"]] != [8, 16, 24, 24]:
            problems.append(f"evaluations at {[e['step'] for e in result['evals']]}, expected 8, 16, 24 and the final")
        if result.get("params") != 16 * 9 + 16 + 16 * 2 + 2:
            problems.append(f"params {result.get('params')}: the spec's width 16 was not used")
        for field in ("latency_b1_ms", "test_accuracy", "val_accuracy"):
            if not isinstance(result.get(field), (int, float)):
                problems.append(f"no {field}")
        if result.get("warnings"):
            problems.append(f"warnings: {result['warnings']}")
        local = subprocess.run(["/usr/bin/python3", script], capture_output=True, text=True, env=env, cwd=scratch,
                               timeout=600)
        try:
            _, local_result = protocol.check_output(local.stdout, local.returncode)
            if local_result["steps_run"] != 100 or local_result["trial_id"] != "local":
                problems.append(f"the local run ran {local_result['steps_run']} steps as {local_result['trial_id']}")
        except protocol.ProtocolError as e:
            problems.append(f"the local run broke the protocol: {e}; stderr: {local.stderr[-2000:]}")
    if problems:
        sys.exit("docs/byo-model.md's example: " + "; ".join(problems))
    print(f"docs/byo-model.md's example ran as a trial ({result['steps_run']} steps, val_accuracy "
          f"{result['val_accuracy']:.3f}, {result['flops']['train_per_step']:.3g} FLOPs a step) and locally")


if __name__ == "__main__":
    main()
