#!/usr/bin/env bash
# Offline validation of the Kubernetes manifests (deploy/kubernetes):
#  1. yamllint over deploy/;
#  2. kustomize (kubectl's built-in) renders the base and each overlay;
#  3. every rendered object, the Secrets of make-secrets.sh and the examples
#     (deploy/kubernetes/examples/*.yaml, applied as they are) against the
#     Kubernetes OpenAPI schemas (kubernetes-models, prometheus-operator
#     models, via npm), plus a strict unknown-field pass (validate_k8s.mjs);
#  4. check_manifests.py: references resolve, flags exist in the binaries'
#     --help, GPU/drain/metrics/TLS invariants, dashboards equal metrics/'s;
#     for the examples' Indexed Job the rendezvous of its frontier-trial
#     ranks (RANK from the completion index, WORLD_SIZE, rank 0's DNS name
#     through a headless Service, the port, the spec's ranks).
# kubectl's client-side dry run is not offline (it asks a server for the
# schemas), hence 3.
#   manifests_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"; src="$(cd "$2" && pwd)"
here="$src/tests/deploy"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
# kubectl (its built-in kustomize) is not a Debian package: where the machine
# image lacks it, the test is skipped (77) rather than passed.
command -v kubectl > /dev/null || { echo "SKIP: kubectl is not installed; kustomize rendering and the schema check need it"; exit 77; }
for tool in yamllint node; do
  command -v "$tool" > /dev/null || { echo "FAIL: $tool is not installed (deploy/install-deps.sh; kubectl comes with the machine image)"; exit 1; }
done
kubectl version --client 2>/dev/null | sed 's/^/  /'

echo "== yamllint"
yamllint -c "$src/deploy/.yamllint" --strict "$src/deploy" "$here/rehearsal.yaml"

echo "== kustomize"
targets=(base overlays/cpu-dev overlays/gpu-cluster)
for t in "${targets[@]}"; do
  out="$work/$(basename "$t").yaml"
  kubectl kustomize "$src/deploy/kubernetes/$t" > "$out"
  echo "  $t: $(grep -c '^kind:' "$out") objects"
done
"$src/deploy/kubernetes/make-secrets.sh" --tls --dir "$work/secrets" > "$work/secrets.yaml" 2>/dev/null

echo "== schemas"
modules="$("$here/npm-deps.sh" "$build/deploy-npm")/node_modules"
examples=("$src"/deploy/kubernetes/examples/*.yaml)
NODE_PATH="$modules" node "$here/validate_k8s.mjs" "$work"/base.yaml "$work"/cpu-dev.yaml "$work"/gpu-cluster.yaml \
  "$work/secrets.yaml" "$src/deploy/kubernetes/components/prometheus-operator/podmonitor.yaml" "${examples[@]}"
# The validator must catch what it claims to: a wrong type and a misspelt field.
sed -e '0,/containerPort: 9465/s//containerPort: metrics/' -e '0,/readinessProbe:/s//readinesProbe:/' \
  "$work/base.yaml" > "$work/broken.yaml"
if NODE_PATH="$modules" node "$here/validate_k8s.mjs" "$work/broken.yaml" > "$work/broken.out" 2>&1; then
  echo "FAIL: the schema check accepted a broken manifest"; cat "$work/broken.out"; exit 1
fi
if ! grep -q "must be integer" "$work/broken.out" || ! grep -q "readinesProbe: unknown field" "$work/broken.out"; then
  echo "FAIL: the schema check missed a planted error"; cat "$work/broken.out"; exit 1
fi
# ... also inside a Job's pod template.
job="$src/deploy/kubernetes/examples/trial-indexed-job.yaml"
sed -e 's/^      subdomain:/      subDomain:/' -e 's/^  completions: 2$/  completions: "2"/' "$job" > "$work/broken-job.yaml"
if NODE_PATH="$modules" node "$here/validate_k8s.mjs" "$work/broken-job.yaml" > "$work/broken.out" 2>&1; then
  echo "FAIL: the schema check accepted a broken Job"; cat "$work/broken.out"; exit 1
fi
grep -q "completions must be integer" "$work/broken.out" || { echo "FAIL: a string completions passed"; cat "$work/broken.out"; exit 1; }
sed -e 's/^      subdomain:/      subDomain:/' "$job" > "$work/broken-job.yaml"
NODE_PATH="$modules" node "$here/validate_k8s.mjs" "$work/broken-job.yaml" > "$work/broken.out" 2>&1 || true
grep -q "template.spec.subDomain: unknown field" "$work/broken.out" || { echo "FAIL: a misspelt pod field in a Job passed"; cat "$work/broken.out"; exit 1; }
echo "  (a planted type error and a misspelt field are caught, in a Deployment and in a Job)"

echo "== structure"
"$build/server/frontier-server" --help > "$work/server-help.txt"
"$build/worker/frontier-worker" --help > "$work/worker-help.txt"
for t in "${targets[@]}"; do
  name="$(basename "$t")"
  /usr/bin/python3 "$here/check_manifests.py" "$name" "$work/$name.yaml" "$work/secrets.yaml" \
    "$work/server-help.txt" "$work/worker-help.txt" "$src/metrics/grafana/dashboards"
done
# frontier-trial's flags, where it was built (it needs LibTorch).
trial_help=()
if [[ -x "$build/worker/frontier-trial" ]]; then
  "$build/worker/frontier-trial" --help > "$work/trial-help.txt"; trial_help=("$work/trial-help.txt")
fi
structure() {  # structure NAME FILE: check_manifests.py on one example file
  /usr/bin/python3 "$here/check_manifests.py" "examples/$1" "$2" "$work/secrets.yaml" \
    "$work/server-help.txt" "$work/worker-help.txt" "$src/metrics/grafana/dashboards" "${trial_help[@]}"
}
for f in "${examples[@]}"; do structure "$(basename "$f" .yaml)" "$f"; done
# The Indexed Job's rendezvous rules must catch what they claim to.
sed -e 's/value: frontier-dp-trial-0.frontier-dp-trial$/value: frontier-dp-trial-1.frontier-dp-trial/' \
    -e '0,/value: "2"/s//value: "3"/' -e 's/^  publishNotReadyAddresses: true$/  publishNotReadyAddresses: false/' \
    -e 's/"ranks": 2/"ranks": 4/' -e "s/job-completion-index/job-index/" -e 's/^  backoffLimit: 0$/  backoffLimit: 6/' \
    "$job" > "$work/broken-job.yaml"
if structure broken "$work/broken-job.yaml" > "$work/broken.out" 2>&1; then
  echo "FAIL: check_manifests.py accepted a broken Indexed Job"; cat "$work/broken.out"; exit 1
fi
for want in "MASTER_ADDR 'frontier-dp-trial-1.frontier-dp-trial' is not rank 0's" "WORLD_SIZE is '3'" \
            "lacks publishNotReadyAddresses" "runtime.ranks is 4" "RANK must come from the pod's completion index" \
            "backoffLimit must be 0"; do
  grep -q "$want" "$work/broken.out" || { echo "FAIL: check_manifests.py missed: $want"; cat "$work/broken.out"; exit 1; }
done
echo "  (six planted errors of the Indexed Job's rendezvous are caught)"
# The coordinator's artifact store in an emptyDir (it would die with the pod) is caught.
/usr/bin/python3 - "$work/base.yaml" "$work/broken-artifacts.yaml" <<'PY'
import sys, yaml
objects = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
for o in objects:
    if o["kind"] == "Deployment" and o["metadata"]["name"] == "frontier-coordinator":
        for v in o["spec"]["template"]["spec"]["volumes"]:
            if v["name"] == "artifacts":
                v.pop("persistentVolumeClaim")
                v["emptyDir"] = {}
yaml.safe_dump_all(objects, open(sys.argv[2], "w"))
PY
if /usr/bin/python3 "$here/check_manifests.py" base "$work/broken-artifacts.yaml" "$work/secrets.yaml" \
    "$work/server-help.txt" "$work/worker-help.txt" "$src/metrics/grafana/dashboards" > "$work/broken.out" 2>&1; then
  echo "FAIL: check_manifests.py accepted an artifact store in an emptyDir"; cat "$work/broken.out"; exit 1
fi
grep -q "is not a mounted PersistentVolumeClaim" "$work/broken.out" || { echo "FAIL: wrong complaint"; cat "$work/broken.out"; exit 1; }
echo "  (an artifact store in an emptyDir is caught)"
echo "manifests ok"
