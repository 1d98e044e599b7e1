#!/usr/bin/env python3
"""Rehearses deploy/kubernetes/examples/trial-indexed-job.yaml without a
cluster: one frontier-trial process per completion index, each started with
the Job's container command, arguments and environment as the kubelet would
resolve them (RANK from the completion-index annotation, status.podIP =
127.0.0.1), the spec from the ConfigMap (shortened to a few steps), and rank
0's DNS name (MASTER_ADDR) answered by 127.0.0.1, since there is no cluster
DNS here. Checks that the ranks meet and finish: every process exits 0,
rank 0 prints a completed result holding every rank's figures
(distributed.per_rank), the other ranks print nothing on stdout.

  indexed_job_rehearsal.py BUILD_DIR SOURCE_DIR      exit 77: frontier-trial not built
"""
import json
import os
import socket
import subprocess
import sys
import tempfile

import yaml

build, src = sys.argv[1:3]
trial = os.path.join(build, "worker", "frontier-trial")
if not os.access(trial, os.X_OK):
    print(f"SKIP: no {trial} (a build without LibTorch)")
    sys.exit(77)
example = os.path.join(src, "deploy", "kubernetes", "examples", "trial-indexed-job.yaml")
objects = [o for o in yaml.safe_load_all(open(example)) if o]
job = next(o for o in objects if o["kind"] == "Job")
config_maps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
pod = job["spec"]["template"]["spec"]
container = next(c for c in pod["containers"] if c["command"][0] == "frontier-trial")
n = job["spec"]["completions"]
rank0 = f"{job['metadata']['name']}-0.{pod['subdomain']}"


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


work = tempfile.mkdtemp()
# The spec file where the ConfigMap volume is mounted, shortened.
mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
files = {}
for volume in pod["volumes"]:
    if "configMap" in volume:
        data = config_maps[volume["configMap"]["name"]]["data"]
        for item in volume["configMap"].get("items", [{"key": k, "path": k} for k in data]):
            files[os.path.join(mounts[volume["name"]], item["path"])] = data[item["key"]]
args = []
for a in container.get("args", []):
    if a.startswith("--spec="):
        spec = json.loads(files[a.split("=", 1)[1]])
        spec["task"].update(steps=4, eval_every=0, warmup_steps=1, val_size=500)
        spec["runtime"]["threads"] = 1  # two ranks on this machine's cores
        spec["latency"] = {"repetitions": 0}
        path = os.path.join(work, "spec.json")
        json.dump(spec, open(path, "w"))
        a = "--spec=" + path
    args.append(a)
if not any(a.startswith("--spec=") for a in args):
    fail("the Job's frontier-trial has no --spec=FILE in a ConfigMap")


def environment(index):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for e in container.get("env", []):
        if "value" in e:
            value = e["value"]
        else:
            path = e["valueFrom"]["fieldRef"]["fieldPath"]
            if path == "metadata.annotations['batch.kubernetes.io/job-completion-index']":
                value = str(index)
            elif path == "status.podIP":
                value = "127.0.0.1"
            else:
                fail(f"env {e['name']}: fieldRef {path} is not rehearsed here")
        env[e["name"]] = value
    if env.get("MASTER_ADDR") != rank0:
        fail(f"MASTER_ADDR {env.get('MASTER_ADDR')!r} is not rank 0's name {rank0}")
    env["MASTER_ADDR"] = "127.0.0.1"  # what rank 0's DNS name resolves to here
    env["MASTER_PORT"] = str(port)
    env["HOME"] = work
    env["FRONTIER_DIST_TIMEOUT_S"] = "120"
    return env


# A free port for MASTER_PORT (the Job's fixed one may be taken on this machine).
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
processes = [subprocess.Popen([trial, *args], env=environment(i), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(n)]
outputs = []
for i, p in enumerate(processes):
    try:
        out, err = p.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        for q in processes:
            q.kill()
        fail(f"rank {i} did not finish within 600 s")
    outputs.append((p.returncode, out, err))
for i, (code, out, err) in enumerate(outputs):
    if code != 0:
        fail(f"rank {i} exited {code}: {err[-2000:]}")
    if i > 0 and out.strip():
        fail(f"rank {i} printed on stdout (only rank 0 may): {out[:500]}")
lines = [json.loads(line) for line in outputs[0][1].splitlines() if line.strip()]
result = next((line for line in lines if line.get("event") == "result"), None)
if result is None or result.get("status") != "completed":
    fail(f"rank 0 printed no completed result: {outputs[0][1][-2000:]}")
# Rank 0 aggregates every rank's figures (result.distributed.per_rank).
per_rank = (result.get("distributed") or {}).get("per_rank") or []
if sorted(r.get("rank") for r in per_rank) != list(range(n)):
    fail(f"rank 0's result does not hold the figures of ranks 0..{n - 1}: {json.dumps(result)[:1500]}")
print(f"indexed job rehearsal: {n} ranks met through RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT as the Job sets them;"
      f" rank 0's result: completed, {result.get('steps_run')} steps,"
      f" per-rank {result.get('throughput', {}).get('per_rank_samples_per_s')} samples/s")
