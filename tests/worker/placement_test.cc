// worker/agent/placement.h: CPU lists, the split over slots, the host lock
// and the per-CPU claims that tell a trial it shared its cores.
#include "worker/agent/placement.h"
#include "os/cpus.h"

#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace frontier {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CpuListTest, ParsesRangesAndSingleCpus) {
  EXPECT_THAT(ParseCpuList("0-3,6"), ElementsAre(0, 1, 2, 3, 6));
  EXPECT_THAT(ParseCpuList("5,1,1,2"), ElementsAre(1, 2, 5));
  EXPECT_THAT(ParseCpuList("7"), ElementsAre(7));
}

TEST(CpuListTest, RejectsWhatIsNotACpuList) {
  for (const char* bad : {"", "a", "1-", "-2", "0,,1", "1.5", "4096"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(ParseCpuList(bad), std::invalid_argument);
  }
  try {
    ParseCpuList("3-1");
    FAIL() << "a backwards range was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("the range 3-1 runs backwards"));
  }
}

TEST(CpuListTest, FormatsRuns) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 6}), "0-3,6");
  EXPECT_EQ(FormatCpuList({1, 3, 4}), "1,3-4");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList(ParseCpuList("2,8-11,4")), "2,4,8-11");
}

TEST(CpuListTest, UsableCpusAreThisProcesssAffinity) {
  const std::vector<int> cpus = UsableCpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_LE(static_cast<long>(cpus.size()), sysconf(_SC_NPROCESSORS_CONF));
}

TEST(SplitCpusTest, EachSlotGetsItsOwnEqualShare) {
  const SlotCpus split = SplitCpus({0, 1, 2, 3}, 2);
  EXPECT_THAT(split.slots, ElementsAre(ElementsAre(0, 1), ElementsAre(2, 3)));
  EXPECT_FALSE(split.shared);
  EXPECT_TRUE(split.unused.empty());

  const SlotCpus uneven = SplitCpus({4, 5, 6}, 2);
  EXPECT_THAT(uneven.slots, ElementsAre(ElementsAre(4), ElementsAre(5)));
  EXPECT_THAT(uneven.unused, ElementsAre(6));
  EXPECT_FALSE(uneven.shared);
}

TEST(SplitCpusTest, FewerCpusThanSlotsShareAndSaySo) {
  const SlotCpus split = SplitCpus({0, 1}, 3);
  EXPECT_THAT(split.slots, ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(0)));
  EXPECT_TRUE(split.shared);
}

class HostLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "frontier-placement-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Lock() const { return dir_ + "/host.lock"; }

  // Gives up after `polls` tries.
  static std::function<bool()> After(int polls) {
    return [count = 0, polls]() mutable { return ++count > polls; };
  }

  std::string dir_;
};

TEST_F(HostLockTest, ACalibrationWaitsForRunningTrialsAndKeepsNewOnesOut) {
  HostLock lock(Lock());
  auto trial = lock.Shared(After(0));
  ASSERT_NE(trial, nullptr);
  auto other_trial = lock.Shared(After(0));  // trials run side by side
  ASSERT_NE(other_trial, nullptr);

  bool told = false;
  EXPECT_EQ(lock.Exclusive(After(2), [&] { told = true; }), nullptr) << "calibrated while trials ran";
  EXPECT_TRUE(told) << "a waiting calibration says so";

  trial.reset();
  other_trial.reset();
  auto calibration = lock.Exclusive(After(0), nullptr);
  ASSERT_NE(calibration, nullptr);
  EXPECT_EQ(lock.Shared(After(2)), nullptr) << "a trial started during a calibration";
  EXPECT_EQ(lock.Exclusive(After(2), nullptr), nullptr) << "two calibrations at once";
  calibration.reset();
  // (The calibration that gave up may still take and drop the turnstile once.)
  EXPECT_NE(lock.Shared(After(40)), nullptr);
}

TEST_F(HostLockTest, AnEmptyPathLocksNothing) {
  HostLock lock("");
  auto calibration = lock.Exclusive(After(0), nullptr);
  ASSERT_NE(calibration, nullptr);
  EXPECT_NE(lock.Exclusive(After(0), nullptr), nullptr);
  EXPECT_NE(lock.Shared(After(0)), nullptr);
}

TEST_F(HostLockTest, TrialsOnTheSameCoreBothLearnTheyShared) {
  auto first = std::make_unique<CpuClaim>(Lock(), std::vector<int>{0, 1});
  EXPECT_FALSE(first->Shared());
  const CpuClaim elsewhere(Lock(), {2});
  EXPECT_FALSE(elsewhere.Shared());
  EXPECT_FALSE(first->Shared()) << "a claim on another core is not sharing";
  {
    const CpuClaim second(Lock(), {1});
    EXPECT_TRUE(second.Shared()) << "the one that came second knows at once";
  }
  EXPECT_TRUE(first->Shared()) << "the one that came first learns it by its end";
  first.reset();
  const CpuClaim after(Lock(), {0, 1});
  EXPECT_FALSE(after.Shared()) << "a trial after the others ended shared nothing";
  EXPECT_FALSE(elsewhere.Shared());
}

}  // namespace
}  // namespace frontier
