#include "worker/sandbox/confine.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <fstream>
#include <map>
#include <sstream>

// Landlock's system calls and constants, defined here because the C library's
// headers may predate the ABI the kernel has (Debian 12's stop at ABI 2).
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

namespace frontier::sandbox::internal {
namespace {

constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;

constexpr uint64_t kFsExecute = 1ull << 0;
constexpr uint64_t kFsWriteFile = 1ull << 1;
constexpr uint64_t kFsReadFile = 1ull << 2;
constexpr uint64_t kFsReadDir = 1ull << 3;
constexpr uint64_t kFsAbi1 = (1ull << 13) - 1;  // execute .. make_sym
constexpr uint64_t kFsRefer = 1ull << 13;       // abi 2
constexpr uint64_t kFsTruncate = 1ull << 14;    // abi 3
constexpr uint64_t kFsIoctlDev = 1ull << 15;    // abi 5
// The rights a rule on a file (not a folder) may hold.
constexpr uint64_t kFsFileRights = kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate | kFsIoctlDev;
constexpr uint64_t kNetBindTcp = 1ull << 0;  // abi 4
constexpr uint64_t kNetConnectTcp = 1ull << 1;
constexpr uint64_t kScopeAbstractUnixSocket = 1ull << 0;  // abi 6
constexpr uint64_t kScopeSignal = 1ull << 1;

struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

uint64_t HandledFilesystemAccess(int abi) {
  uint64_t handled = kFsAbi1;
  if (abi >= 2) handled |= kFsRefer;
  if (abi >= 3) handled |= kFsTruncate;
  if (abi >= 5) handled |= kFsIoctlDev;
  return handled;
}

uint64_t AccessRights(Access access) {
  switch (access) {
    case Access::kRead:
      return kFsExecute | kFsReadFile | kFsReadDir;
    case Access::kReadWrite:
      return ~uint64_t{0};
    case Access::kDevice:
      return kFsReadFile;
    case Access::kDeviceReadWrite:
      return kFsReadFile | kFsWriteFile | kFsTruncate | kFsIoctlDev;
  }
  return 0;
}

// A seccomp program with forward jumps to named labels, resolved by Finish.
class FilterBuilder {
 public:
  void Statement(uint16_t code, uint32_t k) { code_.push_back(BPF_STMT(code, k)); }
  // A conditional jump to `label` when the condition holds (or, with
  // `when_false`, when it does not); otherwise on to the next instruction.
  void Jump(uint16_t code, uint32_t k, const std::string& label, bool when_false = false) {
    fixups_.push_back({code_.size(), label, when_false});
    code_.push_back(BPF_JUMP(code, k, 0, 0));
  }
  void Label(const std::string& name) { labels_[name] = code_.size(); }
  std::vector<sock_filter> Finish() {
    for (const Fixup& fixup : fixups_) {
      const size_t offset = labels_.at(fixup.label) - fixup.at - 1;
      if (offset > 255) return {};  // cannot happen with this program's size
      (fixup.when_false ? code_[fixup.at].jf : code_[fixup.at].jt) = static_cast<uint8_t>(offset);
    }
    return code_;
  }

 private:
  struct Fixup {
    size_t at;
    std::string label;
    bool when_false;
  };
  std::vector<sock_filter> code_;
  std::vector<Fixup> fixups_;
  std::map<std::string, size_t> labels_;
};

// The offset of the low 32 bits of system call argument `i`.
constexpr uint32_t ArgumentLow(int i) {
  return static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * i +
                               (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 0 : 4));
}

uint64_t MountFlagsOf(unsigned long statfs_flags) {
  uint64_t flags = 0;
  if (statfs_flags & ST_NOSUID) flags |= MS_NOSUID;
  if (statfs_flags & ST_NODEV) flags |= MS_NODEV;
  if (statfs_flags & ST_NOEXEC) flags |= MS_NOEXEC;
  if (statfs_flags & ST_NOATIME) flags |= MS_NOATIME;
  if (statfs_flags & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (statfs_flags & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

// Remounts the mount at `path` with `extra` (MS_RDONLY or 0), keeping its
// other per-mount flags (changing them is refused in some namespaces).
int RemountBind(const char* path, unsigned long extra) {
  struct statfs info {};
  if (statfs(path, &info) != 0) return errno;
  const unsigned long flags = MS_REMOUNT | MS_BIND | extra | MountFlagsOf(info.f_flags);
  return mount(nullptr, path, nullptr, flags, nullptr) == 0 ? 0 : errno;
}

}  // namespace

int LandlockAbi() {
  const long version = syscall(__NR_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return version < 0 ? 0 : static_cast<int>(version);
}

int ApplyLandlock(int abi, const LandlockPath* paths, size_t count, uint32_t* applied) {
  RulesetAttr attr{HandledFilesystemAccess(abi), 0, 0};
  size_t size = offsetof(RulesetAttr, handled_access_net);
  if (abi >= 4) {
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
    size = offsetof(RulesetAttr, scoped);
  }
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    size = sizeof attr;
  }
  const int ruleset = static_cast<int>(syscall(__NR_landlock_create_ruleset, &attr, size, 0));
  if (ruleset < 0) return errno;
  int error = 0;
  for (size_t i = 0; i < count && error == 0; ++i) {
    if ((*applied & paths[i].only_with) != paths[i].only_with) continue;
    const int fd = open(paths[i].path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
      if (!paths[i].optional || (errno != ENOENT && errno != ENOTDIR)) error = errno;
      continue;
    }
    struct stat st {};
    PathBeneathAttr rule{AccessRights(paths[i].access) & attr.handled_access_fs, fd};
    if (fstat(fd, &st) != 0) {
      error = errno;
    } else {
      if (!S_ISDIR(st.st_mode)) rule.allowed_access &= kFsFileRights;
      if (rule.allowed_access != 0 &&
          syscall(__NR_landlock_add_rule, ruleset, kRulePathBeneath, &rule, 0) != 0) {
        error = errno;
      }
    }
    close(fd);
  }
  if (error == 0 && syscall(__NR_landlock_restrict_self, ruleset, 0) != 0) error = errno;
  close(ruleset);
  if (error != 0) return error;
  *applied |= kLandlockFilesystem;
  if (abi >= 4) *applied |= kLandlockTcp;
  if (abi >= 6) *applied |= kLandlockScope;
  return 0;
}

std::vector<sock_filter> SeccompFilter(bool kill_on_network, bool single_process) {
#if defined(__x86_64__)
  constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  return {};
#endif
  constexpr uint32_t kNamespaceFlags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |
                                       CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
  FilterBuilder f;
  f.Statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  f.Jump(BPF_JMP | BPF_JEQ | BPF_K, kArch, "eacces", /*when_false=*/true);
  f.Statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
#if defined(__x86_64__)
  f.Jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, "eacces");  // the x32 ABI (__X32_SYSCALL_BIT)
#endif
  f.Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, "socket");
  f.Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, "clone");
  f.Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, "eacces");
  for (uint32_t nr : {__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register, __NR_clone3}) {
    f.Jump(BPF_JMP | BPF_JEQ | BPF_K, nr, "enosys");
  }
  for (uint32_t nr : {__NR_unshare, __NR_setns, __NR_mount, __NR_umount2, __NR_pivot_root, __NR_bpf,
                      __NR_userfaultfd, __NR_keyctl, __NR_add_key, __NR_request_key}) {
    f.Jump(BPF_JMP | BPF_JEQ | BPF_K, nr, "eperm");
  }
  if (single_process) {
#if defined(__NR_fork)
    for (uint32_t nr : {__NR_fork, __NR_vfork}) f.Jump(BPF_JMP | BPF_JEQ | BPF_K, nr, "eperm");
#endif
    for (uint32_t nr : {__NR_setsid, __NR_setpgid}) f.Jump(BPF_JMP | BPF_JEQ | BPF_K, nr, "eperm");
  }
  f.Statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  f.Label("socket");
  f.Statement(BPF_LD | BPF_W | BPF_ABS, ArgumentLow(0));
  f.Jump(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, "network", /*when_false=*/true);
  f.Statement(BPF_LD | BPF_W | BPF_ABS, ArgumentLow(1));
  f.Statement(BPF_ALU | BPF_AND | BPF_K, ~static_cast<uint32_t>(SOCK_NONBLOCK | SOCK_CLOEXEC));
  f.Jump(BPF_JMP | BPF_JEQ | BPF_K, SOCK_DGRAM, "eacces");
  f.Statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  f.Label("clone");
  f.Statement(BPF_LD | BPF_W | BPF_ABS, ArgumentLow(0));
  f.Jump(BPF_JMP | BPF_JSET | BPF_K, kNamespaceFlags, "eperm");
  if (single_process) f.Jump(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, "eperm", /*when_false=*/true);
  f.Statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  f.Label("network");
  f.Statement(BPF_RET | BPF_K, kill_on_network ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | EACCES);
  f.Label("eacces");
  f.Statement(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES);
  f.Label("eperm");
  f.Statement(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
  f.Label("enosys");
  f.Statement(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
  return f.Finish();
}

int InstallSeccomp(const sock_filter* filter, size_t count) {
  sock_fprog program{static_cast<unsigned short>(count), const_cast<sock_filter*>(filter)};
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) == 0 ? 0 : errno;
}

int DropCapabilities(bool* complete) {
  bool bounding_emptied = true;
  for (int cap = 0; cap < 64; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno != EINVAL) bounding_emptied = false;  // EINVAL: past the last capability
      break;
    }
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);  // fails only where ambient sets do not exist
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capset, &header, data) != 0) return errno;
  *complete = bounding_emptied || (getuid() != 0 && geteuid() != 0);
  return 0;
}

int MakeMountsPrivate() {
  return mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 ? 0 : errno;
}

int MakeMountsReadOnly(const char* const* mount_points, size_t count, const char* folder) {
  for (size_t i = 0; i < count; ++i) {
    const int error = RemountBind(mount_points[i], MS_RDONLY);
    // ENOENT/EACCES: a mount point that is gone or under a folder we cannot
    // enter; nothing below it is reachable then.
    if (error != 0 && error != ENOENT && error != EACCES) return error;
  }
  // The bind copies the read-only flag of the mount it is made from; then
  // this one mount is made writable again.
  if (mount(folder, folder, nullptr, MS_BIND, nullptr) != 0) return errno;
  return RemountBind(folder, 0);
}

int MountOwnProc() {
  return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0 ? 0 : errno;
}

int MountOwnShm() {
  return mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, kShmOptions) == 0 ? 0 : errno;
}

std::vector<std::string> MountPoints() {
  std::vector<std::string> points;
  std::ifstream mountinfo("/proc/self/mountinfo");
  for (std::string line; std::getline(mountinfo, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    if (!(fields >> id >> parent >> device >> root >> point)) continue;
    std::string unescaped;  // the kernel writes space, tab, newline and backslash as \ooo
    for (size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size()) {
        unescaped += static_cast<char>(std::stoi(point.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        unescaped += point[i];
      }
    }
    points.push_back(unescaped);
  }
  return points;
}

}  // namespace frontier::sandbox::internal
