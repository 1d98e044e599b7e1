// ProcessTrialLauncher and ProcessExit: the child process side of the agent
// (worker/agent/trial_process.h), with shell-script trial binaries.
#include "worker/agent/trial_process.h"

#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iterator>
#include <map>
#include <sstream>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// Starts a trial of spec.json with `launcher`; its first line of output, once it has ended.
std::string FirstLineOfATrial(ProcessTrialLauncher& launcher) {
  TrialCommand command;
  command.spec_path = "spec.json";
  std::string error;
  auto process = launcher.Start(command, &error);
  if (process == nullptr) return "cannot start: " + error;
  std::string line;
  if (process->ReadLine(milliseconds(10000), &line) != TrialProcess::ReadStatus::kLine) line = "(no line)";
  if (!process->Wait(milliseconds(10000))) line += " (still running)";
  return line;
}

// The warm slot (docs/worker.md#warm-slots) with a trial binary that is no
// frontier-trial: its server does not start, and the trial starts cold.
TEST(WarmSlotTest, ABinaryWithoutAServerStartsItsTrialsCold) {
  std::string dir = (std::filesystem::temp_directory_path() / "frontier-warm-test-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string script = dir + "/trial.sh";
  std::ofstream(script) << "#!/bin/sh\necho \"$1 $2\"\n";
  chmod(script.c_str(), 0755);
  ProcessTrialLauncher launcher(script, /*warm_slots=*/true);
  for (int trial = 0; trial < 4; ++trial) {  // after 3 failed server starts, no more tries
    EXPECT_EQ(FirstLineOfATrial(launcher), "--spec spec.json");
  }
  std::filesystem::remove_all(dir);
}

// This process's children: pid -> command line (NULs as spaces); with `zombies`, only the exited ones.
std::map<pid_t, std::string> Children(bool zombies = false) {
  std::map<pid_t, std::string> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(text.substr(paren + 2));
    char state;
    pid_t parent = 0;
    fields >> state >> parent;
    if (parent != getpid() || (state == 'Z') != zombies) continue;
    std::ifstream cmdline(entry.path() / "cmdline");
    std::string command((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    std::replace(command.begin(), command.end(), '\0', ' ');
    children[std::stoi(name)] = command;
  }
  return children;
}

// A child subreaper (warm slots) adopts what a trial leaves behind: a daemon in a session of its own,
// out of the trial's process group, becomes this process's child; once it exited, the next start reaps
// it instead of leaving a zombie for the worker's life.
TEST(WarmSlotTest, WhatATrialLeftBehindIsReaped) {
  std::string dir = (std::filesystem::temp_directory_path() / "frontier-warm-test-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string script = dir + "/trial.sh";
  std::ofstream(script) << "#!/bin/sh\n[ \"$1\" = --serve ] && exit 64\n"
                           "setsid sleep 0.2 </dev/null >/dev/null 2>&1 &\necho started\n";
  chmod(script.c_str(), 0755);
  ProcessTrialLauncher launcher(script, /*warm_slots=*/true);
  const auto run = [&] { EXPECT_EQ(FirstLineOfATrial(launcher), "started"); };
  run();
  std::this_thread::sleep_for(milliseconds(1000));  // the daemon has exited
  ASSERT_EQ(Children(/*zombies=*/true).size(), 1u) << "the daemon, adopted and exited";
  run();
  std::this_thread::sleep_for(milliseconds(1000));
  EXPECT_LE(Children(/*zombies=*/true).size(), 1u) << "the first daemon was reaped (the second one may wait)";
  run();
  EXPECT_LE(Children(/*zombies=*/true).size(), 1u);
  std::filesystem::remove_all(dir);
}

// Warm slots with the real frontier-trial: trials forked from one server
// (their command line is the server's), each a child of this process; the
// server outlives the thread that started it; a trial
// killed by SIGSEGV is a crash of that trial only: the server lives on and the
// next trial of the same spec gives the first one's result, bit for bit.
TEST(WarmSlotTest, TrialsForkFromOneServerAndACrashStaysInItsTrial) {
  const char* binary = std::getenv("FRONTIER_TRIAL_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "set FRONTIER_TRIAL_BINARY to run frontier-trial for real";
  std::string dir = (std::filesystem::temp_directory_path() / "frontier-warm-test-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const auto write_spec = [&](const std::string& name, int steps, const std::string& sections) {
    std::ofstream(dir + "/" + name)
        << R"({"schema": 1, "trial_id": ")" << name << R"(", "seed": 3,
             "task": {"dataset": "synthetic", "input": {"channels": 1, "height": 16, "width": 16, "classes": 10},
                      "batch_size": 16, "steps": )" << steps << R"(, "eval_every": 0, "warmup_steps": 2},
             "arch": {"stem": {"kind": "conv3x3", "width": 8, "stride": 2},
                      "stages": [{"block": "basic", "width": 8, "depth": 1, "stride": 2}]},
             "runtime": {"threads": 1})" << sections << "}";
  };
  write_spec("spec.json", 8, R"(, "profile": {"steps": 0}, "latency": {"repetitions": 0})");
  write_spec("slow.json", 100000, "");
  ProcessTrialLauncher launcher(binary, /*warm_slots=*/true);
  const auto run = [&](const std::string& spec, std::map<pid_t, std::string>* started) {
    TrialCommand command;
    command.spec_path = dir + "/" + spec;
    command.progress_every = 1;
    command.artifact_dir = dir + "/artifacts";
    command.environment = {{"FRONTIER_TRIAL_ID", spec}};
    std::string error;
    std::unique_ptr<TrialProcess> process = launcher.Start(command, &error);
    EXPECT_NE(process, nullptr) << error;
    if (started) *started = Children();
    return process;
  };
  const auto result_of = [](TrialProcess& process) {
    std::string line, result;
    while (process.ReadLine(milliseconds(60000), &line) == TrialProcess::ReadStatus::kLine) {
      if (line.find("\"event\":\"result\"") != std::string::npos) result = line;
    }
    return result;
  };
  std::map<pid_t, std::string> first_children;
  std::unique_ptr<TrialProcess> first;
  // Started from a thread that then ends, as a worker's slot thread may: the server outlives it.
  std::thread([&] { first = run("spec.json", &first_children); }).join();
  ASSERT_NE(first, nullptr);
  const nlohmann::json a = nlohmann::json::parse(result_of(*first));
  ASSERT_EQ(a["status"], "completed") << a.dump();
  EXPECT_EQ(first->Wait(milliseconds(10000))->Describe(), "exit code 0");
  ASSERT_EQ(first_children.size(), 2u) << "the server and the trial, both this process's children";
  for (const auto& [pid, command] : first_children) EXPECT_THAT(command, ::testing::HasSubstr("--serve")) << pid;
  const std::map<pid_t, std::string> servers = Children();
  ASSERT_EQ(servers.size(), 1u) << "the server waits for the next trial, though the thread that started it ended";

  std::map<pid_t, std::string> crashing_children;
  std::unique_ptr<TrialProcess> crashing = run("slow.json", &crashing_children);
  ASSERT_NE(crashing, nullptr);
  std::string line;
  ASSERT_EQ(crashing->ReadLine(milliseconds(60000), &line), TrialProcess::ReadStatus::kLine);  // it runs
  pid_t crashing_pid = 0;
  for (const auto& [pid, command] : crashing_children) {
    if (servers.count(pid) == 0) crashing_pid = pid;
  }
  ASSERT_GT(crashing_pid, 0);
  ASSERT_EQ(kill(crashing_pid, SIGSEGV), 0);
  const std::optional<ProcessExit> crashed = crashing->Wait(milliseconds(10000));
  ASSERT_TRUE(crashed.has_value());
  EXPECT_EQ(crashed->Describe(), "signal SIGSEGV (Segmentation fault)");
  EXPECT_EQ(Children(), servers) << "the crash ended its trial only";

  std::unique_ptr<TrialProcess> next = run("spec.json", nullptr);
  ASSERT_NE(next, nullptr);
  const nlohmann::json b = nlohmann::json::parse(result_of(*next));
  ASSERT_EQ(b["status"], "completed") << b.dump();
  EXPECT_EQ(b["final_train_loss"], a["final_train_loss"]) << "a fresh copy of the server: no state carried over";
  EXPECT_EQ(b["val_loss"], a["val_loss"]);
  EXPECT_EQ(b["flops"], a["flops"]);
  EXPECT_EQ(next->Wait(milliseconds(10000))->Describe(), "exit code 0");
  EXPECT_EQ(Children(), servers);
  std::filesystem::remove_all(dir);
}

// A calibration (the worker's peaks, at start and at another thread count)
// forks from the warm slot's server too: its command line is the server's, its
// line has the peak; the trial after it forks from the same server.
TEST(WarmSlotTest, CalibrationsForkFromTheServerToo) {
  const char* binary = std::getenv("FRONTIER_TRIAL_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "set FRONTIER_TRIAL_BINARY to run frontier-trial for real";
  ProcessTrialLauncher launcher(binary, /*warm_slots=*/true);
  TrialCommand calibrate;
  calibrate.calibration = CalibrationRequest{"cpu", 1, {"fp32"}};
  std::string error;
  std::unique_ptr<TrialProcess> process = launcher.Start(calibrate, &error);
  ASSERT_NE(process, nullptr) << error;
  const std::map<pid_t, std::string> started = Children();
  ASSERT_EQ(started.size(), 2u) << "the server and the calibration";
  for (const auto& [pid, command] : started) EXPECT_THAT(command, ::testing::HasSubstr("--serve")) << pid;
  nlohmann::json line;
  std::string text;
  while (process->ReadLine(milliseconds(60000), &text) == TrialProcess::ReadStatus::kLine) {
    line = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  }
  ASSERT_EQ(process->Wait(milliseconds(10000))->Describe(), "exit code 0") << process->StderrTail();
  EXPECT_EQ(line["event"], "calibration") << line.dump();
  EXPECT_EQ(line["threads"], 1) << line.dump();
  EXPECT_GT(line["peaks"]["fp32"].get<double>(), 1e9) << line.dump();
  const std::map<pid_t, std::string> servers = Children();
  ASSERT_EQ(servers.size(), 1u) << "the server waits for the next";

  TrialCommand unknown_dtype = calibrate;  // refused by the calibration itself, in its child
  unknown_dtype.calibration->dtypes = {"fp7"};
  process = launcher.Start(unknown_dtype, &error);
  ASSERT_NE(process, nullptr) << error;
  while (process->ReadLine(milliseconds(60000), &text) == TrialProcess::ReadStatus::kLine) {
  }
  EXPECT_EQ(process->Wait(milliseconds(10000))->Describe(), "exit code 64");
  EXPECT_THAT(process->StderrTail(), ::testing::HasSubstr("fp7"));
  EXPECT_EQ(Children(), servers) << "the same server";
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
