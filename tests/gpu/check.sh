#!/usr/bin/env bash
# GPU check of the trial runner, for a CUDA machine that has PyTorch (and its
# bundled LibTorch + CMake config, and nvcc) but none of our Debian packages.
#
#   tests/gpu/check.sh prepare   on a machine with the Debian packages: copies
#                                what the GPU machine lacks into .gpu-deps/
#                                (nlohmann/json headers, zlib headers, the
#                                Fashion-MNIST files) so it can travel with the tree
#   tests/gpu/check.sh           on the GPU machine: builds frontier-trial alone
#                                (-DFRONTIER_RUNNER_ONLY=ON) against PyTorch's
#                                LibTorch and runs the two example specs on CUDA,
#                                printing step time, MFU (against the device's
#                                table peak) and peak memory of each; then, with
#                                the fused BEV pooling's CUDA kernels built in
#                                (FRONTIER_WITH_CUDA_OPS, when nvcc is there),
#                                worker/examples/bev_lss.json with naive and with
#                                fused pooling in fp32 on CUDA: the two must
#                                reach the same IoU (same sums), fused faster.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
deps="$root/.gpu-deps"

if [[ "${1:-}" == "prepare" ]]; then
  mkdir -p "$deps/include" "$deps/fashion-mnist"
  cp -r /usr/include/nlohmann "$deps/include/"
  cp /usr/include/zlib.h /usr/include/zconf.h "$deps/include/"
  cp /usr/share/datasets/fashion-mnist/*.gz "$deps/fashion-mnist/"
  du -sh "$deps"
  exit 0
fi

python="${PYTHON:-python3}"
torch_prefix="$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
zlib_args=()
if [[ ! -f /usr/include/zlib.h ]]; then
  zlib_so="$(ldconfig -p | awk '/libz\.so\.1 .*x86-64/ {print $NF; exit}')"
  zlib_args=(-DZLIB_INCLUDE_DIR="$deps/include" -DZLIB_LIBRARY="$zlib_so")
fi
cuda_args=()
nvcc="$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)"
[[ -n "$nvcc" ]] && cuda_args=(-DFRONTIER_WITH_CUDA_OPS=ON -DCMAKE_CUDA_COMPILER="$nvcc")
build="$root/build-gpu"
cmake -S "$root" -B "$build" -DFRONTIER_RUNNER_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DFRONTIER_NLOHMANN_INCLUDE="$deps/include" "${zlib_args[@]}" \
  "${cuda_args[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target frontier-trial

data_dir=/usr/share/datasets/fashion-mnist
[[ -d "$data_dir" ]] || data_dir="$deps/fashion-mnist"
out="${OUT:-$root/out}"
mkdir -p "$out"
for name in baseline attention_bf16_channels_last; do
  spec="$out/$name.cuda.json"
  "$python" - "$root/worker/examples/$name.json" "$spec" "$data_dir" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec["task"]["data_dir"] = sys.argv[3]
spec["runtime"]["device"] = "cuda"
json.dump(spec, open(sys.argv[2], "w"))
PY
  set +e
  "$build/worker/frontier-trial" --spec "$spec" --progress-every 100 > "$out/$name.jsonl"
  rc=$?
  set -e
  "$python" - "$out/$name.jsonl" "$name" "$rc" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(f"{sys.argv[2]}: exit {sys.argv[3]}, status {r.get('status')} {r.get('error', '')}")
if r.get("status") == "completed":
    st = r["step_time_ms"]
    print(f"  device {r['device_name']}, precision {r['precision']}, layout {r['memory_format']}")
    print(f"  step time median {st['median']:.3f} ms (p10 {st['p10']:.3f}, p90 {st['p90']:.3f}, cv {st['cv']:.3f})")
    print(f"  throughput {r['throughput']['samples_per_s']:.0f} samples/s, MFU {100 * r['mfu']:.3f}% "
          f"of {r['peak_flops']['flops_per_s'] / 1e12:.1f} TFLOP/s ({r['peak_flops']['source']})")
    print(f"  peak memory {r['peak_memory_mb']:.1f} MB ({r['peak_memory_kind']}), "
          f"val acc {r['val_accuracy']:.4f}, test acc {r['test_accuracy']:.4f}")
PY
done

# The fused BEV pooling on CUDA against the naive one (fp32: the same sums).
for pooling in naive fused; do
  spec="$out/bev_$pooling.cuda.json"
  "$python" - "$root/worker/examples/bev_lss.json" "$spec" "$pooling" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec["runtime"]["device"] = "cuda"
spec["runtime"]["precision"] = "fp32"
spec["arch"]["bev"]["pooling"] = sys.argv[3]
json.dump(spec, open(sys.argv[2], "w"))
PY
  set +e
  "$build/worker/frontier-trial" --spec "$spec" --progress-every 100 > "$out/bev_$pooling.jsonl"
  set -e
done
"$python" - "$out/bev_naive.jsonl" "$out/bev_fused.jsonl" <<'PY'
import json, sys
r = [json.loads(open(f).read().splitlines()[-1]) for f in sys.argv[1:]]
for name, x in zip(("naive", "fused"), r):
    print(f"bev {name}: status {x.get('status')} {x.get('error', '')}")
if all(x.get("status") == "completed" for x in r):
    (n, f) = r
    print(f"  val IoU naive {n['val_iou']:.4f} fused {f['val_iou']:.4f}; median step "
          f"{n['step_time_ms']['median']:.3f} vs {f['step_time_ms']['median']:.3f} ms "
          f"(fused {n['step_time_ms']['median'] / f['step_time_ms']['median']:.2f}x)")
    print("  fused pooling on CUDA:", "same IoU" if abs(n["val_iou"] - f["val_iou"]) < 0.01 else "IoU DIFFERS")
PY
