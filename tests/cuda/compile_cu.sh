#!/usr/bin/env bash
# ctest cuda.compile (tests/cuda/CMakeLists.txt): compiles each .cu file with
# nvcc, compile-only, for every architecture given, and fails on any error.
#
#   compile_cu.sh --nvcc NVCC --arch 80 --arch 90 [--flag F]... \
#                 [--not-compiled FILE=REASON]... FILE...
#
# Prints each nvcc command and its whole output. ptxas' resource usage
# (--resource-usage) names every kernel it compiled and for which sm_XX: a
# file with a __global__ kernel whose output lacks an architecture fails too,
# so a file that compiled no device code for sm_80 and sm_90 cannot pass. Files given with
# --not-compiled (those that include LibTorch headers in a build without
# LibTorch) are listed with the reason at the end.
set -uo pipefail

nvcc=""
archs=()
flags=()
skipped=()
files=()
while (($#)); do
  case "$1" in
    --nvcc) nvcc="$2"; shift 2 ;;
    --arch) archs+=("$2"); shift 2 ;;
    --flag) flags+=("$2"); shift 2 ;;
    --not-compiled) skipped+=("$2"); shift 2 ;;
    *) files+=("$1"); shift ;;
  esac
done
[[ -x "$nvcc" ]] || { echo "FAIL: no nvcc at '$nvcc'"; exit 1; }
((${#archs[@]})) || { echo "FAIL: no architecture given"; exit 1; }
((${#files[@]})) || { echo "FAIL: no .cu file to compile"; exit 1; }

gencode=()
for a in "${archs[@]}"; do gencode+=(-gencode "arch=compute_$a,code=sm_$a"); done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$nvcc" --version | tail -n 2
failed=0
compiled=()
for f in "${files[@]}"; do
  obj="$out/$(basename "$f").o"
  # --threads 0: the architectures' device passes side by side, one per CPU (63 -> 44 s for the file
  # that includes LibTorch's headers, 2 architectures on 2 cores).
  cmd=("$nvcc" "${gencode[@]}" -std=c++17 "${flags[@]}" --threads 0 --resource-usage -c "$f" -o "$obj")
  echo
  echo "== $f"
  echo "\$ ${cmd[*]}"
  start=$SECONDS
  log=$("${cmd[@]}" 2>&1)
  rc=$?
  [[ -n "$log" ]] && printf '%s\n' "$log"
  if ((rc != 0)); then
    echo "FAIL: $f: nvcc exited $rc"
    failed=1
    continue
  fi
  missing=()
  if grep -q "__global__" "$f"; then  # a file with kernels: each must reach every architecture
    for a in "${archs[@]}"; do
      grep -q "for 'sm_$a'" <<< "$log" || missing+=("sm_$a")
    done
  fi
  if ((${#missing[@]})); then
    echo "FAIL: $f: no device code compiled for ${missing[*]} (ptxas reported none)"
    failed=1
    continue
  fi
  kernels=$(grep -c "Compiling entry function" <<< "$log")
  echo "ok: $f: $kernels kernel compilations for $(printf 'sm_%s ' "${archs[@]}")in $((SECONDS - start)) s"
  compiled+=("$f")
done

echo
echo "compiled for $(printf 'sm_%s ' "${archs[@]}")(compile-only, $("$nvcc" --version | grep -o 'release [0-9.]*')):"
for f in "${compiled[@]}"; do echo "  $f"; done
for s in "${skipped[@]}"; do echo "  not compiled: ${s%%=*}: ${s#*=}"; done
if ((failed)); then
  echo "FAIL: at least one .cu file did not compile (above)"
  exit 1
fi
echo "PASS: ${#compiled[@]} of ${#files[@]} .cu files compiled"
