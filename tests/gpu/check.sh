#!/usr/bin/env bash
# GPU check of the trial runner, for a CUDA machine that has PyTorch (and its
# bundled LibTorch + CMake config, and nvcc) but none of our Debian packages.
#
#   tests/gpu/check.sh prepare   on a machine with the Debian packages: copies
#                                what the GPU machine lacks into .gpu-deps/
#                                (nlohmann/json headers, zlib headers, the
#                                Fashion-MNIST files) so it can travel with the tree
#   tests/gpu/check.sh verify DIR  only the checks, on the outputs a run left in DIR
#                                (tests/gpu/test_checks.py runs it on canned outputs)
#   tests/gpu/check.sh           on the GPU machine: builds frontier-trial alone
#                                (-DFRONTIER_RUNNER_ONLY=ON) against PyTorch's
#                                LibTorch, runs the trials below on CUDA and
#                                checks their results (tests/gpu/checks.py):
#     cuda          every run completed on a CUDA device
#     mfu           baseline and the bf16 channels_last variant: MFU in (0, 1]
#     bf16-faster   a matmul-heavy variant: bf16 median step below fp32's
#     peak-memory   CUDA max allocated > 0
#     profile-cuda  the default profile carries CUDA times and the verdict rests on it
#     loss-scaler   fp16 (dynamic loss scaling) on a short run: finite, falling loss
#     pooling-equal bev_lss.json with naive and fused pooling (fp32): the same IoU
#     op-gated      fused and depth_fused (BEVPoolv2-style, the CUDA kernels) passed the
#                   correctness gate on the GPU (forward and gradients against the float64
#                   reference) and were timed against naive; MFU (above) also needs TF32 off
#
# Each check prints one PASS or FAIL line; the script exits non-zero when any
# check failed or any step before them (the build, a trial that printed no
# result) did. Outputs stay in $OUT (default ./out).
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
checks="$root/tests/gpu/checks.py"

# verify DIR: every check on the outputs in DIR; exits 1 when any failed.
verify() {
  local dir="$1" failed=0
  check() { "$python" "$checks" "$@" || failed=$((failed + 1)); }
  check cuda "$dir"/{baseline,bf16_channels_last,matmul_fp32,matmul_bf16,fp16,bev_naive,bev_fused,bev_depth_fused}.jsonl
  check mfu "$dir/baseline.jsonl" "$dir/bf16_channels_last.jsonl"
  check bf16-faster "$dir/matmul_fp32.jsonl" "$dir/matmul_bf16.jsonl"
  check peak-memory "$dir/baseline.jsonl" "$dir/bf16_channels_last.jsonl"
  check profile-cuda "$dir/baseline.jsonl" "$dir/bf16_channels_last.jsonl"
  check loss-scaler "$dir/fp16.jsonl"
  check pooling-equal "$dir/bev_naive.jsonl" "$dir/bev_fused.jsonl"
  check pooling-equal "$dir/bev_naive.jsonl" "$dir/bev_depth_fused.jsonl"
  check op-gated "$dir/bev_fused.jsonl" "$dir/bev_depth_fused.jsonl"
  if (( failed > 0 )); then
    echo "FAIL: $failed of 9 checks failed"
    exit 1
  fi
  echo "PASS: all 9 checks"
}
if [[ "${1:-}" == "verify" ]]; then
  [[ -d "${2:-}" ]] || { echo "FAIL: verify needs the folder of a run's outputs"; exit 64; }
  verify "$2"
  exit 0
fi
torch_prefix="$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
"$python" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device"; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
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
trial="$build/worker/frontier-trial"

data_dir=/usr/share/datasets/fashion-mnist
[[ -d "$data_dir" ]] || data_dir="$deps/fashion-mnist"
out="${OUT:-$root/out}"
mkdir -p "$out"

# run NAME EXAMPLE 'PYTHON EDIT OF spec' : the example spec on CUDA with the edit, into $out/NAME.jsonl.
# A trial that fails still prints its result (the checks say why); one that prints none stops the script.
run() {
  local name="$1" example="$2" edit="$3"
  "$python" - "$root/worker/examples/$example" "$out/$name.json" "$data_dir" "$edit" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
if spec["task"].get("dataset") == "fashion-mnist":
    spec["task"]["data_dir"] = sys.argv[3]
spec["runtime"]["device"] = "cuda"
exec(sys.argv[4])
json.dump(spec, open(sys.argv[2], "w"))
PY
  local rc=0
  "$trial" --spec "$out/$name.json" --progress-every 10 --artifact-dir "$out/artifacts" > "$out/$name.jsonl" || rc=$?
  tail -n 1 "$out/$name.jsonl" | grep -q '"event":"result"' || {
    echo "FAIL: $name: frontier-trial (exit $rc) printed no result"; exit 1; }
  "$python" - "$out/$name.jsonl" "$name" "$rc" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
line = f"{sys.argv[2]}: exit {sys.argv[3]}, status {r.get('status')} {r.get('error', '')}"
if r.get("status") == "completed":
    st = r["step_time_ms"]
    line += (f"\n  {r['device_name']}, {r['precision']}, {r['memory_format']}: step median {st['median']:.3f} ms"
             f" (cv {st['cv']:.3f}), MFU {100 * (r.get('mfu') or 0):.3f}% of"
             f" {r['peak_flops']['flops_per_s'] / 1e12:.1f} TFLOP/s ({r['peak_flops']['source']}),"
             f" peak {r['peak_memory_mb']:.1f} MB, latency {r.get('latency_ms', float('nan')):.3f} ms"
             f" (batch 1 {r.get('latency_b1_ms', float('nan')):.3f} ms)"
             f"\n  bottleneck: {r['bottleneck']['summary']}")
print(line)
PY
}

run baseline baseline.json ''
run bf16_channels_last attention_bf16_channels_last.json ''
# Matmul-heavy: wide attention stages at a large batch, fp32 (no TF32 for matmuls) against bf16.
matmul='spec["task"].update({"steps": 60, "eval_every": 0, "warmup_steps": 10, "batch_size": 256}); spec["task"].pop("target", None)
spec["arch"] = {"stem": {"kind": "patchify", "width": 256, "stride": 4},
                "stages": [{"block": "basic", "width": 512, "depth": 2, "stride": 1, "attention": {"kind": "mhsa", "heads": 8}}],
                "norm": "layer", "activation": "gelu"}
spec["runtime"]["memory_format"] = "contiguous"'
run matmul_fp32 attention_bf16_channels_last.json "$matmul"$'\nspec["runtime"]["precision"] = "fp32"'
run matmul_bf16 attention_bf16_channels_last.json "$matmul"$'\nspec["runtime"]["precision"] = "bf16"'
run fp16 baseline.json 'spec["task"].update({"steps": 60, "eval_every": 0}); spec["task"].pop("target", None); spec["runtime"]["precision"] = "fp16"'
for pooling in naive fused depth_fused; do
  run "bev_$pooling" bev_lss.json "spec['runtime']['precision'] = 'fp32'; spec['arch']['bev']['pooling'] = '$pooling'"
done

verify "$out"
