// The torch-free profile summary and the SDK's recording (worker/profile/):
// self times by nesting, classes and shares on the recording's basis, small
// calls as overhead, the recording file read with bounds, and a command
// trial's result judged by frontier-trial's verdict rules.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "worker/profile/lab_calls.h"
#include "worker/profile/profile_recording.h"
#include "worker/profile/profile_summary.h"

namespace frontier {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

ProfiledCall Call(const std::string& name, double start, double end, std::vector<std::vector<int64_t>> shapes = {}) {
  ProfiledCall c;
  c.name = name;
  c.thread = 1;
  c.start_us = start;
  c.end_us = end;
  c.shapes = std::move(shapes);
  return c;
}

// One 1000 us step on the wall basis: a linear layer (its addmm does 700 us
// of the work), a 200 us relu, a 10 us add (a small call) and 60 us of
// nothing; a call after the step is dropped.
ProfileRecording WallRecording() {
  ProfileRecording r;
  r.basis = TimeBasis::kWall;
  r.process = "command trial";
  r.first = 5;
  r.count = 1;
  r.steps = {{5, 0, 1000, -1}};
  r.calls = {Call("aten::linear", 10, 740, {{64, 512}, {256, 512}, {256}}),
             Call("aten::t", 12, 40, {{256, 512}}),
             Call("aten::addmm", 40, 740, {{256}, {64, 512}, {512, 256}}),
             Call("aten::relu", 750, 950, {{64, 256}}),
             Call("aten::add", 960, 970, {{64, 256}, {64, 256}}),
             Call("aten::mul", 1500, 1600, {{64, 256}})};
  return r;
}

TEST(ProfileSummaryTest, SharesOfTheWallBasisByNesting) {
  const ProfileSummary s = SummarizeProfile(WallRecording());
  const json& p = s.profile;
  EXPECT_EQ(p["time_basis"], "the profiled steps' wall time");
  EXPECT_EQ(p["calls"], 5);  // the mul after the step is not in it
  // linear's self time is its own 2 + 28 - ... : 730 - 28 (t) - 700 (addmm) = 2 us (framework)
  EXPECT_NEAR(p["by_bound"]["compute"].get<double>(), 0.702, 1e-9);  // linear's 2 us + addmm's 700 us
  EXPECT_NEAR(p["by_bound"]["memory"].get<double>(), 0.2, 1e-9);     // relu; the 10 us add is small
  EXPECT_NEAR(p["by_bound"]["overhead"].get<double>(), 0.028 + 0.01, 1e-9);  // aten::t, the small add
  EXPECT_NEAR(p["by_bound"]["outside_operators"].get<double>(), 0.06, 1e-9);
  EXPECT_NEAR(p["coverage"].get<double>(), 0.94, 1e-9);
  EXPECT_EQ(p["small_calls"]["calls_per_step"], 1.0);
  EXPECT_EQ(p["top_operators"][0]["name"], "aten::addmm");
  EXPECT_EQ(p["top_operators"][0]["input_dims"], json::parse("[[256], [64, 512], [512, 256]]"));
  EXPECT_FALSE(p["top_operators"][0].contains("self_thread_cpu_ms_per_step"));  // no per-call CPU time
  EXPECT_EQ(p["bytes_from_recorded_tensors"], 0.0);  // estimated from shapes, and said so
  EXPECT_TRUE(p["bytes_per_step_by_dtype"].contains("unrecorded (fp32 assumed)"));
  EXPECT_EQ(s.operators["steps"], json::parse("[5]"));
  EXPECT_EQ(json::parse(s.trace)["traceEvents"][0]["args"]["name"], "command trial ");
}

// trace.json is written as text (profile_summary.cc, Trace): it parses, and
// its bytes are nlohmann's canonical dump of what it holds (sorted keys, the
// same numbers), with every optional field of a call, two threads, and names
// that need escaping.
TEST(ProfileSummaryTest, TheTraceTextIsCanonicalJson) {
  ProfileRecording r = WallRecording();
  r.basis = TimeBasis::kCuda;
  r.trial_id = "t\"1";
  r.calls[2].cuda_us = 650.125;
  r.calls[2].cpu_us = 12.5;
  r.calls[2].bytes = 1 << 20;
  r.calls[2].dtype = "BFloat16";
  r.calls[3].thread = 7;
  r.calls[3].name = "user \"scope\"\n\u00e9";
  const std::string trace = SummarizeProfile(r).trace;
  const json parsed = json::parse(trace);
  EXPECT_EQ(parsed.dump(), trace);
  ASSERT_EQ(parsed["traceEvents"].size(), 1u + 2u + 1u + 5u) << "process, 2 threads, 1 step, 5 calls";
  const json& addmm = parsed["traceEvents"][6];
  EXPECT_EQ(addmm["name"], "aten::addmm");
  EXPECT_EQ(addmm["args"]["cuda_us"], 650.125);
  EXPECT_EQ(addmm["args"]["input_dims"], json::parse("[[256], [64, 512], [512, 256]]"));
  const auto scope = std::find_if(parsed["traceEvents"].begin(), parsed["traceEvents"].end(),
                                  [](const json& e) { return e["name"] == "user \"scope\"\n\u00e9"; });
  ASSERT_NE(scope, parsed["traceEvents"].end());
  EXPECT_EQ((*scope)["tid"], 1) << "the second thread";
  EXPECT_EQ(parsed["otherData"]["trial_id"], "t\"1");
}

TEST(ProfileSummaryTest, ThreadCpuBasisIgnoresTimeWaitingForACore) {
  ProfileRecording r = WallRecording();
  r.basis = TimeBasis::kThreadCpu;
  r.steps[0].thread_cpu_us = 500;  // the thread ran half the step's wall time
  for (ProfiledCall& c : r.calls) c.cpu_us = (c.end_us - c.start_us) / 2;
  const json p = SummarizeProfile(r).profile;
  EXPECT_EQ(p["time_basis"], "the training thread's CPU time in the profiled steps");
  EXPECT_NEAR(p["by_bound"]["compute"].get<double>(), 0.702, 1e-9);
  EXPECT_TRUE(p["top_operators"][0].contains("self_thread_cpu_ms_per_step"));
}

TEST(ProfileSummaryTest, NoStepsIsAnError) {
  ProfileRecording r = WallRecording();
  r.steps.clear();
  EXPECT_EQ(SummarizeProfile(r).profile["error"], "no profiled step was recorded");
  r.error = "cannot start torch's profiler";
  EXPECT_EQ(SummarizeProfile(r).profile["error"], "cannot start torch's profiler");
}

json RecordingDocument() {
  return json::parse(R"({"schema": 1, "profiler": "torch autograd profiler", "basis": "wall", "first": 2, "count": 1,
      "trial_id": "t1", "pid": 7,
      "steps": [{"step": 2, "start_us": 0, "end_us": 1000}],
      "calls": [{"name": "aten::addmm", "thread": 3, "start_us": 10, "end_us": 900,
                 "shapes": [[256], [64, 512], [512, 256]]},
                {"name": "aten::relu", "thread": 3, "start_us": 910, "end_us": 990, "shapes": [[64, 256]]}]})");
}

std::string RecordingError(const std::function<void(json&)>& change, RecordingLimits limits = {}) {
  json document = RecordingDocument();
  change(document);
  try {
    RecordingFromJson(document, limits);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ProfileRecordingTest, RefusesWhatIsNotARecordingNamingTheField) {
  EXPECT_EQ(RecordingError([](json&) {}), "");
  EXPECT_THAT(RecordingError([](json& d) { d["schema"] = 2; }), HasSubstr("schema is not 1"));
  EXPECT_THAT(RecordingError([](json& d) { d["basis"] = "sundial"; }),
              HasSubstr("basis is \"sundial\", not wall, cuda or thread_cpu"));
  EXPECT_THAT(RecordingError([](json& d) { d.erase("profiler"); }), HasSubstr("recording.profiler is missing"));
  EXPECT_THAT(RecordingError([](json& d) { d["steps"][0]["start_us"] = 2000; }), HasSubstr("steps[0] ends before it starts"));
  EXPECT_THAT(RecordingError([](json& d) { d["steps"][0]["end_us"] = -5; }),
              HasSubstr("steps[0].end_us is not a time in [0, 1e15] microseconds"));
  EXPECT_THAT(RecordingError([](json& d) { d["calls"][0]["end_us"] = 1.7e308; }),
              HasSubstr("calls[0].end_us is not a time in [0, 1e15] microseconds"));
  EXPECT_THAT(RecordingError([](json& d) { d["calls"][1]["start_us"] = "soon"; }),
              HasSubstr("calls[1].start_us is not a finite number"));
  EXPECT_THAT(RecordingError([](json& d) { d["calls"][0]["shapes"][1] = json::parse("[64, -1]"); }),
              HasSubstr("calls[0].shapes[1] holds a dimension that is not an integer"));
  EXPECT_THAT(RecordingError([](json& d) { d["calls"][0]["name"] = std::string("aten::\xff"); }),
              HasSubstr("calls[0].name"));
  EXPECT_THAT(RecordingError([](json& d) { d["basis"] = "thread_cpu"; d["steps"][0]["thread_cpu_us"] = 5; }),
              HasSubstr("calls[0].cpu_us is missing"));
  RecordingLimits limits;
  limits.max_calls = 1;
  EXPECT_THAT(RecordingError([](json&) {}, limits), HasSubstr("recording.calls has 2 entries, more than 1"));
  EXPECT_THAT(RecordingError([](json& d) { d = json::array(); }), HasSubstr("is not a JSON object"));
}

class CommandTrialProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("frontier_profile_test_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& text) { std::ofstream(dir_ / kProfileCallsFile) << text; }
  json Judge(const json& result) { return json::parse(WithSummarizedProfile(result.dump(), dir_)); }

  std::filesystem::path dir_;
  const json result_ = {{"status", "completed"},
                        {"data_wait_fraction", 0.01},
                        {"profile", {{"tool", "libtorch"}, {"recorded", kProfileCallsFile}, {"cost_s", 0.25}}}};
};

TEST_F(CommandTrialProfileTest, TheSdksRecordingIsSummarizedAndJudgedByTheRules) {
  Write(RecordingDocument().dump());
  const json r = Judge(result_);
  EXPECT_EQ(r["bottleneck"]["verdict"], "compute-bound");
  EXPECT_EQ(r["bottleneck"]["basis"], "profile");
  EXPECT_NEAR(r["profile"]["by_bound"]["compute"].get<double>(), 0.89, 1e-9);
  EXPECT_EQ(r["profile"]["cost_s"], 0.25);  // what the SDK said stays
  EXPECT_EQ(r["profile"]["trace"], (dir_ / "trace.json").string());
  const json trace = json::parse(std::ifstream(dir_ / "trace.json"));
  EXPECT_EQ(trace["traceEvents"][0]["args"]["name"], "command trial t1");
  const json operators = json::parse(std::ifstream(dir_ / "operators.json"));
  EXPECT_EQ(operators["operators"][0]["name"], "aten::addmm");
}

TEST_F(CommandTrialProfileTest, AnUnreadableRecordingIsAnErrorAndTheVerdictStandsWithoutIt) {
  Write("{not json");
  json r = Judge(result_);
  EXPECT_THAT(r["profile"]["error"].get<std::string>(), HasSubstr("profile_calls.json is not JSON"));
  EXPECT_EQ(r["bottleneck"]["verdict"], "unknown");
  EXPECT_EQ(r["bottleneck"]["basis"], "none");

  std::filesystem::remove(dir_ / kProfileCallsFile);
  std::filesystem::create_symlink("/etc/passwd", dir_ / kProfileCallsFile);  // not followed
  r = Judge(result_);
  EXPECT_THAT(r["profile"]["error"].get<std::string>(), HasSubstr("is not in"));
}

TEST_F(CommandTrialProfileTest, TheTrialsLinksAndFifosAreNeitherFollowedNorWaitedOn) {
  Write(RecordingDocument().dump());
  const std::filesystem::path victim = dir_ / "victim.txt";
  std::ofstream(victim) << "keep";
  std::filesystem::create_symlink(victim, dir_ / "trace.json");  // left by the trial in its folder
  ASSERT_EQ(mkfifo((dir_ / "operators.json").c_str(), 0644), 0);
  const json r = Judge(result_);
  EXPECT_FALSE(r["profile"].contains("error")) << r["profile"].dump();
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(std::ifstream(victim).rdbuf()), {}), "keep");
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(dir_ / "trace.json")));
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(dir_ / "operators.json")));

  std::filesystem::remove(dir_ / kProfileCallsFile);
  ASSERT_EQ(mkfifo((dir_ / kProfileCallsFile).c_str(), 0644), 0);  // a recording that would block a reader
  EXPECT_THAT(Judge(result_)["profile"]["error"].get<std::string>(), HasSubstr("is not in"));
}

TEST_F(CommandTrialProfileTest, AProfileTheProgramWroteItselfInAnotherShapeIsNotJudged) {
  json result = {{"status", "completed"},
                 {"data_wait_fraction", 0.05},
                 {"profile", {{"by_bound", json::object()}, {"top_operators", {0}}, {"time_basis", 7}}}};
  const json r = Judge(result);
  EXPECT_EQ(r["bottleneck"]["verdict"], "unknown");
  EXPECT_THAT(r["profile"]["error"].get<std::string>(), HasSubstr("not judged: "));
}

TEST(ProfileSummaryTest, ShapesWithZerosOrHugeDimensionsAreEstimatedWithoutFault) {
  ProfileRecording r = WallRecording();
  r.calls[0].shapes = {{64, 0}, {256, 0}};                           // aten::linear: (.., 0) x (256, 0)^T
  r.calls[2].shapes = {{1}, {int64_t{1} << 40, 0}, {0, int64_t{1} << 40}};  // aten::addmm
  r.calls[3].shapes = {{int64_t{1} << 40, int64_t{1} << 40}};        // 2^80 elements
  const json p = SummarizeProfile(r).profile;
  EXPECT_GE(p["bytes_per_step"].get<int64_t>(), 0);
  EXPECT_NEAR(p["by_bound"]["compute"].get<double>(), 0.702, 1e-9);
}

TEST_F(CommandTrialProfileTest, WithoutAProfileOnlyInputBoundIsClaimed) {
  json result = {{"status", "completed"}, {"data_wait_fraction", 0.4}};
  EXPECT_EQ(Judge(result)["bottleneck"]["verdict"], "input-bound");
  result["data_wait_fraction"] = 0.05;
  EXPECT_EQ(Judge(result)["bottleneck"]["verdict"], "unknown");
  EXPECT_EQ(WithSummarizedProfile("not json", dir_), "not json");
}

// byo_pytorch's softmax attention as its profile records it (B 2, h 4, L = S 49, d 8): matmul(q, k^T),
// a division, softmax, matmul(p, v), with matmul's own nested bmm; a linear attention's two products
// with no softmax between them is not attention_kernel.
TEST(LabOpCallsTest, AttentionIsRecognizedAsMatmulSoftmaxMatmul) {
  ProfileRecording r;
  r.steps = {{2, 0, 1000, -1}, {3, 1000, 2000, -1}};
  for (double t : {0.0, 1000.0}) {
    r.calls.push_back(Call("aten::matmul", t + 10, t + 50, {{2, 4, 49, 8}, {2, 4, 8, 49}}));
    r.calls.push_back(Call("aten::bmm", t + 20, t + 45, {{8, 49, 8}, {8, 8, 49}}));
    r.calls.push_back(Call("aten::div", t + 55, t + 60, {{2, 4, 49, 49}, {}}));
    r.calls.push_back(Call("aten::softmax", t + 61, t + 70, {{2, 4, 49, 49}, {}, {}}));
    r.calls.push_back(Call("aten::matmul", t + 71, t + 90, {{2, 4, 49, 49}, {2, 4, 49, 8}}));
    r.calls.push_back(Call("aten::matmul", t + 100, t + 120, {{2, 4, 8, 49}, {2, 4, 49, 8}}));  // linear attention
    r.calls.push_back(Call("aten::matmul", t + 121, t + 140, {{2, 4, 49, 8}, {2, 4, 8, 8}}));
  }
  r.calls.push_back(Call("aten::matmul", 3000, 3010, {{1, 1, 3, 8}, {1, 1, 8, 3}}));  // after the steps
  const json calls = LabOpCalls(r);
  ASSERT_EQ(calls.size(), 1u) << calls.dump();
  EXPECT_EQ(calls[0]["op"], "attention_kernel");
  EXPECT_EQ(calls[0]["shapes"], json::parse("[[2, 4, 49, 8], [2, 4, 49, 8], [2, 4, 49, 8]]"));
  EXPECT_EQ(calls[0]["calls_per_step"], 1.0);

  r.calls[4].shapes[1] = {2, 4, 49, 16};  // v's width differs from q's: not attention_kernel
  r.calls[11].shapes[1] = {2, 4, 49, 16};
  EXPECT_TRUE(LabOpCalls(r).empty()) << LabOpCalls(r).dump();
}

TEST(LabOpCallsTest, BatchedProductsAreOneBatchOfHeads) {
  ProfileRecording r;
  r.steps = {{0, 0, 1000, -1}};
  r.calls = {Call("aten::bmm", 10, 20, {{6, 5, 4}, {6, 4, 7}}), Call("aten::_softmax", 30, 40, {{6, 5, 7}, {}, {}}),
             Call("aten::bmm", 50, 60, {{6, 5, 7}, {6, 7, 4}})};
  EXPECT_EQ(LabOpCalls(r)[0]["shapes"], json::parse("[[1, 6, 5, 4], [1, 6, 7, 4], [1, 6, 7, 4]]"));
}

}  // namespace
}  // namespace frontier
