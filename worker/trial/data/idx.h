// Reader for the IDX format of (Fashion-)MNIST, gzipped or raw. Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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
// A file KeepIdxFile kept is not read again while it is the same file (device,
// inode, size, modification time): the kept array itself is returned, shared
// (in a process forked from the keeper, its pages are the keeper's until
// written), so a reader that wants its own copy makes one.
std::shared_ptr<const IdxArray> ReadIdxFile(const std::string& path, int expected_rank);

// Reads `path` now and keeps it for this process and the processes it forks
// (the warm slot's server, docs/worker.md#warm-slots: each trial forked from it
// finds the dataset in memory). false when it cannot be read (nothing kept; a
// trial's ReadIdxFile then names the problem) or its header promises more than
// `max_bytes` of data (not read: the server reads before it forks the trial,
// so what it keeps is bounded in memory and time; Fashion-MNIST's largest
// file holds 47 MB).
inline constexpr size_t kMaxKeptArrayBytes = size_t{256} << 20;
bool KeepIdxFile(const std::string& path, int expected_rank, size_t max_bytes = kMaxKeptArrayBytes);

}  // namespace frontier
