#include "worker/trial/data/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <map>
#include <memory>

namespace frontier {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads up to `size` bytes; returns how many were read. Throws on a gzip error
// (a corrupt or truncated compressed stream).
size_t ReadSome(gzFile f, uint8_t* out, size_t size, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(size - done, 1u << 30));
    const int n = gzread(f, out + done, chunk);
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(f, &code);
      throw DataError(path + ": corrupt gzip stream (" + message + ")");
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

// A file's identity: the same device, inode, size and modification time means the same bytes.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  timespec modified{};
  bool operator==(const FileIdentity& o) const {
    return device == o.device && inode == o.inode && size == o.size && modified.tv_sec == o.modified.tv_sec &&
           modified.tv_nsec == o.modified.tv_nsec;
  }
};

bool IdentityOf(const std::string& path, FileIdentity* identity) {
  struct stat s {};
  if (stat(path.c_str(), &s) != 0 || !S_ISREG(s.st_mode)) return false;  // a FIFO would block its reader
  *identity = {s.st_dev, s.st_ino, s.st_size, s.st_mtim};
  return true;
}

// KeepIdxFile's files, read once (the warm slot's server, before it forks any trial); at most
// kMaxKeptFiles (two datasets of four files), so specs naming folder after folder cannot grow it.
constexpr size_t kMaxKeptFiles = 8;
constexpr off_t kMaxKeptFileBytes = off_t{256} << 20;  // on disk; Fashion-MNIST's largest is 26 MB
constexpr size_t kNoBound = size_t{1} << 33;            // a file any reader accepts: 8 GiB of data
struct KeptFile {
  FileIdentity identity;
  int rank = 0;
  std::shared_ptr<const IdxArray> array;
};
std::map<std::string, KeptFile>& KeptFiles() {
  static std::map<std::string, KeptFile> kept;
  return kept;
}

IdxArray ReadIdxFromDisk(const std::string& path, int expected_rank, size_t max_bytes = kNoBound);

}  // namespace

bool KeepIdxFile(const std::string& path, int expected_rank, size_t max_bytes) {
  KeptFile kept;
  if (!IdentityOf(path, &kept.identity)) return false;
  const auto it = KeptFiles().find(path);
  if (it != KeptFiles().end() && it->second.identity == kept.identity && it->second.rank == expected_rank) return true;
  if (it == KeptFiles().end() && KeptFiles().size() >= kMaxKeptFiles) return false;
  if (kept.identity.size > kMaxKeptFileBytes) return false;
  try {
    kept.array = std::make_shared<const IdxArray>(ReadIdxFromDisk(path, expected_rank, max_bytes));
  } catch (const DataError&) {
    return false;  // the trial reads it again and names the problem (or reads one too large to keep)
  }
  kept.rank = expected_rank;
  KeptFiles()[path] = std::move(kept);
  return true;
}

std::shared_ptr<const IdxArray> ReadIdxFile(const std::string& path, int expected_rank) {
  const auto it = KeptFiles().find(path);
  FileIdentity now;
  if (it != KeptFiles().end() && it->second.rank == expected_rank && IdentityOf(path, &now) &&
      now == it->second.identity) {
    return it->second.array;
  }
  return std::make_shared<const IdxArray>(ReadIdxFromDisk(path, expected_rank));
}

namespace {

IdxArray ReadIdxFromDisk(const std::string& path, int expected_rank, size_t max_bytes) {
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) throw DataError(path + ": cannot open (is the dataset-fashion-mnist package installed?)");
  uint8_t magic[4];
  if (ReadSome(f.get(), magic, 4, path) != 4) throw DataError(path + ": truncated before the IDX header");
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] != expected_rank) {
    char got[16];
    snprintf(got, sizeof got, "%02x%02x%02x%02x", magic[0], magic[1], magic[2], magic[3]);
    char want[16];
    snprintf(want, sizeof want, "000008%02x", expected_rank);
    throw DataError(path + ": wrong magic number 0x" + got + ", expected 0x" + want +
                    " (unsigned-byte IDX of rank " + std::to_string(expected_rank) + ")");
  }
  IdxArray out;
  size_t total = 1;
  for (int i = 0; i < expected_rank; ++i) {
    uint8_t b[4];
    if (ReadSome(f.get(), b, 4, path) != 4) throw DataError(path + ": truncated inside the IDX header");
    const int64_t dim = (int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    if (dim <= 0 || dim > (1 << 28)) throw DataError(path + ": implausible dimension " + std::to_string(dim));
    out.dims.push_back(dim);
    total *= static_cast<size_t>(dim);
  }
  if (total > kNoBound) throw DataError(path + ": implausible size");
  if (total > max_bytes) throw DataError(path + ": " + std::to_string(total) + " bytes of data, over the bound");
  out.data.resize(total);
  const size_t got = ReadSome(f.get(), out.data.data(), total, path);
  if (got != total) {
    throw DataError(path + ": truncated: header promises " + std::to_string(total) + " bytes of data, file has " +
                    std::to_string(got));
  }
  uint8_t extra;
  if (ReadSome(f.get(), &extra, 1, path) != 0) throw DataError(path + ": trailing bytes after the data");
  return out;
}

}  // namespace

}  // namespace frontier
