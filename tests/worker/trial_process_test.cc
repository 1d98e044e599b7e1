// ProcessTrialLauncher and ProcessExit: the child process side of the agent
// (worker/agent/trial_process.h), with shell-script trial binaries.
#include "worker/agent/trial_process.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
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
  auto process = launcher.Start(TrialCommand{"spec.json", 7, {{"FRONTIER_TEST_VAR", "x"}}, "", {}}, &error);
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

}  // namespace
}  // namespace frontier
