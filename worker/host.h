// What the worker agent and the trial runner share about the machine they
// run on: its name, program lookup on PATH, the folder layout of trial
// artifacts and how a file is written where a trial can write. Plain C++ (no gRPC, no LibTorch): the agent (frontier_worker)
// and the runner (frontier_trial) both link it, so one rule serves both sides.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace frontier {

// gethostname(2); empty when it fails.
std::string HostName();

// The full path of the executable `program` in $PATH (an empty entry is the
// current folder), or "" when there is none. A name with a '/' is returned as
// it is when it is executable, else "".
std::string FindOnPath(const std::string& program);

// The folder name of a trial's artifacts under an artifact directory: the
// trial id with every character other than [A-Za-z0-9._-] replaced by '_';
// "trial" for an empty id, "." or "..". frontier-trial writes there and the
// agent looks there (docs/profiling.md).
std::string TrialFolderName(const std::string& trial_id);

// OpenBLAS (LibTorch's BLAS on Debian) picks its kernels by the CPU's model,
// and a model it does not know gets its generic "Prescott" kernels: seen on an
// Intel Xeon of model 207 with AVX-512, an fp32 GEMM at 31 GFLOP/s instead of
// 149 on one thread, slower than the same machine's oneDNN convolutions (an
// MFU above 1 against that peak). The OPENBLAS_CORETYPE that gives a CPU its
// kernels when OpenBLAS detected `detected`: "SkylakeX" with AVX-512 (F, BW,
// VL, DQ), "Haswell" with AVX2 and FMA; "" when the detection stands (any
// other name than Prescott, or a CPU without either).
std::string OpenBlasCoreFor(const std::string& detected, bool avx512, bool avx2_fma);

// Re-executes this program (argv) with OPENBLAS_CORETYPE set when the loaded
// OpenBLAS fell back to its generic kernels on a CPU that has better ones
// (OpenBlasCoreFor; OpenBLAS reads the variable only when it is loaded).
// Returns when there is nothing to do: no OpenBLAS, OPENBLAS_CORETYPE set
// already (by the user, or by the exec before), a CPU it knows; or when the
// exec failed (the trial then runs on the generic kernels). frontier-trial's
// first step.
void UseTheCpusBlasKernels(char** argv);

// Keeps glibc malloc from returning memory to the kernel between steps. A
// training step frees and reallocates the same multi-megabyte activation
// buffers every time; with glibc's defaults they go through mmap/munmap or
// heap trimming, and each step pays page faults whose cost depends on what the
// process did before (measured: 36 vs 41-55 ms per step for the same loop in
// frontier-trial; 28.9 vs 9.7 ms under the Python SDK). One policy for every
// trial: mmap_threshold 64 MiB (larger blocks still get their own mapping),
// trim_threshold 1 GiB, top_pad 64 MiB. The Python SDK sets the same numbers
// with mallopt at start() (worker/python/frontier_trial/measure.py).
//
// ConfigureHostAllocator applies it to this process (mallopt; frontier-trial
// at the start of a trial, the benchmarks' reference loops) and returns the
// policy as the result states it: HostAllocatorPolicy(), or "glibc defaults
// (mallopt failed)".
std::string ConfigureHostAllocator();
// "glibc mmap_threshold=64MiB trim_threshold=1GiB top_pad=64MiB".
std::string HostAllocatorPolicy();
// The policy as glibc reads it at exec (GLIBC_TUNABLES), for a command trial:
// "glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=...".
std::string HostAllocatorTunables();

// Writes `text` to a new file at `path` in a folder a trial can write to (the
// worker's work folder, an artifact folder): whatever is there (a file, or a
// symbolic link or FIFO a trial left) is removed first, and the file is
// created with O_EXCL|O_NOFOLLOW, so the write never follows a link or blocks
// on a pipe. "" on success, else what failed ("cannot write PATH: ...").
std::string WriteNewFile(const std::string& path, const std::string& text);

// Opens `path` for reading as it is now, in a folder a trial can write to
// (what the trial left may have become a link or a FIFO since it was listed):
// never following a symbolic link nor blocking on a FIFO
// (O_NOFOLLOW|O_NONBLOCK), and only a regular file. The descriptor (the
// caller closes it) and, in `size`, the file's size when opened; -1 when
// nothing is there or it is not a regular file.
int OpenRegularFile(const std::string& path, int64_t* size);
// Reads up to `n` bytes of `fd` into `buffer`, past short reads and EINTR:
// how many were read, fewer only at the end of the file or on an error.
int64_t ReadUpTo(int fd, char* buffer, int64_t n);
// What the regular file at `path` held when opened (OpenRegularFile); nullopt
// when nothing is there or it is not a regular file. Throws
// std::runtime_error naming the file when it has more than `max_bytes`.
std::optional<std::string> ReadRegularFile(const std::string& path, int64_t max_bytes);

// A TCP port on `host` (an IPv4 address; "0.0.0.0": every interface) that
// was free a moment ago (bound to port 0 and closed): what a launcher passes
// to a data-parallel trial's ranks as their TCPStore's port. Throws
// std::runtime_error when no socket can be bound.
int FreeTcpPort(const std::string& host = "127.0.0.1");

}  // namespace frontier
