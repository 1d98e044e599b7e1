#include "worker/agent/placement.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace frontier {
namespace {

constexpr std::chrono::milliseconds kLockPoll{50};

int ParseCpu(const std::string& text, const std::string& whole) {
  size_t used = 0;
  int cpu = -1;
  try {
    cpu = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || cpu < 0 || cpu >= CPU_SETSIZE) {
    throw std::invalid_argument("'" + whole + "' is not a CPU list such as 0-3,6 ('" + text +
                                "' is not a CPU number)");
  }
  return cpu;
}

// Opens (creating, readable and writable by every user) a lock file; -1 when it cannot.
int OpenLockFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd >= 0) {
    fchmod(fd, 0666);  // another user's worker on this host takes the same lock
    return fd;
  }
  return open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

// flock(fd, operation) polled without blocking until it holds or `give_up`.
bool LockPolling(int fd, int operation, const std::function<bool()>& give_up, const std::function<void()>& waiting) {
  bool told = false;
  for (;;) {
    if (flock(fd, operation | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK && errno != EINTR) return true;  // a file system without flock: nothing to wait for
    if (!told && waiting) waiting();
    told = true;
    if (give_up && give_up()) return false;
    std::this_thread::sleep_for(kLockPoll);
  }
}

class FileHold final : public HostLock::Hold {
 public:
  explicit FileHold(std::vector<int> fds) : fds_(std::move(fds)) {}
  ~FileHold() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);  // releases its flock
    }
  }

 private:
  std::vector<int> fds_;
};

// The mtime a claim file carries while no contender has touched it.
constexpr int64_t kMarkSeconds = 1;

int64_t MtimeNs(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

std::vector<int> ParseCpuList(const std::string& text) {
  std::set<int> cpus;
  std::stringstream parts(text);
  for (std::string part; std::getline(parts, part, ',');) {
    const size_t dash = part.find('-');
    if (dash == std::string::npos) {
      cpus.insert(ParseCpu(part, text));
      continue;
    }
    const int first = ParseCpu(part.substr(0, dash), text), last = ParseCpu(part.substr(dash + 1), text);
    if (last < first) throw std::invalid_argument("'" + text + "': the range " + part + " runs backwards");
    for (int cpu = first; cpu <= last; ++cpu) cpus.insert(cpu);
  }
  if (cpus.empty()) throw std::invalid_argument("'" + text + "' names no CPU");
  return {cpus.begin(), cpus.end()};
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += std::to_string(cpus[i]);
    if (j > i) text += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

SlotCpus SplitCpus(const std::vector<int>& cpus, int slots) {
  SlotCpus split;
  const int n = static_cast<int>(cpus.size());
  if (slots < 1 || n == 0) return split;
  if (n < slots) {
    split.shared = true;
    for (int i = 0; i < slots; ++i) split.slots.push_back({cpus[i % n]});
    return split;
  }
  const int each = n / slots;
  for (int i = 0; i < slots; ++i) split.slots.emplace_back(cpus.begin() + i * each, cpus.begin() + (i + 1) * each);
  split.unused.assign(cpus.begin() + slots * each, cpus.end());
  return split;
}

namespace {

// flock(fd, LOCK_EX) blocking, on a thread of its own so that `give_up` can
// still end the wait: the kernel wakes a blocked waiter the moment the lock
// is released, before a process that merely polls (a worker's next trial)
// gets there. Returns the fd holding the lock, or -1 after giving up (the
// thread then closes the fd once its flock returns).
int BlockingExclusive(int fd, const std::function<bool()>& give_up, const std::function<void()>& waiting) {
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
  if (errno != EWOULDBLOCK) return fd;
  if (waiting) waiting();
  struct State {
    std::mutex mutex;
    std::condition_variable done;
    bool locked = false;
    bool abandoned = false;
  };
  auto state = std::make_shared<State>();
  std::thread([fd, state] {
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    std::lock_guard<std::mutex> lock(state->mutex);
    state->locked = true;
    if (state->abandoned) close(fd);
    state->done.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(state->mutex);
  while (!state->done.wait_for(lock, kLockPoll, [&] { return state->locked; })) {
    if (give_up && give_up()) {
      state->abandoned = true;
      return -1;
    }
  }
  return fd;
}

}  // namespace

std::unique_ptr<HostLock::Hold> HostLock::Exclusive(const std::function<bool()>& give_up,
                                                    const std::function<void()>& waiting) {
  if (path_.empty()) return std::make_unique<FileHold>(std::vector<int>{});
  // The turnstile first: trials that come later wait at it, so a calibration
  // waiting for the running trials to end is not overtaken by new ones.
  int turn = OpenLockFile(path_ + ".turn");
  if (turn >= 0 && (turn = BlockingExclusive(turn, give_up, waiting)) < 0) return nullptr;
  const int lock = OpenLockFile(path_);
  if (lock >= 0 && !LockPolling(lock, LOCK_EX, give_up, waiting)) {
    close(lock);
    if (turn >= 0) close(turn);
    return nullptr;
  }
  return std::make_unique<FileHold>(std::vector<int>{lock, turn});
}

std::unique_ptr<HostLock::Hold> HostLock::Shared(const std::function<bool()>& give_up) {
  if (path_.empty()) return std::make_unique<FileHold>(std::vector<int>{});
  const int turn = OpenLockFile(path_ + ".turn");
  if (turn >= 0 && !LockPolling(turn, LOCK_SH, give_up, nullptr)) {
    close(turn);
    return nullptr;
  }
  const int lock = OpenLockFile(path_);
  const bool held = lock < 0 || LockPolling(lock, LOCK_SH, give_up, nullptr);
  if (turn >= 0) close(turn);  // past the turnstile
  if (!held) {
    close(lock);
    return nullptr;
  }
  return std::make_unique<FileHold>(std::vector<int>{lock});
}

CpuClaim::CpuClaim(const std::string& host_lock_path, const std::vector<int>& devices, const std::string& kind) {
  if (host_lock_path.empty()) return;
  for (int device : devices) {
    File file;
    file.fd = OpenLockFile(host_lock_path + kind + std::to_string(device));
    if (file.fd < 0) continue;
    // A mark no contender leaves (the epoch's first second), written before
    // the lock is tried: a contender's touch (now) always comes after the
    // holder's mark, so the holder cannot overwrite it (marking after taking
    // the lock raced with a contender that failed in between).
    const timespec mark[2] = {{0, UTIME_OMIT}, {kMarkSeconds, 0}};
    futimens(file.fd, mark);
    if (flock(file.fd, LOCK_EX | LOCK_NB) == 0) {
      file.held = true;
    } else {
      contended_at_start_ = true;
      futimens(file.fd, nullptr);  // tells the holder that it shared this core
    }
    files_.push_back(file);
  }
}

CpuClaim::~CpuClaim() {
  for (const File& file : files_) close(file.fd);
}

bool CpuClaim::Shared() const {
  if (contended_at_start_) return true;
  return std::any_of(files_.begin(), files_.end(),
                     [](const File& file) { return file.held && MtimeNs(file.fd) != kMarkSeconds * 1000000000LL; });
}

}  // namespace frontier
