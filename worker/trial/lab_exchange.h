// The files the kernel lab's judge and its sandboxed runner exchange
// (kernel_lab.h). What the runner writes is untrusted: every reader here
// checks sizes before it allocates, and a file that breaks a bound is an
// error naming the bound, never a crash of the judge.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace frontier::lab {

// Writes `tensors` (CPU copies; undefined tensors allowed) to `path`.
void WriteTensors(const std::string& path, const std::vector<torch::Tensor>& tensors);

// Reads the tensors of a file WriteTensors wrote: at most `max_bytes` in
// all, exactly `count` tensors of at most 8 dimensions, of the dtypes
// WriteTensors writes. Throws std::runtime_error naming what is wrong.
std::vector<torch::Tensor> ReadTensors(const std::string& path, int64_t max_bytes, size_t count);

// The dtypes the exchange carries, by code (the files above, and the judge's
// clocked rounds, lab_timing.h): DtypeCodeOf throws for another dtype,
// DtypeOfCode for an unknown code.
int DtypeCodeOf(c10::ScalarType type);
c10::ScalarType DtypeOfCode(int64_t code);

// The text of `path`, at most `max_bytes` (more: std::runtime_error).
std::string ReadBoundedFile(const std::string& path, int64_t max_bytes);

}  // namespace frontier::lab
