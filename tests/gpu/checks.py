"""The checks of tests/gpu/check.sh, on frontier-trial's JSON-lines outputs.

    python3 tests/gpu/checks.py CHECK OUTPUT.jsonl [OUTPUT.jsonl ...]

prints one `PASS: ...` or `FAIL: ...` line and exits 0 or 1. The checks are
plain functions of the parsed results (test_checks.py runs them on canned
outputs, no GPU needed); each returns None when it passes, else the problem."""
import json
import math
import sys


def read_output(path):
    """(events, result) of one frontier-trial output: the last line is the result."""
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.startswith("{")]
    if not lines:
        raise ValueError(f"{path}: no JSON lines (did frontier-trial start?)")
    events = [json.loads(line) for line in lines]
    result = events[-1]
    if result.get("event") != "result":
        raise ValueError(f"{path}: the last line is not a result")
    return events[:-1], result


def _completed(r, what):
    if r.get("status") != "completed":
        return f"{what}: status {r.get('status')} ({r.get('error', 'no error given')})"
    return None


def _on_cuda(r, what):
    if not str(r.get("device", "")).startswith("cuda"):
        return f"{what}: ran on {r.get('device')}, not on CUDA"
    return None


def _finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


def check_ran_on_cuda(runs):
    """Every run completed on a CUDA device."""
    for name, (_, r) in runs.items():
        problem = _completed(r, name) or _on_cuda(r, name)
        if problem:
            return problem
    return None


def check_mfu(runs):
    """MFU in (0, 1] against a peak that names its source."""
    for name, (_, r) in runs.items():
        problem = _completed(r, name)
        if problem:
            return problem
        if str(r.get("device", "")).startswith("cuda") and r.get("tf32") != {"cublas": False, "cudnn": False}:
            return f"{name}: TF32 is not off ({r.get('tf32')}): its fp32 MFU would be against the wrong peak"
        mfu = r.get("mfu")
        if not _finite(mfu) or not 0 < mfu <= 1:
            return f"{name}: MFU {mfu} is not in (0, 1] (peak {r.get('peak_flops')})"
        if not r.get("peak_flops", {}).get("source"):
            return f"{name}: the peak has no source"
    return None


def check_bf16_faster(runs):
    """On the matmul-heavy variant, bf16's median step time is below fp32's."""
    (_, fp32), (_, bf16) = runs["fp32"], runs["bf16"]
    for name, r in (("fp32", fp32), ("bf16", bf16)):
        problem = _completed(r, name) or _on_cuda(r, name)
        if problem:
            return problem
    if bf16.get("precision") != "bf16" or fp32.get("precision") != "fp32":
        return f"precisions are {fp32.get('precision')} and {bf16.get('precision')}, not fp32 and bf16"
    a, b = fp32["step_time_ms"]["median"], bf16["step_time_ms"]["median"]
    if not b < a:
        return f"bf16 median step {b:.3f} ms is not below fp32's {a:.3f} ms"
    return None


def check_peak_memory(runs):
    """CUDA peak memory (max allocated) above 0."""
    for name, (_, r) in runs.items():
        problem = _completed(r, name)
        if problem:
            return problem
        if r.get("peak_memory_kind") != "cuda-max-allocated":
            return f"{name}: peak memory kind {r.get('peak_memory_kind')}, not cuda-max-allocated"
        if not _finite(r.get("peak_memory_mb")) or r["peak_memory_mb"] <= 0:
            return f"{name}: peak memory {r.get('peak_memory_mb')} MB"
    return None


def check_profile_cuda(runs):
    """The default profile recorded CUDA times and a verdict rests on it."""
    for name, (_, r) in runs.items():
        problem = _completed(r, name)
        if problem:
            return problem
        p = r.get("profile")
        if not isinstance(p, dict) or p.get("tool") != "libtorch":
            return f"{name}: no libtorch profile in the result"
        if p.get("error"):
            return f"{name}: profile error: {p['error']}"
        if p.get("cuda") is not True:
            return f"{name}: the profile has no CUDA times (cuda: {p.get('cuda')})"
        cuda_ms = sum(op.get("self_cuda_ms", 0) or 0 for op in p.get("top_operators", []))
        if not cuda_ms > 0:
            return f"{name}: the top operators carry no CUDA time"
        verdict = r.get("bottleneck", {})
        if verdict.get("basis") not in ("profile", "data_wait"):
            return f"{name}: the verdict rests on {verdict.get('basis')}, not on the profile"
    return None


def check_loss_scaler(runs):
    """fp16 with the dynamic loss scaler: completed, finite losses that fell, a sane scale."""
    for name, (events, r) in runs.items():
        problem = _completed(r, name) or _on_cuda(r, name)
        if problem:
            return problem
        if r.get("precision") != "fp16":
            return f"{name}: precision {r.get('precision')}, not fp16"
        losses = [e["loss"] for e in events if e.get("event") == "progress"]
        if len(losses) < 2 or not all(_finite(x) for x in losses):
            return f"{name}: progress losses {losses[:5]}... are missing or not finite"
        if not losses[-1] < losses[0]:
            return f"{name}: the loss did not fall ({losses[0]:.4f} -> {losses[-1]:.4f})"
        scale = r.get("loss_scale", 65536.0)
        if not _finite(scale) or scale <= 0 or math.log2(scale) != int(math.log2(scale)):
            return f"{name}: loss scale {scale} is not a positive power of two"
    return None


def check_pooling_equal(runs):
    """a pooling variant (fused, depth_fused) reaches naive's validation IoU (the same sums in fp32)."""
    (_, naive), (_, fused) = runs["naive"], runs["fused"]
    for name, r in (("naive", naive), ("fused", fused)):
        problem = _completed(r, name) or _on_cuda(r, name)
        if problem:
            return problem
    if naive.get("bev", {}).get("pooling") != "naive" or fused.get("bev", {}).get("pooling") in (None, "naive"):
        return f"pooling variants are {naive.get('bev')} and {fused.get('bev')}"
    a, b = naive["val_iou"], fused["val_iou"]
    if abs(a - b) >= 0.01:
        return f"val IoU differs: naive {a:.4f}, {fused['bev']['pooling']} {b:.4f}"
    return None


def check_op_gated(runs):
    """the CUDA pooling variants passed the correctness gate (forward and every gradient) and were timed."""
    for name, (_, r) in runs.items():
        problem = _completed(r, name) or _on_cuda(r, name)
        if problem:
            return problem
        op = r.get("op") or {}
        if op.get("variant") != name:
            return f"{name}: ran variant {op.get('variant')} (op {op})"
        if not r.get("phases", {}).get("gate_s"):
            return f"{name}: no gate time in its phases ({r.get('phases')}): the gate did not run"
        if not (_finite(op.get("speedup")) and op["speedup"] > 0 and _finite(op.get("forward_backward_ms"))):
            return f"{name}: no timing against {op.get('reference')} ({op})"
    return None


CHECKS = {
    "cuda": check_ran_on_cuda,
    "mfu": check_mfu,
    "bf16-faster": check_bf16_faster,
    "peak-memory": check_peak_memory,
    "profile-cuda": check_profile_cuda,
    "loss-scaler": check_loss_scaler,
    "pooling-equal": check_pooling_equal,
    "op-gated": check_op_gated,
}
# Checks comparing two runs name them by position.
PAIRS = {"bf16-faster": ("fp32", "bf16"), "pooling-equal": ("naive", "fused"),
         "op-gated": ("fused", "depth_fused")}


def run_check(name, paths):
    """(passed, line) of check `name` on the outputs at `paths`."""
    try:
        outputs = [read_output(p) for p in paths]
        names = PAIRS.get(name) or [p.rsplit("/", 1)[-1] for p in paths]
        if len(names) != len(outputs):
            raise ValueError(f"{name} compares {len(names)} outputs, got {len(outputs)}")
        problem = CHECKS[name](dict(zip(names, outputs)))
    except (OSError, ValueError, KeyError, TypeError) as e:
        problem = f"cannot check: {type(e).__name__}: {e}"
    doc = CHECKS[name].__doc__.strip().splitlines()[0]
    return (problem is None, f"PASS: {name}: {doc}" if problem is None else f"FAIL: {name}: {problem}")


def main(argv):
    if len(argv) < 2 or argv[0] not in CHECKS:
        print(f"usage: checks.py {{{','.join(CHECKS)}}} OUTPUT.jsonl...", file=sys.stderr)
        return 64
    passed, line = run_check(argv[0], argv[1:])
    print(line)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
