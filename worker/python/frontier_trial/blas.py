"""The CPU's own OpenBLAS kernels, as frontier-trial chooses them (worker/host.h,
UseTheCpusBlasKernels): Debian's OpenBLAS gives a CPU model it does not know its
generic "Prescott" kernels (seen: an Intel Xeon of model 207 with AVX-512, an
fp32 GEMM 5x slower than its own kernels, so a measured peak below the trial's
convolutions and an MFU above 1). OpenBLAS reads OPENBLAS_CORETYPE only when it
is loaded, so the process is started again with it set."""
import ctypes
import os
import sys


def openblas_core_for(detected, cpu_flags):
    """The OPENBLAS_CORETYPE for a CPU with `cpu_flags` whose OpenBLAS detected
    `detected`: SkylakeX with AVX-512 (F, BW, VL, DQ), Haswell with AVX2 and FMA;
    "" when the detection stands (any other name than Prescott)."""
    if detected.lower() != "prescott":
        return ""
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= cpu_flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= cpu_flags:
        return "Haswell"
    return ""


def use_the_cpus_blas_kernels():
    """Starts this Python process again (same command line) with OPENBLAS_CORETYPE
    set when OpenBLAS fell back to its generic kernels on a CPU that has better
    ones; returns when there is nothing to do (no OpenBLAS, the variable set
    already, a CPU it knows, no command line to start again)."""
    if os.environ.get("OPENBLAS_CORETYPE") or not getattr(sys, "orig_argv", None) or sys.argv[0] in ("", "-c"):
        return
    try:
        corename = ctypes.CDLL("libblas.so.3").openblas_get_corename
    except (OSError, AttributeError):
        return
    corename.restype = ctypes.c_char_p
    flags = set()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return
    core = openblas_core_for((corename() or b"").decode(errors="replace"), flags)
    if core:
        os.environ["OPENBLAS_CORETYPE"] = core
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, sys.orig_argv)
