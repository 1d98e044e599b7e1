// Reader for the IDX format of (Fashion-)MNIST, gzipped or raw. Torch-free.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace frontier {

// A missing, truncated or malformed data file. what() names the file.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An unsigned-byte IDX array: dims (e.g. {60000, 28, 28}) and row-major data.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// Reads `path` (gzip or raw). `expected_rank` checks the number of
// dimensions (3 for images, 1 for labels). Verifies the magic number (two
// zero bytes, type 0x08 = unsigned byte, rank) and that the payload holds
// exactly prod(dims) bytes. Throws DataError.
IdxArray ReadIdxFile(const std::string& path, int expected_rank);

}  // namespace frontier
