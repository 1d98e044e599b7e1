// The confinement mechanisms of the sandbox (internal to worker/sandbox):
// Landlock, the seccomp filter, capabilities and read-only mounts. The
// functions marked "child" run in a process forked from a possibly
// multithreaded caller: they only make system calls (no allocation, no
// locks) and return an errno value, 0 on success.
#pragma once

#include <linux/filter.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace frontier::sandbox::internal {

// What was applied to a run, as bits (Message::applied).
enum Applied : uint32_t {
  kNetworkNamespace = 1u << 0,
  kPidNamespace = 1u << 1,
  kMountNamespace = 1u << 2,
  kOwnProc = 1u << 3,         // a /proc of the pid namespace mounted over /proc
  kReadOnlyMounts = 1u << 4,  // every mount read-only but a bind of the folder
  kLandlockFilesystem = 1u << 5,
  kLandlockTcp = 1u << 6,
  kLandlockScope = 1u << 7,  // signals and abstract UNIX sockets scoped to the sandbox
  kSeccomp = 1u << 8,
  kNoCapabilities = 1u << 9,
  kRlimits = 1u << 10,
  kSubreaper = 1u << 11,  // without a pid namespace: descendants killed through a subreaper
  kOwnShm = 1u << 12,     // a private tmpfs (kShmOptions) over /dev/shm
};

// The size of the sandbox's own /dev/shm (POSIX semaphores and shared memory).
inline constexpr const char* kShmOptions = "size=64m,mode=1777";

// Landlock access classes of a path rule, masked to what the ABI knows.
enum class Access { kRead, kReadWrite, kDevice, kDeviceReadWrite };

struct LandlockPath {
  const char* path;
  Access access;
  bool optional;           // skipped when it does not exist (system paths, argv[0])
  uint32_t only_with = 0;  // Applied bits the rule needs (e.g. kOwnShm), else skipped
};

// The running kernel's Landlock ABI version; 0 without Landlock.
int LandlockAbi();

// child: a Landlock domain for this process: handles every filesystem access
// right `abi` knows (only `paths` get theirs), TCP bind and connect (abi >= 4,
// no rule: both refused) and scopes signals and abstract UNIX sockets (abi >=
// 6). Sets the kLandlock* bits it applied. Needs no_new_privs. A path whose
// `only_with` bits are not all in *applied gets no rule.
int ApplyLandlock(int abi, const LandlockPath* paths, size_t count, uint32_t* applied);

// The seccomp program Run installs (empty where the architecture is not
// known): socket() of any family but AF_UNIX, and of AF_UNIX datagram
// sockets, fails with EACCES; so does connect(), of every socket (no host
// daemon's UNIX socket is reached); io_uring and clone3 fail with ENOSYS
// (io_uring could create sockets past the filter; clone3's flags cannot be
// read); unshare, setns, clone with namespace flags, mount, umount2,
// pivot_root, bpf, userfaultfd and the keyring calls fail with EPERM; system
// calls of another architecture (i386, x32) fail with EACCES. With
// `kill_on_network` a socket of any family but AF_UNIX kills the process
// (SIGSYS) instead (glibc itself tries nscd's UNIX socket: that stays EACCES).
// With `single_process` fork, vfork, a clone without CLONE_THREAD, setsid
// and setpgid fail with EPERM (Options::single_process).
std::vector<sock_filter> SeccompFilter(bool kill_on_network, bool single_process = false);

// child: installs `filter` (no_new_privs must be set).
int InstallSeccomp(const sock_filter* filter, size_t count);

// child: empties the capability bounding set (where this process may), the
// ambient set and the effective, permitted and inheritable sets. *complete:
// no capability can come back at exec (the bounding set is empty, or the
// process is not root).
int DropCapabilities(bool* complete);

// child: in a mount namespace of its own, the mounts are made private. Then
// each of `mount_points` is remounted read-only and `folder` bound onto
// itself read-write.
int MakeMountsPrivate();
int MakeMountsReadOnly(const char* const* mount_points, size_t count, const char* folder);
// child: a new proc mounted over /proc (in a new pid namespace: its processes only).
int MountOwnProc();
// child: a private tmpfs (kShmOptions) mounted over /dev/shm.
int MountOwnShm();

// The mount points of this process's mount namespace, from /proc/self/mountinfo.
std::vector<std::string> MountPoints();

}  // namespace frontier::sandbox::internal
