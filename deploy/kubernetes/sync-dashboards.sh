#!/usr/bin/env bash
# Copies the Grafana dashboards of metrics/grafana/dashboards into the
# Kubernetes base (kustomize's configMapGenerator reads files only from inside
# the kustomization folder). Run after changing a dashboard;
# tests/deploy/manifests_test.sh fails while the copies differ.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="$root/deploy/kubernetes/base/grafana"
rm -f "$dest"/*.json
cp "$root"/metrics/grafana/dashboards/*.json "$dest/"
ls "$dest"
