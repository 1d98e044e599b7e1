#!/usr/bin/env bash
# Makes the Secrets the manifests reference and prints them (after their
# Namespace) as YAML, for `kubectl apply -f -`. Keeps the generated material in DIR (default
# ./frontier-secrets, mode 0700) and reuses what is already there, so running
# it again prints the same Secrets. Users need DIR/user.token (and DIR/ca.crt
# with --tls) for the CLI.
#   make-secrets.sh [--tls] [--namespace NS] [--dir DIR] [--service NAME] | kubectl apply -f -
# Secrets: frontier-tokens (user-token, worker-token), frontier-postgres
# (password), with --tls frontier-tls (tls.crt, tls.key, ca.crt: a private CA
# and a server certificate for the coordinator Service's names and localhost,
# for port-forwarding). Bring your
# own certificate (cert-manager, a company CA) by creating frontier-tls with
# the same keys instead.
set -euo pipefail
tls=0 namespace=frontier dir=./frontier-secrets service=frontier-coordinator
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tls) tls=1; shift ;;
    --namespace) namespace="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --service) service="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "make-secrets.sh: unknown argument '$1'" >&2; exit 64 ;;
  esac
done
umask 077
mkdir -p "$dir"
random() { [[ -s "$1" ]] || head -c 32 /dev/urandom | base64 | tr -d '/+=\n' > "$1"; }
random "$dir/user.token"
random "$dir/worker.token"
random "$dir/postgres.password"
b64() { base64 -w0 < "$1"; }
secret() {  # secret NAME KEY=FILE...
  local name=$1; shift
  printf -- '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: %s\n' "$name" "$namespace"
  printf '  labels:\n    app.kubernetes.io/part-of: frontier\ntype: Opaque\ndata:\n'
  for pair in "$@"; do printf '  %s: %s\n' "${pair%%=*}" "$(b64 "${pair#*=}")"; done
}
# The namespace first, so that the Secrets can be applied before the manifests.
printf -- '---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n' "$namespace"
secret frontier-tokens user-token="$dir/user.token" worker-token="$dir/worker.token"
secret frontier-postgres password="$dir/postgres.password"
if [[ $tls -eq 1 ]]; then
  if [[ ! -s "$dir/ca.crt" ]]; then
    openssl req -x509 -newkey rsa:3072 -nodes -days 3650 -subj "/CN=frontier-ca" \
      -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
  fi
  if [[ ! -s "$dir/tls.crt" ]]; then
    # The Service's names, and localhost for `kubectl port-forward` (the CLI checks the name it dials).
    names="DNS:$service,DNS:$service.$namespace,DNS:$service.$namespace.svc,DNS:$service.$namespace.svc.cluster.local"
    names="$names,DNS:localhost,IP:127.0.0.1"
    openssl req -newkey rsa:3072 -nodes -subj "/CN=$service" -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$names" > "$dir/tls.ext"
    openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 825 \
      -extfile "$dir/tls.ext" -out "$dir/tls.crt" 2>/dev/null
    rm -f "$dir/tls.csr" "$dir/tls.ext"
  fi
  secret frontier-tls tls.crt="$dir/tls.crt" tls.key="$dir/tls.key" ca.crt="$dir/ca.crt"
fi
echo "make-secrets.sh: material in $dir (keep it private); the CLI uses $dir/user.token" >&2
