// frontier-server's command line (server/cli/server_flags.h, docs/cli.md):
// defaults, the conversion of seconds to the scheduler's milliseconds, and
// the combinations it refuses with exit code 64 before anything starts.
#include "server/cli/server_flags.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace frontier {
namespace {

class ServerFlagsTest : public ::testing::Test {
 protected:
  ServerFlagsTest() {
    unsetenv("FRONTIER_USER_TOKEN");
    unsetenv("FRONTIER_WORKER_TOKEN");
    std::filesystem::create_directories(dir_);
  }
  ~ServerFlagsTest() override {
    unsetenv("FRONTIER_USER_TOKEN");
    unsetenv("FRONTIER_WORKER_TOKEN");
    std::filesystem::remove_all(dir_);
  }

  std::optional<int> Parse(std::vector<std::string> args) {
    args.insert(args.begin(), "frontier-server");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return ParseServerFlags(static_cast<int>(argv.size()), argv.data(), flags_);
  }

  std::string TokenFile(const std::string& name, const std::string& token) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << token << "\n";
    return path;
  }

  const std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("server_flags_test." + std::to_string(::getpid()));
  ServerFlags flags_;
};

TEST_F(ServerFlagsTest, DefaultsServeEverywhereWithTheSchedulersDefaults) {
  EXPECT_EQ(Parse({}), std::nullopt);
  EXPECT_EQ(flags_.coordinator.listen, "0.0.0.0:50051");
  EXPECT_EQ(flags_.store, "frontier.db");
  EXPECT_EQ(flags_.metrics_listen, "127.0.0.1:9464");
  EXPECT_FALSE(flags_.metrics_listen_given);
  EXPECT_FALSE(flags_.migrate);
  EXPECT_FALSE(flags_.coordinator.security.auth_enabled());
  const SchedulerOptions defaults;
  EXPECT_EQ(flags_.coordinator.scheduler.lease_timeout_ms, defaults.lease_timeout_ms);
  EXPECT_EQ(flags_.coordinator.scheduler.heartbeat_interval_ms, defaults.heartbeat_interval_ms);
  EXPECT_EQ(flags_.coordinator.scheduler.restart_grace_ms, defaults.restart_grace_ms);
}

TEST_F(ServerFlagsTest, SecondsBecomeMilliseconds) {
  EXPECT_EQ(Parse({"--lease-timeout", "4.5", "--heartbeat-interval", "1", "--restart-grace", "0", "--listen",
                   "127.0.0.1:0", "--store", "postgresql://f@db:5432/f", "--metrics-listen", "0"}),
            std::nullopt);
  EXPECT_EQ(flags_.coordinator.scheduler.lease_timeout_ms, 4500);
  EXPECT_EQ(flags_.coordinator.scheduler.heartbeat_interval_ms, 1000);
  EXPECT_EQ(flags_.coordinator.scheduler.restart_grace_ms, 0);
  EXPECT_EQ(flags_.coordinator.listen, "127.0.0.1:0");
  EXPECT_EQ(flags_.store, "postgresql://f@db:5432/f");
  EXPECT_EQ(flags_.metrics_listen, "0");
  EXPECT_TRUE(flags_.metrics_listen_given);
}

TEST_F(ServerFlagsTest, AHeartbeatIntervalMustBeShorterThanTheLeaseTimeout) {
  EXPECT_EQ(Parse({"--lease-timeout", "10", "--heartbeat-interval", "10"}), 64);
}

TEST_F(ServerFlagsTest, TokensComeFromFilesBothOrNeither) {
  const std::string user = TokenFile("user.token", "u-secret");
  const std::string worker = TokenFile("worker.token", "w-secret");
  EXPECT_EQ(Parse({"--user-token-file", user, "--worker-token-file", worker}), std::nullopt);
  EXPECT_EQ(flags_.coordinator.security.user_token, "u-secret");
  EXPECT_EQ(flags_.coordinator.security.worker_token, "w-secret");
  flags_ = ServerFlags();
  EXPECT_EQ(Parse({"--user-token-file", user}), 64);
  flags_ = ServerFlags();
  EXPECT_EQ(Parse({"--worker-token-file", (dir_ / "missing.token").string(), "--user-token-file", user}), 64);
}

TEST_F(ServerFlagsTest, NamedUsersComeFromATokenFile) {
  const std::string tokens = TokenFile("tokens", "alice user alice-token-0123456789\nw worker w-token-0123456789ab");
  EXPECT_EQ(Parse({"--tokens", tokens}), std::nullopt);
  ASSERT_TRUE(flags_.coordinator.security.users);
  EXPECT_TRUE(flags_.coordinator.security.auth_enabled());
  EXPECT_EQ(flags_.coordinator.security.users->Find("alice-token-0123456789")->user, "alice");
}

TEST_F(ServerFlagsTest, AMalformedTokenFileIsRefused) {
  EXPECT_EQ(Parse({"--tokens", TokenFile("tokens", "alice wizard alice-token-0123456789")}), 64);
  flags_ = ServerFlags();
  EXPECT_EQ(Parse({"--tokens", (dir_ / "missing").string()}), 64);
}

TEST_F(ServerFlagsTest, ATokenFileExcludesTheSharedTokens) {
  const std::string tokens = TokenFile("tokens", "alice user alice-token-0123456789");
  EXPECT_EQ(Parse({"--tokens", tokens, "--user-token-file", TokenFile("user.token", "u-secret"),
                   "--worker-token-file", TokenFile("worker.token", "w-secret")}),
            64);
}

TEST_F(ServerFlagsTest, TokensComeFromTheEnvironmentWithoutFiles) {
  setenv("FRONTIER_USER_TOKEN", "u-env", 1);
  setenv("FRONTIER_WORKER_TOKEN", "w-env", 1);
  EXPECT_EQ(Parse({}), std::nullopt);
  EXPECT_EQ(flags_.coordinator.security.user_token, "u-env");
  EXPECT_EQ(flags_.coordinator.security.worker_token, "w-env");
}

TEST_F(ServerFlagsTest, MigrateTakesTheStoreOnEitherSideAndChecksNothingElse) {
  EXPECT_EQ(Parse({"migrate", "--store", "sqlite:a.db", "--user-token-file", (dir_ / "missing").string()}),
            std::nullopt);
  EXPECT_TRUE(flags_.migrate);
  EXPECT_EQ(flags_.store, "sqlite:a.db");
  flags_ = ServerFlags();
  EXPECT_EQ(Parse({"--store", "b.db", "migrate"}), std::nullopt);
  EXPECT_TRUE(flags_.migrate);
  EXPECT_EQ(flags_.store, "b.db");
}

TEST_F(ServerFlagsTest, HelpExitsZeroAndAnUnknownFlagIsAnError) {
  EXPECT_EQ(Parse({"--help"}), 0);
  const std::optional<int> unknown = Parse({"--no-such-flag"});
  ASSERT_TRUE(unknown.has_value());
  EXPECT_NE(*unknown, 0);
  const std::optional<int> negative = Parse({"--lease-timeout", "-1"});
  ASSERT_TRUE(negative.has_value());
  EXPECT_NE(*negative, 0);
}

}  // namespace
}  // namespace frontier
