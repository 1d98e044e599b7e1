#include "worker/trial/lab_exchange.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "worker/host.h"

namespace frontier::lab {
namespace {

constexpr char kMagic[4] = {'F', 'L', 'T', '1'};
constexpr int kMaxDims = 8;

struct DtypeCode {
  uint8_t code;
  c10::ScalarType type;
};
constexpr DtypeCode kDtypes[] = {{1, torch::kFloat}, {2, torch::kDouble}, {3, torch::kBFloat16}, {4, torch::kHalf},
                                 {5, torch::kLong},  {6, torch::kInt},    {7, torch::kBool},     {8, torch::kByte}};

uint8_t CodeOf(c10::ScalarType type) {
  for (const DtypeCode& d : kDtypes) {
    if (d.type == type) return d.code;
  }
  throw std::runtime_error(std::string("lab exchange: no code for dtype ") + c10::toString(type));
}

template <typename T>
void Put(std::ofstream& out, T value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof(T));
}

// A file another process wrote (a sandboxed runner), opened as it is now: a regular file only, no link
// followed, no FIFO waited on (worker/host.h), refused at once when larger than its bound.
class Reader {
 public:
  Reader(const std::string& path, int64_t max_bytes) : path_(path), left_(max_bytes) {
    fd_ = OpenRegularFile(path, &size_);
    if (fd_ < 0) throw std::runtime_error(path + ": cannot be read (not there, or not a regular file)");
    if (size_ > max_bytes) {
      ::close(fd_);
      throw std::runtime_error(path + ": larger than its bound of " + std::to_string(max_bytes) + " bytes");
    }
  }
  ~Reader() { ::close(fd_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  void Bytes(void* to, int64_t n) {
    if (n < 0 || n > left_) throw std::runtime_error(path_ + ": larger than its bound");
    if (ReadUpTo(fd_, static_cast<char*>(to), n) != n) throw std::runtime_error(path_ + ": ends early");
    left_ -= n;
  }
  template <typename T>
  T Get() {
    T value;
    Bytes(&value, sizeof(T));
    return value;
  }
  int64_t left() const { return left_; }
  bool AtEnd() {
    char byte = 0;
    return ReadUpTo(fd_, &byte, 1) == 0;
  }

 private:
  int fd_ = -1;
  int64_t size_ = 0;
  std::string path_;
  int64_t left_;
};

}  // namespace

void WriteTensors(const std::string& path, const std::vector<torch::Tensor>& tensors) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(path + ": cannot be written");
  out.write(kMagic, sizeof(kMagic));
  Put<uint32_t>(out, static_cast<uint32_t>(tensors.size()));
  for (const torch::Tensor& t : tensors) {
    Put<uint8_t>(out, t.defined() ? 1 : 0);
    if (!t.defined()) continue;
    const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    Put<uint8_t>(out, CodeOf(c.scalar_type()));
    Put<uint8_t>(out, static_cast<uint8_t>(c.dim()));
    for (int64_t d = 0; d < c.dim(); ++d) Put<int64_t>(out, c.size(d));
    out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
  }
  if (!out) throw std::runtime_error(path + ": write failed");
}

std::vector<torch::Tensor> ReadTensors(const std::string& path, int64_t max_bytes, size_t count) {
  Reader in(path, max_bytes);
  char magic[4];
  in.Bytes(magic, sizeof(magic));
  if (std::memcmp(magic, kMagic, sizeof(magic)) != 0) throw std::runtime_error(path + ": not a tensor file");
  const uint32_t n = in.Get<uint32_t>();
  if (n != count) {
    throw std::runtime_error(path + ": holds " + std::to_string(n) + " tensors, " + std::to_string(count) +
                             " expected");
  }
  std::vector<torch::Tensor> tensors;
  for (uint32_t i = 0; i < n; ++i) {
    if (in.Get<uint8_t>() == 0) {
      tensors.emplace_back();
      continue;
    }
    const uint8_t code = in.Get<uint8_t>();
    const DtypeCode* dtype = nullptr;
    for (const DtypeCode& d : kDtypes) dtype = d.code == code ? &d : dtype;
    if (dtype == nullptr) throw std::runtime_error(path + ": tensor " + std::to_string(i) + " has an unknown dtype");
    const int dims = in.Get<uint8_t>();
    if (dims > kMaxDims) throw std::runtime_error(path + ": tensor " + std::to_string(i) + " has too many dims");
    std::vector<int64_t> sizes(dims);
    int64_t bytes = static_cast<int64_t>(c10::elementSize(dtype->type));
    for (int64_t& size : sizes) {
      size = in.Get<int64_t>();
      if (size < 0 || (size > 0 && bytes > in.left() / size)) {
        throw std::runtime_error(path + ": tensor " + std::to_string(i) + " is larger than the file's bound");
      }
      bytes *= std::max<int64_t>(size, 1);
      if (size == 0) bytes = 0;
    }
    torch::Tensor t = torch::empty(sizes, dtype->type);
    in.Bytes(t.data_ptr(), static_cast<int64_t>(t.nbytes()));
    tensors.push_back(std::move(t));
  }
  if (!in.AtEnd()) throw std::runtime_error(path + ": has bytes after its last tensor");
  return tensors;
}

int DtypeCodeOf(c10::ScalarType type) { return CodeOf(type); }

c10::ScalarType DtypeOfCode(int64_t code) {
  for (const DtypeCode& d : kDtypes) {
    if (d.code == code) return d.type;
  }
  throw std::runtime_error("lab exchange: unknown dtype code " + std::to_string(code));
}

std::string ReadBoundedFile(const std::string& path, int64_t max_bytes) {
  std::optional<std::string> text = ReadRegularFile(path, max_bytes);
  if (!text) throw std::runtime_error(path + ": cannot be read (not there, or not a regular file)");
  return std::move(*text);
}

}  // namespace frontier::lab
