#!/usr/bin/env bash
# Offline checks of the container files (deploy/docker); no image is built
# (no registry, no daemon here):
#  1. shellcheck of the deploy scripts, dockerfile-utils lint (npm) of each Dockerfile;
#  2. check_dockerfiles.py: stage references, COPY sources vs .dockerignore,
#     non-root USER, HEALTHCHECK, exec ENTRYPOINT, Debian package names, and
#     the runtime stages' packages against the libraries of the binaries built here;
#  3. each build stage's CMake configure on exactly the files its COPY lines
#     bring in, with its own -D options (Debian's LibTorch standing in for
#     PyTorch's in the CUDA image's runner-only stage);
#  4. the CUDA image's agent bundle (bundle-libs.sh): self-contained, runs
#     with an empty environment, needs no newer glibc/libstdc++ than the
#     PyTorch images' Ubuntu 22.04 has;
#  5. the images' health checks against a live coordinator.
#   dockerfiles_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"; src="$(cd "$2" && pwd)"
here="$src/tests/deploy"
work="$(mktemp -d)"; pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
# Ubuntu 22.04 (the PyTorch CUDA images): glibc 2.35, libstdc++ of GCC 12.
readonly MAX_GLIBC=2.35 MAX_GLIBCXX=3.4.30

echo "== shellcheck"
shellcheck -x "$src"/deploy/*.sh "$src"/deploy/docker/*.sh "$src"/deploy/docker/http-health-check \
  "$src"/deploy/frontier-trial-on-gpu "$src"/deploy/kubernetes/*.sh "$src"/deploy/slurm/*.sh \
  "$src"/deploy/slurm/*.sbatch "$here"/*.sh "$here"/fake_srun
# Syntax only (py_compile would leave a __pycache__ in the source tree).
/usr/bin/python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$src/deploy/docker/grpc-health-check"

echo "== dockerfile-utils lint"
modules="$("$here/npm-deps.sh" "$build/deploy-npm")/node_modules"
for f in "$src"/deploy/docker/*.Dockerfile; do
  "$modules/.bin/dockerfile-utils" lint "$f" || { echo "FAIL: dockerfile-utils lint $f"; exit 1; }
  echo "  $(basename "$f"): clean"
done

echo "== structure and runtime libraries"
binaries=()
for b in server/frontier-server server/frontier worker/frontier-worker worker/frontier-trial; do
  [[ -x "$build/$b" ]] && binaries+=("$(basename "$b")=$build/$b")
done
/usr/bin/python3 "$here/check_dockerfiles.py" "$src" "$work/stages" "${binaries[@]}"

echo "== CMake configure of each build stage, on the files it copies"
configure() {  # configure DOCKERFILE STAGE [extra -D...]
  local dir="$work/stages/$1/$2" args=()
  mapfile -t args < <(grep -v 'CMAKE_PREFIX_PATH\|^$' "$work/stages/$1/$2.cmake-args")
  if cmake -S "$dir" -B "$work/cmake-$1-$2" "${args[@]}" "${@:3}" > "$work/cmake-$1-$2.log" 2>&1; then
    echo "  $1 $2: configured (${args[*]} ${*:3})"
  else
    echo "FAIL: $1 stage $2 does not configure:"; tail -20 "$work/cmake-$1-$2.log"; exit 1
  fi
}
configure server.Dockerfile build
configure worker-cuda.Dockerfile agent
if [[ -f /usr/share/cmake/Torch/TorchConfig.cmake || -n "$(find /usr/lib /usr/share -name TorchConfig.cmake -print -quit 2>/dev/null)" ]]; then
  configure worker-cpu.Dockerfile build
  mkdir -p "$work/nlohmann" && cp -r /usr/include/nlohmann "$work/nlohmann/"
  configure worker-cuda.Dockerfile trial -DFRONTIER_NLOHMANN_INCLUDE="$work/nlohmann"
else
  echo "  (no LibTorch here: the LibTorch stages were not configured)"
fi

echo "== the CUDA image's agent bundle"
"$src/deploy/docker/bundle-libs.sh" "$build/worker/frontier-worker" "$work/bundle" | tee "$work/bundle.txt"
glibc=$(grep -o 'GLIBC_[0-9.]*' "$work/bundle.txt" | tail -1); glibc=${glibc#GLIBC_}
glibcxx=$(grep -o 'GLIBCXX_[0-9.]*' "$work/bundle.txt" | tail -1); glibcxx=${glibcxx#GLIBCXX_}
[[ "$(printf '%s\n' "$glibc" "$MAX_GLIBC" | sort -V | tail -1)" == "$MAX_GLIBC" ]] ||
  { echo "FAIL: the agent bundle needs glibc $glibc, the PyTorch images have $MAX_GLIBC"; exit 1; }
[[ "$(printf '%s\n' "$glibcxx" "$MAX_GLIBCXX" | sort -V | tail -1)" == "$MAX_GLIBCXX" ]] ||
  { echo "FAIL: the agent bundle needs GLIBCXX_$glibcxx, Ubuntu 22.04 has $MAX_GLIBCXX"; exit 1; }
outside=$(env -u LD_LIBRARY_PATH ldd "$work/bundle/bin/frontier-worker" | awk '$3 ~ /^\// {print $3}' |
          grep -v "^$work/bundle/" | xargs -rn1 basename | sort -u | tr '\n' ' ')
echo "  libraries from the image: $outside"
for lib in $outside; do
  case "$lib" in libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*) ;; *) echo "FAIL: $lib is not bundled"; exit 1 ;; esac
done
env -i "$work/bundle/bin/frontier-worker" --help > /dev/null
echo "  bundled frontier-worker runs with an empty environment"

echo "== health checks"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
grpc_port=$(free_port); metrics_port=$(free_port); closed_port=$(free_port)
"$build/server/frontier-server" --listen "127.0.0.1:$grpc_port" --metrics-listen "127.0.0.1:$metrics_port" \
  --store "$work/health.db" --artifacts-dir "$work/artifacts" > "$work/server.log" 2>&1 & pids+=($!)
for _ in $(seq 50); do
  /usr/bin/python3 "$src/deploy/docker/grpc-health-check" --addr "127.0.0.1:$grpc_port" > /dev/null 2>&1 && break; sleep 0.2
done
/usr/bin/python3 "$src/deploy/docker/grpc-health-check" --addr "127.0.0.1:$grpc_port"
set +e
/usr/bin/python3 "$src/deploy/docker/grpc-health-check" --addr "127.0.0.1:$closed_port" --timeout 1 2> /dev/null; rc_grpc=$?
"$src/deploy/docker/http-health-check" 127.0.0.1 "$metrics_port" /metrics; rc_http=$?
"$src/deploy/docker/http-health-check" 127.0.0.1 "$closed_port" /metrics 2> /dev/null; rc_http_closed=$?
set -e
[[ $rc_grpc -eq 2 ]] || { echo "FAIL: grpc-health-check on a closed port exited $rc_grpc, expected 2"; exit 1; }
[[ $rc_http -eq 0 && $rc_http_closed -ne 0 ]] ||
  { echo "FAIL: http-health-check: $rc_http on /metrics (want 0), $rc_http_closed on a closed port (want non-zero)"; exit 1; }
echo "  grpc-health-check: SERVING from a live coordinator, exit 2 when nothing listens; http-health-check: 0 / $rc_http_closed"
echo "dockerfiles ok"
