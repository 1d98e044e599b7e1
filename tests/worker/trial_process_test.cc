// ProcessTrialLauncher and ProcessExit: the child process side of the agent
// (worker/agent/trial_process.h), with shell-script trial binaries.
#include "worker/agent/trial_process.h"

#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace frontier {
namespace {

using std::chrono::milliseconds;

TEST(ProcessExitTest, Describe) {
  EXPECT_EQ((ProcessExit{false, 2, 0}).Describe(), "exit code 2");
  EXPECT_EQ((ProcessExit{true, 0, SIGKILL}).Describe(), "signal SIGKILL (Killed)");
}

TEST(ProcessTrialLauncherTest, StreamsLinesAndKeepsTheStderrTail) {
  std::string pattern = (std::filesystem::temp_directory_path() / "frontier-launcher-test-XXXXXX").string();
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const std::string script = pattern + "/trial.sh";
  std::ofstream(script) << "#!/bin/sh\n"
                           "echo \"spec=$2 every=$4 var=$FRONTIER_TEST_VAR\"\n"
                           "for i in $(seq 20); do echo \"warning $i\" >&2; done\n"
                           "printf 'no newline at the end'\n"
                           "exit 3\n";
  chmod(script.c_str(), 0755);
  ProcessTrialLauncher launcher(script);
  std::string error;
  TrialCommand command;
  command.spec_path = "spec.json";
  command.progress_every = 7;
  command.environment = {{"FRONTIER_TEST_VAR", "x"}};
  auto process = launcher.Start(command, &error);
  ASSERT_NE(process, nullptr) << error;
  std::vector<std::string> lines;
  std::string line;
  TrialProcess::ReadStatus status;
  while ((status = process->ReadLine(milliseconds(5000), &line)) == TrialProcess::ReadStatus::kLine) {
    lines.push_back(line);
  }
  EXPECT_EQ(status, TrialProcess::ReadStatus::kEnd);
  EXPECT_THAT(lines, ::testing::ElementsAre("spec=spec.json every=7 var=x", "no newline at the end"));
  const auto exit = process->Wait(milliseconds(5000));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->Describe(), "exit code 3");
  EXPECT_EQ(process->StderrTail(),
            "warning 13 | warning 14 | warning 15 | warning 16 | warning 17 | warning 18 | warning 19 | "
            "warning 20");
  std::filesystem::remove_all(pattern);
}

// A trial binary that runs `body` (shell), in a folder of its own.
class ScriptTrial {
 public:
  explicit ScriptTrial(const std::string& body, const TrialCommand& base = TrialCommand()) {
    dir_ = (std::filesystem::temp_directory_path() / "frontier-bounds-test-XXXXXX").string();
    if (mkdtemp(dir_.data()) == nullptr) ADD_FAILURE() << "mkdtemp";
    const std::string script = dir_ + "/trial.sh";
    std::ofstream(script) << "#!/bin/sh\n" << body;
    chmod(script.c_str(), 0755);
    ProcessTrialLauncher launcher(script);
    TrialCommand command = base;
    command.spec_path = "spec.json";
    process_ = launcher.Start(command, &error_);
    if (process_ == nullptr) ADD_FAILURE() << error_;
  }
  ~ScriptTrial() { std::filesystem::remove_all(dir_); }

  TrialProcess& process() { return *process_; }

  // Every line until the end of the output (at most 60 s).
  std::vector<std::string> Lines() {
    std::vector<std::string> lines;
    std::string line;
    while (process_->ReadLine(milliseconds(60000), &line) == TrialProcess::ReadStatus::kLine) lines.push_back(line);
    return lines;
  }

 private:
  std::string dir_;
  std::string error_;
  std::unique_ptr<TrialProcess> process_;
};

// The child runs on the command's CPUs from its first instruction (set before exec).
TEST(ProcessTrialLauncherTest, PinsTheChildToItsCpus) {
  cpu_set_t usable;
  ASSERT_EQ(sched_getaffinity(0, sizeof usable, &usable), 0);
  int last = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &usable)) last = cpu;
  }
  TrialCommand command;
  command.cpus = {last};
  ScriptTrial trial("grep Cpus_allowed_list /proc/self/status\n", command);
  EXPECT_THAT(trial.Lines(), ::testing::ElementsAre("Cpus_allowed_list:\t" + std::to_string(last)));
  EXPECT_EQ(trial.process().MemoryLimitKind(), "");
}

// --memory-limit-mb reaches the child: RLIMIT_AS (in KiB for ulimit -v), or
// its own cgroup where the worker's cgroup delegates memory.
TEST(ProcessTrialLauncherTest, LimitsTheChildsMemory) {
  TrialCommand command;
  command.memory_limit_mb = 100;
  ScriptTrial trial("ulimit -v; cat /proc/self/cgroup\n", command);
  const std::vector<std::string> lines = trial.Lines();
  ASSERT_FALSE(lines.empty());
  const std::string kind = trial.process().MemoryLimitKind();
  if (kind == "RLIMIT_AS") {
    EXPECT_EQ(lines[0], "102400");
  } else {
    ASSERT_EQ(kind, "cgroup memory.max");
    EXPECT_THAT(lines, ::testing::Contains(::testing::HasSubstr("/frontier-trial-")));
  }
  EXPECT_FALSE(trial.process().OomKilled());
}

// A CUDA trial gets no RLIMIT_AS (its runtime reserves far more address space than memory).
TEST(ProcessTrialLauncherTest, NoAddressSpaceLimitWhereItIsNotWanted) {
  TrialCommand command;
  command.memory_limit_mb = 100;
  command.address_space_limit = false;
  ScriptTrial trial("ulimit -v\n", command);
  const std::vector<std::string> lines = trial.Lines();
  if (trial.process().MemoryLimitKind() == "cgroup memory.max") GTEST_SKIP() << "a cgroup limit applies here";
  EXPECT_EQ(trial.process().MemoryLimitKind(), "");
  EXPECT_THAT(lines, ::testing::ElementsAre("unlimited"));
}

// What the child could not do before exec is a start error naming it.
TEST(ProcessTrialLauncherTest, ChildSetupFailuresAreStartErrors) {
  ProcessTrialLauncher launcher("/bin/true");
  std::string error;
  TrialCommand command;
  command.workdir = "/nonexistent/frontier-test-folder";
  EXPECT_EQ(launcher.Start(command, &error), nullptr);
  EXPECT_THAT(error, ::testing::HasSubstr("cannot start /bin/true: entering its working directory: No such file or directory"));
  command.workdir.clear();
  command.cpus = {CPU_SETSIZE - 1};  // no such CPU here
  EXPECT_EQ(launcher.Start(command, &error), nullptr);
  EXPECT_THAT(error, ::testing::HasSubstr("cannot start /bin/true: pinning it to its CPUs: Invalid argument"));
  ProcessTrialLauncher missing("/nonexistent/frontier-trial");
  EXPECT_EQ(missing.Start(TrialCommand(), &error), nullptr);
  EXPECT_EQ(error, "cannot start /nonexistent/frontier-trial: No such file or directory");
}

// A line over the bound, even one that never ends, stops the trial with a
// failed result naming the line; the worker holds at most the bound.
TEST(TrialOutputBoundsTest, AHugeLineEndsTheTrialWithAReason) {
  ScriptTrial trial("echo '{\"event\": \"start\"}'\n"
                    "head -c 3000000 /dev/zero | tr '\\0' x\n"
                    "sleep 600\n");
  const std::vector<std::string> lines = trial.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "{\"event\": \"start\"}");
  EXPECT_EQ(lines[1],
            "{\"error\":\"the worker stopped the trial: line 2 of its output is longer than 1048576 bytes\","
            "\"error_kind\":\"output\",\"event\":\"result\",\"schema\":1,\"status\":\"failed\"}");
  const std::optional<ProcessExit> exit = trial.process().Wait(milliseconds(10000));
  ASSERT_TRUE(exit.has_value()) << "the trial was not killed";
  EXPECT_EQ(exit->Describe(), "signal SIGKILL (Killed)");
}

TEST(TrialOutputBoundsTest, ALineAtTheBoundIsRead) {
  ScriptTrial trial("head -c 1048576 /dev/zero | tr '\\0' x; echo\necho done\n");
  const std::vector<std::string> lines = trial.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], std::string(kMaxOutputLineBytes, 'x'));
  EXPECT_EQ(lines[1], "done");
}

TEST(TrialOutputBoundsTest, ADeeplyNestedLineEndsTheTrial) {
  ScriptTrial trial("echo '\"[[[[ in a string do not count\"'\n"
                    "head -c 100 /dev/zero | tr '\\0' '['; echo\n"
                    "echo never read\n");
  const std::vector<std::string> lines = trial.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "\"[[[[ in a string do not count\"");
  EXPECT_NE(lines[1].find("line 2 of its output is nested deeper than 64 levels"), std::string::npos) << lines[1];
}

// Binary garbage and a flood of empty lines are lines like any other (the
// agent ignores what is not a JSON object), read in order.
TEST(TrialOutputBoundsTest, GarbageAndFloodsOfLinesPassThrough) {
  ScriptTrial trial("printf 'a\\377\\000b\\n'\n"
                    "head -c 300000 /dev/zero | tr '\\0' '\\n'\n"
                    "echo last\n");
  const std::vector<std::string> lines = trial.Lines();
  ASSERT_EQ(lines.size(), 300002u);
  EXPECT_EQ(lines[0], std::string("a\377\0b", 4));
  EXPECT_EQ(lines[1], "");
  EXPECT_EQ(lines.back(), "last");
}

TEST(CpuMemoryLibraryBesideTest, BesideTheTrialBinaryOrInItsInstallFolder) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("cpu-memory-lib-" + std::to_string(getpid()));
  fs::remove_all(root);
  const auto touch = [](const fs::path& path, bool executable) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << "#!/bin/sh\n";
    if (executable) chmod(path.c_str(), 0755);
  };
  // A build tree: the library next to frontier-trial.
  touch(root / "build" / "frontier-trial", true);
  EXPECT_EQ(CpuMemoryLibraryBeside((root / "build" / "frontier-trial").string()), "");
  touch(root / "build" / "libfrontier_cpu_memory.so", false);
  EXPECT_EQ(CpuMemoryLibraryBeside((root / "build" / "frontier-trial").string()),
            (root / "build" / "libfrontier_cpu_memory.so").string());
  // An install: bin/frontier-trial and lib/frontier/libfrontier_cpu_memory.so.
  touch(root / "prefix" / "bin" / "frontier-trial", true);
  touch(root / "prefix" / "lib" / "frontier" / "libfrontier_cpu_memory.so", false);
  EXPECT_EQ(CpuMemoryLibraryBeside((root / "prefix" / "bin" / "frontier-trial").string()),
            (root / "prefix" / "lib" / "frontier" / "libfrontier_cpu_memory.so").string());
  // No such trial binary: nothing.
  EXPECT_EQ(CpuMemoryLibraryBeside((root / "nowhere" / "frontier-trial").string()), "");
  fs::remove_all(root);
}

}  // namespace
}  // namespace frontier
