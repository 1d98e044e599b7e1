#!/usr/bin/env python3
"""Checks what the schemas cannot: that a rendered Frontier overlay hangs
together and matches the real programs.

  check_manifests.py OVERLAY RENDERED.yaml SECRETS.yaml SERVER_HELP WORKER_HELP DASHBOARDS_DIR [TRIAL_HELP]

OVERLAY examples/NAME checks an example file (deploy/kubernetes/examples/)
instead of a rendered overlay: everything below that applies to its objects,
no dashboards, and for an Indexed Job of frontier-trial ranks (the
data-parallel rendezvous) the rules in check_indexed_job. TRIAL_HELP is
frontier-trial's --help (where it was built), for its flags.

- every Secret, ConfigMap and key a pod refers to exists (Secrets: as made by
  deploy/kubernetes/make-secrets.sh --tls), every Service selects pods and
  names their ports, every probe targets a declared port;
- every flag in a frontier-server / frontier-worker command line is a flag
  that binary's --help lists; token and certificate files are inside mounted
  volumes; no secret value on a command line;
- pods run as non-root without privilege escalation;
- Prometheus: the labels and "metrics" port names that
  metrics/prometheus-kubernetes.yml relies on, scrape annotations that point
  at the metrics port;
- the coordinator's --artifacts-dir is a mounted PersistentVolumeClaim that
  the overlay defines (never an emptyDir: artifacts must outlive the pod);
- workers: a grace period longer than the drain timeout; in gpu-cluster one
  nvidia.com/gpu per pod, a node selector, a GPU toleration, --device=cuda;
- the dashboards ConfigMap holds exactly metrics/grafana/dashboards/*.json
  (overlays only).
Exit 1 with one line per problem.
"""
import json
import os
import re
import sys

import yaml

overlay, rendered_file, secrets_file, server_help_file, worker_help_file, dashboards_dir = sys.argv[1:7]
trial_help_file = sys.argv[7] if len(sys.argv) > 7 else None
example = overlay.startswith("examples/")
problems = []


def problem(message):
    problems.append(f"{overlay}: {message}")


objects = [o for o in yaml.safe_load_all(open(rendered_file)) if o]
secrets = {o["metadata"]["name"]: o for o in yaml.safe_load_all(open(secrets_file)) if o and o["kind"] == "Secret"}
config_maps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
claims = {o["metadata"]["name"] for o in objects if o["kind"] == "PersistentVolumeClaim"}
names = [(o["kind"], o["metadata"]["name"]) for o in objects]
for duplicate in {n for n in names if names.count(n) > 1}:
    problem(f"{duplicate} defined twice")


def help_flags(path):
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", open(path).read()))


flags_of = {"frontier-server": help_flags(server_help_file), "frontier-worker": help_flags(worker_help_file)}
if trial_help_file:
    flags_of["frontier-trial"] = help_flags(trial_help_file)
services = ("frontier-server", "frontier-worker")  # the long-running programs with /metrics
workloads = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job")]


def arg_value(args, flag, default=None):
    value = default
    for a in args:
        if a.startswith(flag + "="):
            value = a.split("=", 1)[1]
    return value


for w in workloads:
    name = f"{w['kind']}/{w['metadata']['name']}"
    template = w["spec"]["template"]
    labels = template["metadata"].get("labels", {})
    for k, v in w["spec"].get("selector", {}).get("matchLabels", {}).items():
        if labels.get(k) != v:
            problem(f"{name}: selector {k}={v} does not match its pod labels")
    pod = template["spec"]
    security = pod.get("securityContext", {})
    if not security.get("runAsNonRoot"):
        problem(f"{name}: pod does not set runAsNonRoot")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    volumes.update({t["metadata"]["name"]: {"name": t["metadata"]["name"], "persistentVolumeClaim": {}}
                    for t in w["spec"].get("volumeClaimTemplates", [])})
    for v in volumes.values():
        if "secret" in v:
            s = secrets.get(v["secret"]["secretName"])
            if not s:
                problem(f"{name}: volume {v['name']} uses Secret {v['secret']['secretName']}, which make-secrets.sh does not make")
            else:
                for item in v["secret"].get("items", []):
                    if item["key"] not in s["data"]:
                        problem(f"{name}: Secret {s['metadata']['name']} has no key {item['key']}")
        if "configMap" in v and v["configMap"]["name"] not in config_maps:
            problem(f"{name}: volume {v['name']} uses missing ConfigMap {v['configMap']['name']}")
    for c in pod["containers"]:
        cname = f"{name}/{c['name']}"
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
        if c.get("securityContext", {}).get("allowPrivilegeEscalation") is not False:
            problem(f"{cname}: allowPrivilegeEscalation is not false")
        mounts = {}
        for m in c.get("volumeMounts", []):
            if m["name"] not in volumes:
                problem(f"{cname}: mounts undefined volume {m['name']}")
            mounts[m["mountPath"]] = volumes.get(m["name"], {})
        for ref in c.get("envFrom", []):
            if "configMapRef" in ref and ref["configMapRef"]["name"] not in config_maps:
                problem(f"{cname}: envFrom missing ConfigMap {ref['configMapRef']['name']}")
            if "secretRef" in ref and ref["secretRef"]["name"] not in secrets:
                problem(f"{cname}: envFrom missing Secret {ref['secretRef']['name']}")
        for e in c.get("env", []):
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref and ref["key"] not in secrets.get(ref["name"], {}).get("data", {}):
                problem(f"{cname}: env {e['name']} uses missing Secret key {ref['name']}/{ref['key']}")
            ref = e.get("valueFrom", {}).get("configMapKeyRef")
            if ref and ref["key"] not in config_maps.get(ref["name"], {}).get("data", {}):
                problem(f"{cname}: env {e['name']} uses missing ConfigMap key {ref['name']}/{ref['key']}")
        for probe_name in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = c.get(probe_name)
            if not probe:
                continue
            if "grpc" in probe and probe["grpc"]["port"] not in ports.values():
                problem(f"{cname}: {probe_name} gRPC port {probe['grpc']['port']} is not a container port")
            for kind in ("httpGet", "tcpSocket"):
                if kind in probe:
                    port = probe[kind]["port"]
                    if port not in ports and port not in ports.values():
                        problem(f"{cname}: {probe_name} port {port} is not a container port")
            if "exec" in probe and probe["exec"]["command"][0] not in ("grpc-health-check", "pg_isready"):
                problem(f"{cname}: {probe_name} runs unexpected {probe['exec']['command'][0]}")

        program = (c.get("command") or [""])[0]
        args = c.get("args", [])
        if program in flags_of:
            for a in args:
                if not a.startswith("--") or "=" not in a:
                    problem(f"{cname}: argument {a!r} is not in --flag=value form")
                    continue
                flag, value = a.split("=", 1)
                if flag not in flags_of[program]:
                    problem(f"{cname}: {program} has no flag {flag} (not in its --help)")
                if "token" in flag and not flag.endswith("-file"):
                    problem(f"{cname}: {flag} puts a secret on the command line")
                if flag.endswith("-file") or flag in ("--tls-cert", "--tls-key", "--tls-ca", "--tls-client-ca"):
                    folder, base = os.path.split(value)
                    volume = mounts.get(folder)
                    if volume is None:
                        problem(f"{cname}: {flag} file {value} is not in a mounted volume")
                    elif "secret" in volume:
                        items = [i["path"] for i in volume["secret"].get("items", [])]
                        if items and base not in items:
                            problem(f"{cname}: {flag} file {base} is not an item of Secret volume {volume['name']}")
        annotations = template["metadata"].get("annotations", {})
        component = labels.get("app.kubernetes.io/component")
        if program == "frontier-trial" and program not in flags_of:
            print(f"check_manifests: {cname}: frontier-trial was not built here, its flags are not checked")
        if program in services:
            if labels.get("app.kubernetes.io/part-of") != "frontier" or component not in ("coordinator", "worker"):
                problem(f"{cname}: pod labels do not match metrics/prometheus-kubernetes.yml (part-of, component)")
            metrics_listen = arg_value(args, "--metrics-listen", "")
            if "metrics" not in ports:
                problem(f"{cname}: no container port named metrics")
            elif not metrics_listen.endswith(f":{ports['metrics']}") or not metrics_listen.startswith("0.0.0.0:"):
                problem(f"{cname}: --metrics-listen {metrics_listen!r} does not serve the metrics port {ports['metrics']} on all addresses")
            if annotations.get("prometheus.io/scrape") != "true" or annotations.get("prometheus.io/port") != str(ports.get("metrics")):
                problem(f"{cname}: prometheus.io annotations do not point at the metrics port")
        if program == "frontier-worker":
            drain = float(arg_value(args, "--drain-timeout", "600"))
            grace = pod.get("terminationGracePeriodSeconds", 30)
            if grace <= drain:
                problem(f"{cname}: terminationGracePeriodSeconds {grace} is not longer than --drain-timeout {drain:g}")
            if overlay == "gpu-cluster":
                limits = c.get("resources", {}).get("limits", {})
                if str(limits.get("nvidia.com/gpu")) != "1":
                    problem(f"{cname}: limits nvidia.com/gpu is {limits.get('nvidia.com/gpu')}, expected 1")
                if arg_value(args, "--device") != "cuda" or arg_value(args, "--slots", "1") != "1":
                    problem(f"{cname}: a GPU worker needs --device=cuda and one slot")
                if not pod.get("nodeSelector"):
                    problem(f"{cname}: no nodeSelector for GPU nodes")
                if not any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])):
                    problem(f"{cname}: no toleration for nvidia.com/gpu taints")
            if overlay == "gpu-cluster" and not arg_value(args, "--tls-ca"):
                problem(f"{cname}: gpu-cluster worker without --tls-ca")
        if program == "frontier-server" and not example:
            # The artifact store must outlive the pod: a mounted PersistentVolumeClaim.
            store = arg_value(args, "--artifacts-dir", "artifacts")
            volume = mounts.get(store.rstrip("/"))
            if volume is None or "persistentVolumeClaim" not in volume:
                problem(f"{cname}: --artifacts-dir {store} is not a mounted PersistentVolumeClaim (artifacts would die with the pod)")
            elif volume["persistentVolumeClaim"].get("claimName") not in claims:
                problem(f"{cname}: volume {volume['name']} claims missing PersistentVolumeClaim {volume['persistentVolumeClaim'].get('claimName')}")
        if program == "frontier-server" and overlay == "gpu-cluster":
            if not arg_value(args, "--tls-cert") or any("grpc" in c.get(p, {}) for p in ("readinessProbe", "livenessProbe")):
                problem(f"{cname}: TLS coordinator must use --tls-cert and exec (not native gRPC) probes")

pods = [(w, w["spec"]["template"]) for w in workloads]
for s in (o for o in objects if o["kind"] == "Service"):
    selected = [t for _, t in pods if all(t["metadata"].get("labels", {}).get(k) == v for k, v in s["spec"]["selector"].items())]
    if not selected:
        problem(f"Service/{s['metadata']['name']} selects no pods")
    for p in s["spec"]["ports"]:
        target = p.get("targetPort", p["port"])
        for t in selected:
            declared = [(q.get("name"), q["containerPort"]) for c in t["spec"]["containers"] for q in c.get("ports", [])]
            if not any(target in pair for pair in declared):
                problem(f"Service/{s['metadata']['name']} port {p['name']}: no container port {target}")



def cpus(quantity):
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def check_indexed_job(job):
    """The data-parallel rendezvous of frontier-trial ranks as an Indexed Job
    (RendezvousFromEnvironment reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)."""
    name = f"Job/{job['metadata']['name']}"
    spec, template = job["spec"], job["spec"]["template"]
    pod, labels = template["spec"], template["metadata"].get("labels", {})
    n = spec.get("completions")
    if not isinstance(n, int) or n < 1 or spec.get("parallelism") != n:
        problem(f"{name}: completions and parallelism must be the same N (every rank runs at once)")
    if spec.get("backoffLimit") != 0:
        problem(f"{name}: backoffLimit must be 0 (a restarted rank cannot rejoin the others; the trial fails)")
    if pod.get("restartPolicy") != "Never":
        problem(f"{name}: restartPolicy must be Never")
    subdomain = pod.get("subdomain")
    service = next((o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == subdomain), None)
    if service is None:
        problem(f"{name}: subdomain {subdomain!r} is no Service here: rank 0 has no stable DNS name")
    else:
        if service["spec"].get("clusterIP") != "None":
            problem(f"{name}: Service/{subdomain} is not headless (clusterIP: None): no per-pod DNS records")
        if not service["spec"].get("publishNotReadyAddresses"):
            problem(f"{name}: Service/{subdomain} lacks publishNotReadyAddresses: rank 0's name would wait for readiness")
        if any(labels.get(k) != v for k, v in service["spec"].get("selector", {}).items()):
            problem(f"{name}: Service/{subdomain} does not select the Job's pods")
    trials = [c for c in pod["containers"] if (c.get("command") or [""])[0] == "frontier-trial"]
    if len(trials) != 1:
        problem(f"{name}: expected one frontier-trial container, found {len(trials)}")
        return
    c = trials[0]
    env = {e["name"]: e for e in c.get("env", [])}
    for shadowing in ("FRONTIER_RANK", "FRONTIER_WORLD_SIZE", "FRONTIER_RENDEZVOUS"):
        if shadowing in env:
            problem(f"{name}: {shadowing} would take precedence over RANK/WORLD_SIZE/MASTER_ADDR")
    index_path = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    if env.get("RANK", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != index_path:
        problem(f"{name}: RANK must come from the pod's completion index ({index_path})")
    if env.get("WORLD_SIZE", {}).get("value") != str(n):
        problem(f"{name}: WORLD_SIZE is {env.get('WORLD_SIZE', {}).get('value')!r}, the Job has {n} completions")
    rank0 = f"{job['metadata']['name']}-0.{subdomain}"
    address = env.get("MASTER_ADDR", {}).get("value", "")
    if address != rank0 and not address.startswith(rank0 + "."):
        problem(f"{name}: MASTER_ADDR {address!r} is not rank 0's DNS name {rank0}")
    port = env.get("MASTER_PORT", {}).get("value", "")
    if not port.isdigit() or int(port) not in [q["containerPort"] for q in c.get("ports", [])]:
        problem(f"{name}: MASTER_PORT {port!r} is not a container port")
    elif service is not None and int(port) not in [q.get("port") for q in service["spec"].get("ports", [])]:
        problem(f"{name}: Service/{subdomain} has no port {port}")
    spec_path = next((a.split("=", 1)[1] for a in c.get("args", []) if a.startswith("--spec=")), None)
    if spec_path is None:
        problem(f"{name}: frontier-trial has no --spec=FILE")
        return
    folder, base = os.path.split(spec_path)
    mount = next((m for m in c.get("volumeMounts", []) if m["mountPath"] == folder), None)
    volume = next((v for v in pod.get("volumes", []) if mount and v["name"] == mount["name"]), {})
    config_map = config_maps.get(volume.get("configMap", {}).get("name"))
    if config_map is None:
        problem(f"{name}: --spec {spec_path} is not in a mounted ConfigMap of this file")
        return
    items = volume["configMap"].get("items")
    key = next((i["key"] for i in items if i["path"] == base), None) if items else base
    if key not in config_map.get("data", {}):
        problem(f"{name}: ConfigMap/{config_map['metadata']['name']} has no key for {base}")
        return
    try:
        runtime = json.loads(config_map["data"][key]).get("runtime", {})
    except ValueError as e:
        problem(f"{name}: the spec in ConfigMap/{config_map['metadata']['name']} is not JSON: {e}")
        return
    ranks, nodes = runtime.get("ranks", 1), runtime.get("nodes", 1)
    if ranks != n:
        problem(f"{name}: the spec's runtime.ranks is {ranks}, the Job runs {n} ranks")
    if not isinstance(nodes, int) or not 1 <= nodes <= ranks:
        problem(f"{name}: the spec's runtime.nodes {nodes} is not within 1..ranks")
    threads = runtime.get("threads", 0)
    limit = c.get("resources", {}).get("limits", {}).get("cpu")
    if not isinstance(threads, int) or threads < 1 or (limit is not None and threads > cpus(limit)):
        problem(f"{name}: the spec's runtime.threads {threads} must be 1..the pod's CPU limit {limit} "
                "(0 would mean every core of the node)")


for job in (o for o in objects if o["kind"] == "Job" and o["spec"].get("completionMode") == "Indexed"):
    check_indexed_job(job)

dashboards = config_maps.get("frontier-grafana-dashboards")
if example:
    pass
elif not dashboards:
    problem("no frontier-grafana-dashboards ConfigMap")
else:
    want = {f for f in os.listdir(dashboards_dir) if f.endswith(".json")}
    if set(dashboards["data"]) != want:
        problem(f"dashboards ConfigMap holds {sorted(dashboards['data'])}, metrics/ has {sorted(want)}")
    for f in want & set(dashboards["data"]):
        if json.loads(dashboards["data"][f]) != json.load(open(os.path.join(dashboards_dir, f))):
            problem(f"dashboard {f} differs from metrics/grafana/dashboards/{f} (run deploy/kubernetes/sync-dashboards.sh)")

for p in problems:
    print("FAIL:", p)
kinds = sorted({f"{k}" for k, _ in names})
print(f"check_manifests: {overlay}: {len(objects)} objects ({', '.join(kinds)}), {len(problems)} problems")
sys.exit(1 if problems else 0)
