#!/usr/bin/env bash
# Offline validation of the Kubernetes manifests (deploy/kubernetes):
#  1. yamllint over deploy/;
#  2. kustomize (kubectl's built-in) renders the base and each overlay;
#  3. every rendered object, and the Secrets of make-secrets.sh, against the
#     Kubernetes OpenAPI schemas (kubernetes-models, prometheus-operator
#     models, via npm), plus a strict unknown-field pass (validate_k8s.mjs);
#  4. check_manifests.py: references resolve, flags exist in the binaries'
#     --help, GPU/drain/metrics/TLS invariants, dashboards equal metrics/'s.
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
NODE_PATH="$modules" node "$here/validate_k8s.mjs" "$work"/base.yaml "$work"/cpu-dev.yaml "$work"/gpu-cluster.yaml \
  "$work/secrets.yaml" "$src/deploy/kubernetes/components/prometheus-operator/podmonitor.yaml"
# The validator must catch what it claims to: a wrong type and a misspelt field.
sed -e '0,/containerPort: 9465/s//containerPort: metrics/' -e '0,/readinessProbe:/s//readinesProbe:/' \
  "$work/base.yaml" > "$work/broken.yaml"
if NODE_PATH="$modules" node "$here/validate_k8s.mjs" "$work/broken.yaml" > "$work/broken.out" 2>&1; then
  echo "FAIL: the schema check accepted a broken manifest"; cat "$work/broken.out"; exit 1
fi
if ! grep -q "must be integer" "$work/broken.out" || ! grep -q "readinesProbe: unknown field" "$work/broken.out"; then
  echo "FAIL: the schema check missed a planted error"; cat "$work/broken.out"; exit 1
fi
echo "  (a planted type error and a misspelt field are caught)"

echo "== structure"
"$build/server/frontier-server" --help > "$work/server-help.txt"
"$build/worker/frontier-worker" --help > "$work/worker-help.txt"
for t in "${targets[@]}"; do
  name="$(basename "$t")"
  /usr/bin/python3 "$here/check_manifests.py" "$name" "$work/$name.yaml" "$work/secrets.yaml" \
    "$work/server-help.txt" "$work/worker-help.txt" "$src/metrics/grafana/dashboards"
done
echo "manifests ok"
