// os/: the launcher's reports and setup, SHA-256 against a published vector.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "os/child_process.h"
#include "os/sha256.h"

namespace frontier {
namespace {

// Runs `argv` with its standard output into a pipe; returns what it printed (its exit status in *status).
std::string OutputOf(const std::vector<std::string>& argv, const std::vector<std::string>* env, int* status,
                     std::string* error) {
  int fds[2];
  EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
  ChildSetup setup;
  setup.stdout_fd = fds[1];
  const pid_t pid = SpawnChild(argv, env, setup, error);
  close(fds[1]);
  std::string out;
  char buffer[256];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  if (pid > 0) waitpid(pid, status, 0);
  return out;
}

TEST(SpawnChildTest, AProgramThatCannotRunIsReportedByNameNotAsAnExitCode) {
  std::string error;
  EXPECT_EQ(SpawnChild({"/nonexistent/frontier-trial", "--spec", "x"}, nullptr, ChildSetup{}, &error), -1);
  EXPECT_EQ(error, "cannot start /nonexistent/frontier-trial: No such file or directory");
}

TEST(SpawnChildTest, TheSetupStageThatFailedIsNamed) {
  ChildSetup setup;
  setup.workdir = "/nonexistent/folder";
  std::string error;
  EXPECT_EQ(SpawnChild({"/bin/true"}, nullptr, setup, &error), -1);
  EXPECT_EQ(error, "cannot start /bin/true: entering its working directory: No such file or directory");
}

TEST(SpawnChildTest, TheChildLeadsItsOwnProcessGroupWithTheGivenEnvironmentAndOutput) {
  const std::vector<std::string> env = {"FRONTIER_OS_TEST=given", "PATH=/usr/bin:/bin"};
  int status = -1;
  std::string error;
  // $$ and the fifth field of /proc/$$/stat (the process group) are the same for a group leader.
  const std::string out = OutputOf(
      {"sh", "-c", "read -r pid comm state ppid pgrp rest < /proc/$$/stat; echo \"$FRONTIER_OS_TEST $pid $pgrp\""},
      &env, &status, &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  char value[32] = {};
  long pid = 0, group = 0;
  ASSERT_EQ(std::sscanf(out.c_str(), "%31s %ld %ld", value, &pid, &group), 3) << out;
  EXPECT_STREQ(value, "given");
  EXPECT_EQ(pid, group) << "the child is not its own process group's leader";
}

TEST(SpawnChildTest, ForkedSeesTheChildBeforeItRunsExec) {
  pid_t seen = -1;
  std::string error;
  const pid_t pid = SpawnChild({"/bin/true"}, nullptr, ChildSetup{}, &error, [&](pid_t child) { seen = child; });
  ASSERT_GT(pid, 0) << error;
  EXPECT_EQ(seen, pid);
  int status = 0;
  waitpid(pid, &status, 0);
}

TEST(Sha256Test, MatchesThePublishedVectors) {
  // FIPS 180-2, appendix B.1 and the empty message.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256("abc").size(), 32u);
  EXPECT_EQ(static_cast<unsigned char>(Sha256("abc")[0]), 0xbau);
}

}  // namespace
}  // namespace frontier
