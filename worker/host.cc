#include "worker/host.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace frontier {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

std::string FindOnPath(const std::string& program) {
  const auto executable = [](const std::string& path) {
    std::error_code ignored;
    return access(path.c_str(), X_OK) == 0 && !std::filesystem::is_directory(path, ignored);
  };
  if (program.find('/') != std::string::npos) return executable(program) ? program : "";
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::string dir = dirs.substr(begin, end - begin);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (executable(candidate)) return candidate;
    begin = end + 1;
  }
  return "";
}

std::string TrialFolderName(const std::string& trial_id) {
  std::string name;
  for (char c : trial_id)
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
  if (name.empty() || name == "." || name == "..") name = "trial";
  return name;
}

std::string OpenBlasCoreFor(const std::string& detected, bool avx512, bool avx2_fma) {
  std::string name = detected;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name != "prescott") return "";
  if (avx512) return "SkylakeX";
  if (avx2_fma) return "Haswell";
  return "";
}

void UseTheCpusBlasKernels(char** argv) {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  using CoreName = char* (*)();
  const auto corename = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* detected = corename != nullptr ? corename() : nullptr;
  if (detected == nullptr) return;
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const std::string core = OpenBlasCoreFor(detected, avx512, avx2_fma);
  if (core.empty()) return;
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  execv("/proc/self/exe", argv);  // returns only when it failed
#else
  (void)argv;
#endif
}

std::string WriteNewFile(const std::string& path, const std::string& text) {
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot write " + path + ": " + std::strerror(errno);
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string problem = "cannot write " + path + ": " + std::strerror(errno);
      ::close(fd);
      return problem;
    }
    written += static_cast<size_t>(n);
  }
  return ::close(fd) == 0 ? "" : "cannot write " + path + ": " + std::strerror(errno);
}

int OpenRegularFile(const std::string& path, int64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return -1;
  }
  *size = static_cast<int64_t>(info.st_size);
  return fd;
}

int64_t ReadUpTo(int fd, char* buffer, int64_t n) {
  int64_t got = 0;
  while (got < n) {
    const ssize_t read = ::read(fd, buffer + got, static_cast<size_t>(n - got));
    if (read < 0 && errno == EINTR) continue;
    if (read <= 0) break;
    got += read;
  }
  return got;
}

std::optional<std::string> ReadRegularFile(const std::string& path, int64_t max_bytes) {
  int64_t size = 0;
  const int fd = OpenRegularFile(path, &size);
  if (fd < 0) return std::nullopt;
  if (size > max_bytes) {
    ::close(fd);
    throw std::runtime_error(path + ": " + std::to_string(size) + " bytes, more than its bound of " +
                             std::to_string(max_bytes));
  }
  std::string text(static_cast<size_t>(size), '\0');
  text.resize(static_cast<size_t>(ReadUpTo(fd, text.data(), size)));  // a file that shrank since: what is left
  ::close(fd);
  return text;
}

int FreeTcpPort(const std::string& host) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("FreeTcpPort: socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = 0;
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    ::close(fd);
    throw std::runtime_error("FreeTcpPort: '" + host + "' is not an IPv4 address");
  }
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    int error = errno;
    ::close(fd);
    throw std::runtime_error("FreeTcpPort: bind " + host + ":0: " + std::strerror(error));
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

namespace {
constexpr int kMmapThreshold = 64 << 20;
constexpr int kTrimThreshold = 1 << 30;
constexpr int kTopPad = 64 << 20;
}  // namespace

std::string HostAllocatorPolicy() { return "glibc mmap_threshold=64MiB trim_threshold=1GiB top_pad=64MiB"; }

std::string HostAllocatorTunables() {
  return "glibc.malloc.mmap_threshold=" + std::to_string(kMmapThreshold) +
         ":glibc.malloc.trim_threshold=" + std::to_string(kTrimThreshold) +
         ":glibc.malloc.top_pad=" + std::to_string(kTopPad);
}

std::string ConfigureHostAllocator() {
  const bool ok = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1 &&
                  mallopt(M_TOP_PAD, kTopPad) == 1;
  return ok ? HostAllocatorPolicy() : "glibc defaults (mallopt failed)";
}

}  // namespace frontier
