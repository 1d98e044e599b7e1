#include "worker/sandbox/sandbox.h"

#include "worker/sandbox/program.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace frontier::sandbox {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kHelper = SANDBOX_HELPER;  // tests/worker/sandbox/sandbox_helper.cc

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool HasIsolation(const Outcome& outcome, const std::string& prefix) {
  return std::any_of(outcome.isolation.begin(), outcome.isolation.end(),
                     [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
}

// A folder made for the test, removed after it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "sandbox-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

class SandboxTest : public ::testing::Test {
 protected:
  Options Program(std::vector<std::string> argv) {
    Options options;
    options.argv = std::move(argv);
    options.folder = folder_.path().string();
    options.limits.wall_seconds = 20;
    return options;
  }
  Options Helper(std::vector<std::string> args) {
    args.insert(args.begin(), kHelper);
    return Program(std::move(args));
  }

  TempDir folder_;   // the sandbox's folder
  TempDir outside_;  // a folder of the test's it was not given
};

// The processes whose command line holds `marker`, from the host's /proc.
int ProcessesWith(const std::string& marker) {
  int found = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = Slurp(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(marker) != std::string::npos) ++found;
  }
  return found;
}

int OpenDescriptors() {
  return static_cast<int>(std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator()));
}

TEST_F(SandboxTest, AvailableIsolationIsProbedOnce) {
  const std::vector<std::string> isolation = AvailableIsolation();
  for (const std::string& line : isolation) std::printf("isolation: %s\n", line.c_str());
  EXPECT_THAT(isolation, Contains("rlimits"));
  EXPECT_EQ(AvailableIsolation(), isolation);
  const Outcome outcome = sandbox::Run(Program({"/bin/true"}));
  ASSERT_TRUE(outcome.ok()) << outcome.Reason();
  EXPECT_EQ(outcome.isolation, isolation);
  if (geteuid() == 0) {
    EXPECT_THAT(isolation, Contains("network namespace"));
    EXPECT_THAT(isolation, Contains("pid namespace"));
  }
}

// A TCP listener on 127.0.0.1 the sandbox must not reach.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), size) != 0 || listen(fd_, 8) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
    }
    port_ = ntohs(address.sin_port);
  }
  ~Listener() { close(fd_); }
  int port() const { return port_; }
  // Whether a connection is waiting (within 200 ms).
  bool Connected() {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 200) > 0;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST_F(SandboxTest, NoNetwork) {
  Listener listener;
  const Outcome outcome = sandbox::Run(Helper({"connect", std::to_string(listener.port())}));
  EXPECT_EQ(outcome.ending, Ending::kExited) << outcome.Reason();
  EXPECT_EQ(outcome.exit_code, 3) << outcome.stdout_text << outcome.stderr_text;
  EXPECT_FALSE(listener.Connected());
  EXPECT_TRUE(HasIsolation(outcome, "network namespace") ||
              HasIsolation(outcome, "seccomp: socket families"));
}

TEST_F(SandboxTest, NoNetworkWithoutNamespaces) {  // as in a pod that refuses namespaces
  Listener listener;
  Options options = Helper({"connect", std::to_string(listener.port())});
  options.use_namespaces = false;
  const Outcome outcome = sandbox::Run(options);
  EXPECT_EQ(outcome.exit_code, 3) << outcome.Reason() << outcome.stdout_text;
  EXPECT_THAT(outcome.stderr_text, HasSubstr("socket: Permission denied"));
  EXPECT_FALSE(listener.Connected());
  EXPECT_THAT(outcome.isolation, Not(Contains("network namespace")));
  EXPECT_TRUE(HasIsolation(outcome, "seccomp: socket families other than AF_UNIX refused"));
  EXPECT_TRUE(HasIsolation(outcome, "landlock tcp"));
  // Nor a datagram UNIX socket (it could write to host daemons' sockets).
  options.argv = {kHelper, "unix-dgram"};
  EXPECT_EQ(sandbox::Run(options).exit_code, 3);
}

TEST_F(SandboxTest, WritesOnlyInItsFolder) {
  const fs::path outside = outside_.path() / "escaped";
  const Outcome denied = sandbox::Run(Helper({"write", outside.string()}));
  EXPECT_EQ(denied.exit_code, 3) << denied.Reason();
  EXPECT_FALSE(fs::exists(outside));
  const Outcome inside = sandbox::Run(Helper({"write", "inside"}));  // relative: in its folder, its cwd
  EXPECT_TRUE(inside.ok()) << inside.Reason() << inside.stderr_text;
  EXPECT_EQ(Slurp(folder_.path() / "inside"), "written\n");
  const Outcome absolute = sandbox::Run(Helper({"write", (folder_.path() / "absolute").string()}));
  EXPECT_TRUE(absolute.ok()) << absolute.Reason();
}

TEST_F(SandboxTest, ReadsOnlyTheSystemAndGivenPaths) {
  std::ofstream(outside_.path() / "secret") << "secret";
  const Outcome denied = sandbox::Run(Helper({"read", (outside_.path() / "secret").string()}));
  EXPECT_EQ(denied.exit_code, 3) << denied.Reason();
  EXPECT_EQ(denied.stdout_text, "");
  Options allowed = Helper({"read", (outside_.path() / "secret").string()});
  allowed.read_only = {outside_.path().string()};
  const Outcome read = sandbox::Run(allowed);
  EXPECT_TRUE(read.ok()) << read.Reason() << read.stderr_text;
  EXPECT_EQ(read.stdout_text, "secret");
  allowed.argv = {kHelper, "write", (outside_.path() / "secret").string()};  // readable, still not writable
  EXPECT_EQ(sandbox::Run(allowed).exit_code, 3);
  EXPECT_EQ(Slurp(outside_.path() / "secret"), "secret");
  EXPECT_TRUE(sandbox::Run(Helper({"read", "/etc/hostname"})).ok());
}

TEST_F(SandboxTest, ReadOnlyMountsWithoutLandlock) {
  if (geteuid() != 0) GTEST_SKIP() << "the mount-namespace fallback needs root";
  Options options = Helper({"write", (outside_.path() / "escaped").string()});
  options.use_landlock = false;
  const Outcome denied = sandbox::Run(options);
  EXPECT_EQ(denied.exit_code, 3) << denied.Reason();
  EXPECT_THAT(denied.stderr_text, HasSubstr("Read-only file system"));
  EXPECT_FALSE(fs::exists(outside_.path() / "escaped"));
  EXPECT_THAT(denied.isolation, Contains("read-only mounts except the folder"));
  EXPECT_FALSE(HasIsolation(denied, "landlock"));
  options.argv = {kHelper, "write", "inside"};
  const Outcome inside = sandbox::Run(options);
  EXPECT_TRUE(inside.ok()) << inside.Reason() << inside.stderr_text;
  EXPECT_TRUE(fs::exists(folder_.path() / "inside"));
}

TEST_F(SandboxTest, RefusesAnUnconfinedFilesystemUnlessAllowed) {
  Options options = Helper({"write", "inside"});
  options.use_landlock = false;
  options.use_namespaces = false;
  const Outcome refused = sandbox::Run(options);
  EXPECT_EQ(refused.ending, Ending::kStartFailed);
  EXPECT_THAT(refused.Reason(), HasSubstr("allow_unconfined_filesystem"));
  EXPECT_FALSE(fs::exists(folder_.path() / "inside"));
  options.allow_unconfined_filesystem = true;
  const Outcome allowed = sandbox::Run(options);
  EXPECT_TRUE(allowed.ok()) << allowed.Reason();
  EXPECT_FALSE(HasIsolation(allowed, "landlock filesystem"));
}

// The grandchild (in a session of its own) rewrites `beat` every 50 ms until killed.
void ExpectGrandchildGone(const fs::path& folder, const std::string& marker) {
  EXPECT_EQ(ProcessesWith(marker), 0);
  const std::string beat = Slurp(folder / "beat");
  EXPECT_FALSE(beat.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Slurp(folder / "beat"), beat);
}

std::string Marker() {
  static std::atomic<int> counter{0};
  return "frontier-sandbox-marker-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

TEST_F(SandboxTest, KillsEverythingItStarted) {
  for (bool namespaces : {true, false}) {
    SCOPED_TRACE(namespaces ? "pid namespace" : "subreaper");
    fs::remove(folder_.path() / "beat");
    const std::string marker = Marker();
    Options options = Helper({"escape", marker});
    options.use_namespaces = namespaces;
    const Outcome outcome = sandbox::Run(options);
    EXPECT_TRUE(outcome.ok()) << outcome.Reason() << outcome.stderr_text;
    EXPECT_EQ(HasIsolation(outcome, "pid namespace"), namespaces && geteuid() == 0);
    ExpectGrandchildGone(folder_.path(), marker);
  }
}

TEST_F(SandboxTest, TimeoutKillsEverythingItStarted) {
  for (bool namespaces : {true, false}) {
    SCOPED_TRACE(namespaces ? "pid namespace" : "subreaper");
    fs::remove(folder_.path() / "beat");
    const std::string marker = Marker();
    Options options = Helper({"escape-and-hang", marker});
    options.use_namespaces = namespaces;
    options.limits.wall_seconds = 1;
    const Outcome outcome = sandbox::Run(options);
    EXPECT_EQ(outcome.ending, Ending::kTimedOut) << outcome.Reason();
    ExpectGrandchildGone(folder_.path(), marker);
  }
}

TEST_F(SandboxTest, WallTimeLimit) {
  Options options = Program({"/bin/sleep", "100"});
  options.limits.wall_seconds = 1;
  const auto start = std::chrono::steady_clock::now();
  const Outcome outcome = sandbox::Run(options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(outcome.ending, Ending::kTimedOut);
  EXPECT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.Reason(), HasSubstr("s of wall time (limit 1 s)"));
  EXPECT_THAT(outcome.Reason(), HasSubstr("timed out after "));
  EXPECT_GE(outcome.wall_seconds, 1.0);
}

TEST_F(SandboxTest, CpuLimit) {
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{kHelper, "busy"},
        std::vector<std::string>{"/bin/sh", "-c", "while :; do :; done"},
        std::vector<std::string>{kHelper, "busy-past-sigxcpu"}}) {
    SCOPED_TRACE(argv.back());
    Options options = Program(argv);
    options.limits.cpu_seconds = 1;
    const Outcome outcome = sandbox::Run(options);
    EXPECT_EQ(outcome.ending, Ending::kCpuLimit) << outcome.Reason();
    EXPECT_EQ(outcome.signal, argv.back() == "busy-past-sigxcpu" ? SIGKILL : SIGXCPU);
    EXPECT_EQ(outcome.Reason(), "used its 1 s of CPU time");
    EXPECT_GT(outcome.cpu_seconds, 0);  // not more: RLIMIT_CPU counts ticks, which run ahead under load
  }
}

TEST_F(SandboxTest, MemoryLimit) {
  Options options = Program({"/usr/bin/python3", "-c", "x = bytearray(2 << 30); print('allocated')"});
  options.limits.memory_bytes = int64_t{256} << 20;
  const Outcome outcome = sandbox::Run(options);
  EXPECT_FALSE(outcome.ok()) << outcome.Reason();
  EXPECT_EQ(outcome.stdout_text, "");
  EXPECT_THAT(outcome.stderr_text, HasSubstr("MemoryError"));
}

TEST_F(SandboxTest, OutputLimit) {
  for (int stream : {1, 2}) {
    Options options = Helper({"flood", std::to_string(stream)});
    options.limits.output_bytes = 4096;
    const Outcome outcome = sandbox::Run(options);
    EXPECT_EQ(outcome.ending, Ending::kOutputLimit) << outcome.Reason();
    EXPECT_EQ(outcome.output_stream, stream);
    EXPECT_EQ((stream == 1 ? outcome.stdout_text : outcome.stderr_text).size(), 4096u);
    EXPECT_EQ(outcome.Reason(),
              std::string("wrote more than 4096 bytes to standard ") + (stream == 1 ? "output" : "error"));
  }
}

TEST_F(SandboxTest, ExitCodesAndSignalsPropagate) {
  for (bool namespaces : {true, false}) {
    SCOPED_TRACE(namespaces ? "namespaces" : "no namespaces");
    const auto run = [&](std::vector<std::string> args) {
      Options options = Helper(std::move(args));
      options.use_namespaces = namespaces;
      return sandbox::Run(options);
    };
    const Outcome crash = run({"segv"});
    EXPECT_EQ(crash.ending, Ending::kSignaled);
    EXPECT_EQ(crash.signal, SIGSEGV);
    EXPECT_EQ(crash.Reason(), "killed by SIGSEGV (Segmentation fault)");
    const Outcome three = run({"exit", "3"});
    EXPECT_EQ(three.ending, Ending::kExited);
    EXPECT_EQ(three.exit_code, 3);
    EXPECT_EQ(three.Reason(), "exited with code 3");
    EXPECT_FALSE(three.ok());
    const Outcome term = run({"raise", std::to_string(SIGTERM)});  // a signal to itself is not ignored
    EXPECT_EQ(term.ending, Ending::kSignaled) << term.Reason();
    EXPECT_EQ(term.signal, SIGTERM);
    const Outcome abort = run({"abort"});
    EXPECT_EQ(abort.signal, SIGABRT) << abort.Reason();
    EXPECT_TRUE(run({"exit", "0"}).ok());
  }
}

TEST_F(SandboxTest, StartFailuresAreOutcomes) {
  const Outcome missing = sandbox::Run(Program({"/nonexistent/program"}));
  EXPECT_EQ(missing.ending, Ending::kStartFailed);
  EXPECT_EQ(missing.Reason(), "could not start: executing /nonexistent/program: No such file or directory");
  EXPECT_EQ(sandbox::Run(Program({"sh", "-c", "true"})).ending, Ending::kStartFailed);  // not absolute
  EXPECT_EQ(sandbox::Run(Program({})).ending, Ending::kStartFailed);
  Options no_folder = Program({"/bin/true"});
  no_folder.folder = (outside_.path() / "missing").string();
  EXPECT_THAT(sandbox::Run(no_folder).Reason(), HasSubstr("No such file or directory"));
  Options bad_read_only = Program({"/bin/true"});
  bad_read_only.read_only = {(outside_.path() / "missing").string()};
  EXPECT_EQ(sandbox::Run(bad_read_only).ending, Ending::kStartFailed);
}

TEST_F(SandboxTest, EnvironmentIsNotInherited) {
  setenv("FRONTIER_SANDBOX_SECRET", "leaked", 1);
  Options options = Program({"/bin/sh", "-c",
                             "echo \"[$FRONTIER_SANDBOX_SECRET] $GIVEN $PATH\"; echo $HOME; "
                             "echo $TMPDIR; pwd; env | wc -l"});
  options.environment = {{"GIVEN", "given"}};
  const Outcome outcome = sandbox::Run(options);
  unsetenv("FRONTIER_SANDBOX_SECRET");
  ASSERT_TRUE(outcome.ok()) << outcome.Reason() << outcome.stderr_text;
  const std::string folder = fs::canonical(folder_.path()).string();
  // sh adds PWD (and OLDPWD): 4 + 1 from the shell.
  EXPECT_EQ(outcome.stdout_text,
            "[] given /usr/bin:/bin\n" + folder + "\n" + folder + "\n" + folder + "\n" + "5\n");
}

TEST_F(SandboxTest, StandardInputIsDelivered) {
  std::string text;
  for (int i = 0; text.size() < 600000; ++i) text += "line " + std::to_string(i) + "\n";
  Options options = Program({"/bin/cat"});
  options.stdin_text = text;  // more than a pipe holds, both ways at once
  const Outcome outcome = sandbox::Run(options);
  ASSERT_TRUE(outcome.ok()) << outcome.Reason();
  EXPECT_EQ(outcome.stdout_text, text);
  EXPECT_TRUE(sandbox::Run(Program({"/bin/cat"})).ok());  // empty: end of file at once
  options.argv = {"/bin/true"};  // never reads it: the write fails with EPIPE, no SIGPIPE kills the caller
  const Outcome unread = sandbox::Run(options);
  EXPECT_TRUE(unread.ok()) << unread.Reason();
}

TEST_F(SandboxTest, CompilesAndRunsACandidate) {  // the kernel lab's two steps
  if (access("/usr/bin/g++", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/g++";
  std::ofstream(folder_.path() / "candidate.cc") << "#include <cstdio>\nint main() { std::puts(\"ran\"); }\n";
  const Outcome compiled = sandbox::Run(Program({"/usr/bin/g++", "-O1", "-o", "candidate", "candidate.cc"}));
  ASSERT_TRUE(compiled.ok()) << compiled.Reason() << compiled.stderr_text;
  const Outcome ran = sandbox::Run(Program({(folder_.path() / "candidate").string()}));
  EXPECT_TRUE(ran.ok()) << ran.Reason() << ran.stderr_text;
  EXPECT_EQ(ran.stdout_text, "ran\n");
}

TEST_F(SandboxTest, BothPipesFillingDoNotDeadlock) {
  const Outcome outcome = sandbox::Run(Helper({"both", "300000"}));
  ASSERT_TRUE(outcome.ok()) << outcome.Reason();
  EXPECT_EQ(outcome.stderr_text, std::string(300000, 'e'));
  EXPECT_EQ(outcome.stdout_text, std::string(300000, 'o'));
}

TEST_F(SandboxTest, RunsConcurrentlyFromThreads) {
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        const Outcome outcome = sandbox::Run(Helper({"both", std::to_string(100000 + 1000 * t + i)}));
        if (outcome.ok() && outcome.stdout_text.size() == 100000u + 1000 * t + i &&
            outcome.stderr_text.size() == outcome.stdout_text.size()) {
          ++good;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(good.load(), 12);
}

TEST_F(SandboxTest, ClosesEveryDescriptorAndReapsEveryChild) {
  const int leaked = open("/dev/null", O_RDONLY);  // not close-on-exec: must not reach the sandbox
  const Outcome fds = sandbox::Run(Helper({"fds"}));
  EXPECT_EQ(fds.stdout_text, "0 1 2\n");
  close(leaked);
  const int before = OpenDescriptors();
  for (int i = 0; i < 20; ++i) {
    const Outcome outcome = sandbox::Run(Helper({i % 2 ? "exit" : "segv", "0"}));
    EXPECT_NE(outcome.ending, Ending::kStartFailed);
  }
  EXPECT_EQ(OpenDescriptors(), before);
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);  // no child left, not even a zombie
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(SandboxTest, SeesOnlyItsOwnProcessesAndNoCapabilities) {
  const Outcome outcome = sandbox::Run(
      Program({"/bin/sh", "-c", "echo $$; ls /proc | grep -c '^[0-9]'; grep CapEff /proc/self/status"}));
  ASSERT_TRUE(outcome.ok()) << outcome.Reason() << outcome.stderr_text;
  EXPECT_THAT(outcome.stdout_text, HasSubstr("CapEff:\t0000000000000000"));
  if (!HasIsolation(outcome, "own /proc")) GTEST_SKIP() << "no pid namespace here";
  std::istringstream lines(outcome.stdout_text);
  int pid = 0, processes = 0;
  lines >> pid >> processes;
  EXPECT_EQ(pid, 2);        // pid 1 is the sandbox's init
  EXPECT_LE(processes, 4);  // init, sh, ls, grep
}

TEST_F(SandboxTest, HasADevShmOfItsOwn) {
  const std::string name = "frontier-sandbox-test-" + std::to_string(getpid());
  const Outcome outcome =
      sandbox::Run(Program({"/usr/bin/python3", "-c",
                            "import multiprocessing as mp\nopen('/dev/shm/" + name +
                                "', 'w').write('x')\n"
                                "with mp.Pool(2) as pool: print(pool.map(abs, [-1, -2]))"}));
  if (!HasIsolation(outcome, "own /dev/shm")) {
    EXPECT_FALSE(outcome.ok());  // the host's /dev/shm is not writable
    GTEST_SKIP() << "no mount namespace here";
  }
  EXPECT_TRUE(outcome.ok()) << outcome.Reason() << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text, "[1, 2]\n");
  EXPECT_FALSE(fs::exists("/dev/shm/" + name));
}

TEST_F(SandboxTest, SingleProcessRefusesProcessesNotThreads) {
  Options options = Helper({"processes"});
  const Outcome free = sandbox::Run(options);
  ASSERT_TRUE(free.ok()) << free.Reason() << free.stderr_text;
  EXPECT_THAT(free.stdout_text, HasSubstr("fork: ok"));
  options.single_process = true;
  const Outcome single = sandbox::Run(options);
  ASSERT_TRUE(single.ok()) << single.Reason() << single.stderr_text;
  EXPECT_THAT(single.stdout_text, HasSubstr("fork: Operation not permitted"));
  EXPECT_THAT(single.stdout_text, HasSubstr("setsid: Operation not permitted"));
  EXPECT_THAT(single.stdout_text, HasSubstr("thread: ok"));
}

// The judge's clock (lab_timing.h) stops a runner and reads and writes its memory.
TEST_F(SandboxTest, ProgramIsFoundStoppedReadWrittenAndContinued) {
  Options options = Helper({"count"});
  options.single_process = true;
  std::atomic<int> group{0};
  options.on_start = [&](int g) { group = g; };
  Outcome outcome;
  std::thread run([&] { outcome = sandbox::Run(options); });
  const fs::path address_file = folder_.path() / "address";
  for (int i = 0; i < 1000 && !fs::exists(address_file); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(fs::exists(address_file));
  ASSERT_GT(group.load(), 0);
  const sandbox::Program program = sandbox::Program::Find(group);
  EXPECT_NE(program.pid(), group.load());  // the program, not the supervisor leading the group
  const uint64_t address = std::stoull(Slurp(address_file));
  const auto counter = [&] {
    unsigned long value = 0;
    program.Read(address, &value, sizeof value);
    return value;
  };
  program.Stop(5);
  const unsigned long stopped = counter();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(counter(), stopped);  // stopped: it counts no further
  const unsigned long zero = 0;
  program.Write(address, &zero, sizeof zero);
  EXPECT_EQ(counter(), 0u);
  program.Continue();
  bool counted = false;
  for (int i = 0; i < 500 && !counted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    counted = counter() > 0;
  }
  EXPECT_TRUE(counted);
  EXPECT_THROW(program.Read(8, nullptr, 8),
               std::runtime_error);  // an address it does not map: named, not a crash
  kill(program.pid(), SIGKILL);
  run.join();
  EXPECT_EQ(outcome.ending, Ending::kSignaled);
  EXPECT_EQ(outcome.signal, SIGKILL);
  EXPECT_THROW(sandbox::Program::Find(group), std::runtime_error);  // gone
}

}  // namespace
}  // namespace frontier::sandbox
