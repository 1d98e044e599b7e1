// The coordinator's artifact store (server/store/artifact_store.h): names
// that could leave the trial's folder are refused, chunks go in order within
// the per-chunk, per-trial and file-count limits, a newer attempt replaces an
// older one's files, and what was stored reads back byte for byte.
#include "server/store/artifact_store.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

namespace frontier {
namespace {

namespace fs = std::filesystem;

class ArtifactStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/frontier-artifacts-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root_ = dir;
  }
  void TearDown() override { fs::remove_all(root_); }

  // The kind of ArtifactError `write` throws (kIo when it throws none).
  template <typename Write>
  static ArtifactError::Kind Refusal(Write&& write, std::string* message = nullptr) {
    try {
      write();
    } catch (const ArtifactError& e) {
      if (message) *message = e.what();
      return e.kind();
    }
    ADD_FAILURE() << "accepted";
    return ArtifactError::Kind::kIo;
  }
  // Every path under the root.
  std::vector<std::string> Tree() const {
    std::vector<std::string> paths;
    for (const auto& entry : fs::recursive_directory_iterator(root_)) {
      paths.push_back(entry.path().lexically_relative(root_).generic_string());
    }
    std::sort(paths.begin(), paths.end());
    return paths;
  }

  std::string root_;
  const std::string trial_ = "exp-000001-t0001";
};

TEST(ArtifactNameTest, RelativeNamesOfSafePartsOnly) {
  for (const char* ok : {"trace.json", "operators.json", "plots/loss.png", "a-b_c.1/d/e.txt"}) {
    EXPECT_FALSE(ArtifactNameProblem(ok).has_value()) << ok;
  }
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../b", "..", ".", "./a", "a//b", "a/", ".hidden",
                          "a/.ssh/k", "a b", "a\\b", "caf\xc3\xa9", "a\nb", "a/b/c/d/e/f/g/h/i"}) {
    EXPECT_TRUE(ArtifactNameProblem(bad).has_value()) << bad;
  }
  EXPECT_TRUE(ArtifactNameProblem(std::string(256, 'a')).has_value());
  EXPECT_FALSE(ArtifactNameProblem(std::string(255, 'a')).has_value());
  EXPECT_NE(ArtifactNameProblem("/etc/passwd")->find("absolute"), std::string::npos);
  EXPECT_NE(ArtifactNameProblem("../x")->find("'..'"), std::string::npos);
}

TEST_F(ArtifactStoreTest, ChunksInOrderMakeAFileThatReadsBackInPieces) {
  ArtifactLimits limits;
  limits.max_chunk_bytes = 4;
  ArtifactStore store(root_, limits);
  EXPECT_EQ(store.Write(trial_, 1, "plots/loss.csv", 0, "abcd", false), 4);
  EXPECT_TRUE(store.List(trial_).empty()) << "an incomplete file is not listed";
  EXPECT_EQ(store.Write(trial_, 1, "plots/loss.csv", 4, "ef", true), 6);
  ASSERT_EQ(store.List(trial_).size(), 1u);
  EXPECT_EQ(store.List(trial_)[0].name, "plots/loss.csv");
  EXPECT_EQ(store.List(trial_)[0].size, 6);
  EXPECT_TRUE(fs::is_regular_file(fs::path(root_) / "exp-000001" / trial_ / "plots/loss.csv"));

  int64_t size = 0;
  EXPECT_EQ(store.Read(trial_, "plots/loss.csv", 0, &size), "abcd");
  EXPECT_EQ(size, 6);
  EXPECT_EQ(store.Read(trial_, "plots/loss.csv", 4, &size), "ef");
  EXPECT_EQ(store.Read(trial_, "plots/loss.csv", 6, &size), "");
  EXPECT_EQ(Refusal([&] { store.Read(trial_, "plots/loss.csv", 7, &size); }), ArtifactError::Kind::kOutOfRange);
  EXPECT_EQ(Refusal([&] { store.Read(trial_, "missing", 0, &size); }), ArtifactError::Kind::kNotFound);
  EXPECT_EQ(Refusal([&] { store.Read(trial_, "../../etc/passwd", 0, &size); }), ArtifactError::Kind::kInvalid);

  const auto experiment = store.ListExperiment("exp-000001");
  ASSERT_EQ(experiment.size(), 1u);
  EXPECT_EQ(experiment[0].first, trial_);
  EXPECT_TRUE(store.ListExperiment("exp-000002").empty());
}

TEST_F(ArtifactStoreTest, BadNamesChunksAndOffsetsAreRefusedAndWriteNothing) {
  ArtifactLimits limits;
  limits.max_chunk_bytes = 8;
  ArtifactStore store(root_, limits);
  std::string message;
  for (const char* name : {"../escape", "/tmp/abs", "a/../../b", ".attempt", ".incoming/x"}) {
    EXPECT_EQ(Refusal([&] { store.Write(trial_, 1, name, 0, "x", true); }), ArtifactError::Kind::kInvalid) << name;
  }
  EXPECT_EQ(Refusal([&] { store.Write("../../x-t1", 1, "a", 0, "x", true); }), ArtifactError::Kind::kInvalid);
  EXPECT_EQ(Refusal([&] { store.Write("trial42", 1, "a", 0, "x", true); }), ArtifactError::Kind::kInvalid);
  EXPECT_TRUE(Tree().empty()) << "a refused name created " << (Tree().empty() ? "" : Tree()[0]);

  EXPECT_EQ(Refusal([&] { store.Write(trial_, 1, "big", 0, std::string(9, 'x'), true); }, &message),
            ArtifactError::Kind::kInvalid);
  EXPECT_NE(message.find("the limit is 8 bytes a chunk"), std::string::npos) << message;
  EXPECT_EQ(Refusal([&] { store.Write(trial_, 1, "gap", 3, "x", true); }, &message), ArtifactError::Kind::kInvalid);
  EXPECT_NE(message.find("in order from offset 0"), std::string::npos) << message;
  store.Write(trial_, 1, "f", 0, "abc", false);
  EXPECT_EQ(Refusal([&] { store.Write(trial_, 1, "f", 2, "x", true); }), ArtifactError::Kind::kInvalid);
  EXPECT_EQ(Refusal([&] { store.Write(trial_, 1, "f", -1, "x", true); }), ArtifactError::Kind::kInvalid);
  EXPECT_EQ(Refusal([&] { store.Write(trial_, 0, "f", 0, "x", true); }), ArtifactError::Kind::kInvalid);
  for (const std::string& path : Tree()) {
    EXPECT_EQ(path.rfind("exp-000001", 0), 0u) << path << " outside the trial's folder";
  }
}

TEST_F(ArtifactStoreTest, ATrialsBytesAndFilesAreBounded) {
  ArtifactLimits limits;
  limits.max_chunk_bytes = 10;
  limits.max_trial_bytes = 25;
  limits.max_files = 3;
  ArtifactStore store(root_, limits);
  store.Write(trial_, 1, "a", 0, std::string(10, 'a'), true);
  store.Write(trial_, 1, "b", 0, std::string(10, 'b'), false);
  std::string message;
  EXPECT_EQ(Refusal([&] { store.Write(trial_, 1, "b", 10, std::string(10, 'b'), true); }, &message),
            ArtifactError::Kind::kExhausted);
  EXPECT_NE(message.find("the limit is 25 bytes a trial"), std::string::npos) << message;
  store.Write(trial_, 1, "b", 10, std::string(5, 'b'), true);  // up to the limit is fine
  store.Write(trial_, 1, "a", 0, "", true);                    // a rewrite frees its bytes
  store.Write(trial_, 1, "c", 0, "c", true);
  EXPECT_EQ(Refusal([&] { store.Write(trial_, 1, "d", 0, "d", true); }, &message), ArtifactError::Kind::kExhausted);
  EXPECT_NE(message.find("the limit is 3"), std::string::npos) << message;
  EXPECT_EQ(store.List(trial_).size(), 3u);
  // Another trial has its own budget.
  EXPECT_EQ(store.Write("exp-000001-t0002", 1, "d", 0, std::string(10, 'd'), true), 10);
}

TEST_F(ArtifactStoreTest, ANewerAttemptReplacesTheOlderOnesFilesAndAnOlderOneIsStale) {
  ArtifactStore store(root_);
  store.Write(trial_, 1, "from-attempt-1", 0, "one", true);
  store.Write(trial_, 2, "trace.json", 0, "two", true);
  ASSERT_EQ(store.List(trial_).size(), 1u);
  EXPECT_EQ(store.List(trial_)[0].name, "trace.json");
  EXPECT_EQ(Refusal([&] { store.Write(trial_, 1, "late", 0, "x", true); }), ArtifactError::Kind::kStale);
  EXPECT_EQ(store.List(trial_).size(), 1u);
}

}  // namespace
}  // namespace frontier
