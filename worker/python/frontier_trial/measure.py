"""Step statistics, device synchronization, peak FLOP/s and peak memory,
defined as frontier-trial defines them (docs/worker.md, Measurement)."""
import ctypes
import json
import math
import os
import time

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

# frontier-trial's host allocator policy (worker/host.h, ConfigureHostAllocator): the same numbers,
# so that a step's page faults do not depend on what the process allocated before.
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # glibc's <malloc.h>
_HOST_ALLOCATOR = ((_M_MMAP_THRESHOLD, 64 << 20), (_M_TRIM_THRESHOLD, 1 << 30), (_M_TOP_PAD, 64 << 20))
HOST_ALLOCATOR_POLICY = "glibc mmap_threshold=64MiB trim_threshold=1GiB top_pad=64MiB"


def configure_host_allocator():
    """Applies the policy to this process with mallopt; returns it as the result states it."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "not glibc (no mallopt): the C library's defaults"
    ok = all(mallopt(param, value) == 1 for param, value in _HOST_ALLOCATOR)
    return HOST_ALLOCATOR_POLICY if ok else "glibc defaults (mallopt failed)"


def percentile(sorted_values, q):
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def summarize(values):
    """{n, sum, median, p10, p90, mean, min, max, cv} of a series (seconds)."""
    v = sorted(values)
    s = {"n": len(v), "sum": sum(v), "median": 0.0, "p10": 0.0, "p90": 0.0, "mean": 0.0, "min": 0.0,
         "max": 0.0, "cv": 0.0}
    if not v:
        return s
    s["mean"] = s["sum"] / len(v)
    s["median"], s["p10"], s["p90"] = percentile(v, 0.5), percentile(v, 0.1), percentile(v, 0.9)
    s["min"], s["max"] = v[0], v[-1]
    if len(v) > 1 and s["mean"] > 0:
        s["cv"] = math.sqrt(sum((x - s["mean"]) ** 2 for x in v) / (len(v) - 1)) / s["mean"]
    return s


def stats_json(s, scale):
    """The result's `{n, median, p10, p90, mean, min, max, cv}` in the unit `scale` gives."""
    return {"n": s["n"], "median": s["median"] * scale, "p10": s["p10"] * scale, "p90": s["p90"] * scale,
            "mean": s["mean"] * scale, "min": s["min"] * scale, "max": s["max"] * scale, "cv": s["cv"]}


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def worker_peak(precision):
    """The peak the worker calibrated at its start and passed in FRONTIER_PEAK_FLOPS
    ({"fp32": ..., "source": ..., "measured_at": ..., "threads": N, "device": "cpu"}), or None
    when there is none for this precision, or (CPU) it was measured on another thread count."""
    text = os.environ.get("FRONTIER_PEAK_FLOPS")
    if not text:
        return None
    try:
        table = json.loads(text)
        value = float(table[precision])
    except (ValueError, KeyError, TypeError):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    threads = table.get("threads") or 0
    if table.get("device", "cpu") == "cpu" and threads and threads != torch.get_num_threads():
        return None
    peak = {"flops_per_s": value, "dtype": precision, "source": str(table.get("source", "worker"))}
    if table.get("measured_at"):
        peak["measured_at"] = str(table["measured_at"])
    if threads:
        peak["threads"] = int(threads)
    return peak


def measured_peak(precision, device, budget_s=0.4):
    """Best of timed 1024^3 GEMMs of the dtype (at least 5, up to `budget_s`), as frontier-trial measures."""
    size = 1024
    with torch.no_grad():
        a = torch.randn(size, size, dtype=DTYPES[precision], device=device)
        b = torch.randn(size, size, dtype=DTYPES[precision], device=device)
        c = torch.mm(a, b)
        synchronize(device)
        best, reps = 0.0, 0
        deadline = time.perf_counter() + budget_s
        while reps < 5 or (time.perf_counter() < deadline and reps < 200):
            t0 = time.perf_counter()
            torch.mm(a, b, out=c)
            synchronize(device)
            best = max(best, 2.0 * size ** 3 / (time.perf_counter() - t0))
            reps += 1
    return {"flops_per_s": best, "dtype": precision,
            "source": "measured:cuda-gemm" if device.type == "cuda" else "measured:cpu-gemm"}


def _status_bytes(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _CountedCpuMemory:
    """LibTorch's CPU allocator counted by libfrontier_cpu_memory.so, which the
    worker names in FRONTIER_CPU_MEMORY_LIB (frontier-trial's own counter,
    worker/trial/measure/cpu_allocator.h, behind a C interface). None of its
    functions is called unless the library loaded and installed the counter."""

    _loaded = None  # the library once installed; False when it could not be

    @classmethod
    def library(cls):
        if cls._loaded is None:
            cls._loaded = False
            path = os.environ.get("FRONTIER_CPU_MEMORY_LIB", "")
            if path:
                try:
                    lib = ctypes.CDLL(path)
                    for name in ("current", "peak", "reset_peak"):
                        getattr(lib, "frontier_cpu_memory_" + name).restype = ctypes.c_longlong
                    if lib.frontier_cpu_memory_install() == 1:
                        cls._loaded = lib
                except (OSError, AttributeError):
                    pass
        return cls._loaded or None


class MemoryTracker:
    """Peak memory during training: CUDA max allocated; on the CPU the peak of
    the bytes LibTorch's CPU allocator holds above those it held when training
    began, counted as frontier-trial counts them when the worker gave the
    library (FRONTIER_CPU_MEMORY_LIB), else the high-water mark of resident
    memory above the resident memory when training began."""

    def __init__(self, device):
        self.device = device
        self.baseline = 0
        self.peak_reset = False
        self.counted = None

    def start(self):
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        self.counted = _CountedCpuMemory.library()
        if self.counted:
            self.baseline = self.counted.frontier_cpu_memory_reset_peak()
            return
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
            self.peak_reset = True
        except OSError:
            self.peak_reset = False
        self.baseline = _status_bytes("VmRSS")

    def peak_bytes(self):
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device)
        if self.counted:
            return max(0, self.counted.frontier_cpu_memory_peak() - self.baseline)
        return max(0, _status_bytes("VmHWM") - self.baseline)

    @property
    def kind(self):
        if self.device.type == "cuda":
            return "cuda-max-allocated"
        if self.counted:
            return "cpu-allocated-growth"
        return "cpu-rss-growth" if self.peak_reset else "cpu-rss-growth(process-peak)"

    @staticmethod
    def process_peak_bytes():
        return _status_bytes("VmHWM")


def latency(forward, device, repetitions=100, warmup=5, budget_s=5.0, min_repetitions=30):
    """Times `forward()` (one eval-mode forward pass) as frontier-trial times inference latency
    (docs/trial-output.md, Latency): `warmup` untimed passes, then `repetitions` timed ones, each
    ended by a device synchronization; stops early once `min_repetitions` are timed and `budget_s`
    is spent. Returns the summary in seconds (see summarize) with "p99"."""
    for _ in range(warmup):
        forward()
        synchronize(device)
    times, spent = [], 0.0
    while len(times) < repetitions:
        t0 = time.perf_counter()
        forward()
        synchronize(device)
        seconds = time.perf_counter() - t0
        times.append(seconds)
        spent += seconds
        if len(times) >= min_repetitions and spent >= budget_s:
            break
    s = summarize(times)
    s["p99"] = percentile(sorted(times), 0.99) if times else 0.0
    return s


def latency_json(batch_size, s, warmup, timed_input=None):
    """The result's `latency.batch_1` / `latency.batch` object (milliseconds); `timed_input` names the input."""
    entry = {} if timed_input is None else {"input": timed_input}
    return {**entry, "batch_size": batch_size, "n": s["n"], "warmup": warmup, "median_ms": s["median"] * 1e3,
            "p99_ms": s["p99"] * 1e3, "p10_ms": s["p10"] * 1e3, "mean_ms": s["mean"] * 1e3,
            "min_ms": s["min"] * 1e3, "max_ms": s["max"] * 1e3, "cv": s["cv"]}
