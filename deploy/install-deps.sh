#!/usr/bin/env bash
# Installs every Debian package Frontier needs to build, run and test.
# Idempotent and quiet when everything is already present.
#   deploy/install-deps.sh            build + run + test packages
#   deploy/install-deps.sh --runner   only what the trial runner needs
set -euo pipefail

runner_packages=(
  build-essential cmake pkg-config zlib1g-dev
  libtorch-dev libopenblas0-pthread nlohmann-json3-dev
  libgloo-dev  # the gloo headers c10d's ProcessGroupGloo.hpp includes (data-parallel trials)
  dataset-fashion-mnist
)
all_packages=(
  "${runner_packages[@]}"
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libpqxx-dev prometheus-cpp-dev libyaml-cpp-dev libcli11-dev libspdlog-dev
  libsqlite3-dev libjemalloc-dev libgtest-dev libgmock-dev googletest
  postgresql prometheus python3-torch python3-optuna python3-psycopg2 openssl
  chromium python3-yaml
  python3-venv python3-pip python3-setuptools  # the SDK's offline install (docs/byo-model.md)
  # deployment checks (tests/deploy): network namespaces, linters, the CUDA
  # image's library bundling, gRPC health probes, systemd-analyze
  iproute2 yamllint shellcheck patchelf binutils python3-grpcio systemd
  # the libFuzzer harnesses and sanitizer builds (tests/fuzz/ci.sh)
  clang-14 libclang-rt-14-dev
)
# The npm validators of tests/deploy need node and npm; keep a node that is
# already installed (the machine image's) rather than Debian's.
if ! command -v npm > /dev/null 2>&1; then all_packages+=(nodejs npm); fi
# kubectl (kustomize) is not in Debian 12 (kubernetes-client 1.20 is too old
# for these manifests); the test machines' image has it.

packages=("${all_packages[@]}")
if [[ "${1:-}" == "--runner" ]]; then packages=("${runner_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
