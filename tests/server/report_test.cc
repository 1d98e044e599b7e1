#include "server/report/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/analysis/parity.h"
#include "server/report/csv.h"
#include "server/report/format.h"

namespace frontier {
namespace {

using nlohmann::json;

// Occurrences of `needle` in `text`.
size_t Count(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size()))
    ++count;
  return count;
}

std::vector<std::string> Split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at = text.find(separator); at != std::string::npos; at = text.find(separator, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + separator.size();
  }
  parts.push_back(text.substr(start));
  return parts;
}

TEST(MetricOfTest, MapsReportNamesToResultFields) {
  json result = json::parse(R"({
    "step_time_ms": {"median": 12.5, "p90": 14},
    "throughput": {"samples_per_s": 10240, "end_to_end_samples_per_s": 9000},
    "mfu": 0.31, "peak_memory_mb": 812, "params": 1200000, "val_accuracy": 0.91, "test_accuracy": 0.9,
    "val_loss": 0.28, "time_to_target_s": null, "device": "cpu",
    "flops": {"forward_per_step": 4.0e9, "train_per_step": 1.2e10, "train_per_sample": 9.375e7},
    "latency_ms": 3.5})");
  EXPECT_EQ(MetricOf(result, "step_time_ms"), 12.5);
  EXPECT_EQ(MetricOf(result, "flops"), 9.375e7);
  EXPECT_EQ(MetricOf(result, "latency_ms"), 3.5);
  EXPECT_EQ(MetricOf(result, "throughput"), 10240);
  EXPECT_EQ(MetricOf(result, "mfu"), 0.31);
  EXPECT_EQ(MetricOf(result, "params"), 1200000);
  EXPECT_EQ(MetricOf(result, "val_loss"), 0.28);
  EXPECT_EQ(MetricOf(result, "time_to_target_s"), std::nullopt);
  EXPECT_EQ(MetricOf(result, "missing"), std::nullopt);
  EXPECT_EQ(MetricOf(result, "device"), std::nullopt);
  EXPECT_EQ(MetricOf(result, "throughput.end_to_end_samples_per_s"), 9000);
  EXPECT_EQ(MetricOf(json(nullptr), "mfu"), std::nullopt);
  EXPECT_EQ(MetricOf(json::parse(R"({"throughput": 5})"), "throughput"), std::nullopt);
  EXPECT_EQ(ReportMetrics().size(), 13u);
  EXPECT_EQ(MetricOf(json::parse(R"({"val_iou": 0.41, "test_iou": 0.4})"), "val_iou"), 0.41);
}

TEST(ReportTest, ShowsEachConfigsBottleneckAndProfiles) {
  SearchSpace space;
  space.objectives = {{"val_accuracy", true}, {"throughput", true}};
  space.parity = {"val_accuracy", 0.01};
  std::vector<TrialRecord> trials;
  const char* verdicts[] = {"compute-bound", "compute-bound", "input-bound"};
  for (int i = 0; i < 3; ++i) {
    TrialRecord t;
    t.trial_id = "t" + std::to_string(i);
    t.config = i < 2 ? json::object() : json{{"block", "convnext"}};
    t.config_key = t.config.dump();
    t.is_baseline = i < 2;
    t.seed = i % 2 + 1;
    t.state = "completed";
    t.result = {
        {"val_accuracy", 0.9},
        {"throughput", {{"samples_per_s", 100.0}}},
        {"bottleneck", {{"verdict", verdicts[i]}, {"summary", std::string(verdicts[i]) + ": because"}}}};
    if (i == 0) {
      t.result["profile"] = {
          {"tool", "libtorch"},
          {"host", "node7"},
          {"trace", "/a/t0/trace.json"},
          {"top_operators",
           {{{"name", "aten::convolution_backward"}, {"class", "compute"}, {"share", 0.39}}}}};
    }
    trials.push_back(t);
  }
  const Report report = BuildReport("exp-b", space, trials);
  ASSERT_EQ(report.configs.size(), 2u);
  EXPECT_EQ(BottleneckLabel(report.configs[0]), "compute-bound");
  EXPECT_EQ(report.configs[0].bottleneck_verdicts.at("compute-bound"), 2);
  ASSERT_EQ(report.configs[0].profiles.size(), 1u);
  EXPECT_EQ(report.configs[0].profiles[0]["host"], "node7");
  EXPECT_EQ(BottleneckLabel(report.configs[1]), "input-bound");
  const std::string table = RenderTable(report, TableOptions{true});
  EXPECT_NE(table.find("bottleneck"), std::string::npos) << table;
  EXPECT_NE(table.find("input-bound"), std::string::npos) << table;
  const std::string html = RenderHtml(report);
  EXPECT_NE(html.find("Where the step time goes"), std::string::npos);
  EXPECT_NE(html.find("node7:/a/t0/trace.json"), std::string::npos);
  EXPECT_NE(html.find("aten::convolution_backward 39%"), std::string::npos);
  const json j = ReportToJson(report);
  EXPECT_EQ(j["configs"][0]["bottleneck"]["verdicts"]["compute-bound"], 2);
  EXPECT_EQ(j["configs"][0]["bottleneck"]["profiles"][0]["trace"], "/a/t0/trace.json");
  ConfigSummary mixed;
  mixed.bottleneck_verdicts = {{"compute-bound", 1}, {"memory-bound", 1}};
  EXPECT_EQ(BottleneckLabel(mixed), "compute-bound 1, memory-bound 1");
}

// By default only seed 1 of a configuration is profiled (docs/profiling.md): a later seed's "unknown"
// (no profile to judge from) is neither counted beside the profiled seed's verdict nor its summary,
// whichever seed the report reads first; with no seed profiled, the configuration is "unknown".
TEST(ReportTest, AnUnprofiledSeedLeavesTheVerdictToTheProfiledOne) {
  SearchSpace space;
  space.objectives = {{"val_accuracy", true}, {"throughput", true}};
  space.parity = {"val_accuracy", 0.01};
  std::vector<TrialRecord> trials;
  const auto add = [&](const std::string& block, int seed, const std::string& verdict) {
    TrialRecord t;
    t.trial_id = block + std::to_string(seed);
    t.config = {{"block", block}};
    t.config_key = t.config.dump();
    t.is_baseline = block == "basic";
    t.seed = seed;
    t.state = "completed";
    t.result = {{"val_accuracy", 0.9},
                {"throughput", {{"samples_per_s", 100.0}}},
                {"bottleneck", {{"verdict", verdict}, {"summary", verdict + ": seed " + std::to_string(seed)}}}};
    trials.push_back(t);
  };
  add("basic", 2, "unknown");  // read first
  add("basic", 1, "memory-bound");
  add("basic", 3, "unknown");
  add("convnext", 1, "unknown");
  add("convnext", 2, "unknown");
  const Report report = BuildReport("exp-u", space, trials);
  ASSERT_EQ(report.configs.size(), 2u);
  const ConfigSummary& basic = report.configs[0].is_baseline ? report.configs[0] : report.configs[1];
  const ConfigSummary& convnext = report.configs[0].is_baseline ? report.configs[1] : report.configs[0];
  EXPECT_EQ(BottleneckLabel(basic), "memory-bound");
  EXPECT_EQ(basic.bottleneck_summary, "memory-bound: seed 1");
  EXPECT_EQ(BottleneckLabel(convnext), "unknown");
  EXPECT_EQ(convnext.bottleneck_verdicts.at("unknown"), 2);
  EXPECT_EQ(convnext.bottleneck_summary, "unknown: seed 1");
}

TEST(ReportTest, PairedParityUsesPerSeedDifferences) {
  // Identical per-seed quality (e.g. the same computation, faster): the paired
  // differences are 0 with no spread, so the variant is at parity; the unpaired
  // Welch test over 2 seeds with these spreads cannot say so.
  SearchSpace space;
  space.objectives = {{"val_iou", true}, {"throughput", true}};
  space.parity = {"val_iou", 0.01, "paired"};
  std::vector<TrialRecord> trials;
  const double iou[] = {0.367, 0.397};
  for (int variant = 0; variant < 2; ++variant) {
    for (int seed = 1; seed <= 2; ++seed) {
      TrialRecord t;
      t.trial_id = "t" + std::to_string(variant) + std::to_string(seed);
      t.config = variant ? json{{"pool", "fused"}} : json::object();
      t.config_key = t.config.dump();
      t.is_baseline = variant == 0;
      t.seed = seed;
      t.state = "completed";
      t.result = {{"val_iou", iou[seed - 1]}, {"throughput", {{"samples_per_s", variant ? 130.0 : 100.0}}}};
      trials.push_back(t);
    }
  }
  Report paired = BuildReport("exp-p", space, trials);
  ASSERT_EQ(paired.configs.size(), 2u);
  EXPECT_EQ(paired.configs[1].parity_test, "paired");
  EXPECT_EQ(paired.configs[1].parity, "at parity");
  EXPECT_DOUBLE_EQ(paired.configs[1].quality_delta->value, 0);
  EXPECT_DOUBLE_EQ(paired.configs[1].quality_delta->low, 0);
  space.parity.test = "welch";
  Report welch = BuildReport("exp-w", space, trials);
  EXPECT_EQ(welch.configs[1].parity_test, "welch");
  EXPECT_EQ(welch.configs[1].parity, "inconclusive");

  // Differences 0.01, 0.03, 0.02 (mean 0.02, sd 0.01, n 3): one-sided 95% t(2) = 2.919986,
  // lower bound 0.02 - 2.919986 * 0.01 / sqrt(3) = 0.003141 (computed by hand).
  const std::map<int64_t, double> v = {{1, 0.51}, {2, 0.53}, {3, 0.52}},
                                  b = {{1, 0.50}, {2, 0.50}, {3, 0.50}};
  EXPECT_EQ(PairedParityVerdict(v, b, 0.0, false), "at parity");  // 0.003141 > -0
  EXPECT_EQ(PairedParityVerdict(b, v, 0.0, false), "worse");      // upper bound -0.003141 < 0
  EXPECT_EQ(PairedParityVerdict(b, v, 0.01, false), "inconclusive");
  // Two-sided 95%: t(2) = 4.302653, half-width 0.024841.
  const std::optional<Interval> d = PairedDifferenceInterval(v, b);
  ASSERT_TRUE(d.has_value());
  EXPECT_NEAR(d->value, 0.02, 1e-12);
  EXPECT_NEAR(d->low, 0.02 - 0.0248414, 1e-6);
  EXPECT_NEAR(d->high, 0.02 + 0.0248414, 1e-6);
  // Not paired: different seeds, or fewer than 2.
  EXPECT_FALSE(PairedDifferenceInterval({{1, 0.5}, {2, 0.5}}, {{1, 0.5}, {3, 0.5}}).has_value());
  EXPECT_FALSE(PairedDifferenceInterval({{1, 0.5}}, {{1, 0.5}}).has_value());
  // Paired on the variant's seeds when the baseline has more (adaptive seeds
  // added for another configuration): the same differences as above.
  const std::map<int64_t, double> more = {{1, 0.50}, {2, 0.50}, {3, 0.50}, {4, 0.9}};
  const std::optional<Interval> superset = PairedDifferenceInterval(v, more);
  ASSERT_TRUE(superset.has_value());
  EXPECT_NEAR(superset->value, 0.02, 1e-12);
  EXPECT_EQ(PairedParityVerdict(v, more, 0.0, false), "at parity");
}

TEST(ReportTest, TableShowsIouForTheBevTask) {
  SearchSpace space;
  space.objectives = {{"val_iou", true}, {"throughput", true}};
  space.parity = {"val_iou", 0.01};
  std::vector<TrialRecord> trials;
  for (int seed = 1; seed <= 2; ++seed) {
    TrialRecord t;
    t.trial_id = "t" + std::to_string(seed);
    t.config = json::object();
    t.config_key = "{}";
    t.is_baseline = true;
    t.seed = seed;
    t.state = "completed";
    t.result = {
        {"val_iou", 0.40 + 0.02 * seed}, {"test_iou", 0.39}, {"throughput", {{"samples_per_s", 100.0}}}};
    trials.push_back(t);
  }
  const Report report = BuildReport("exp-iou", space, trials);
  EXPECT_NEAR(report.configs.at(0).metrics.at("val_iou").mean, 0.43, 1e-12);
  const std::string table = RenderTable(report, TableOptions{true});
  EXPECT_NE(table.find("val IoU"), std::string::npos) << table;
  EXPECT_NE(table.find("0.3900"), std::string::npos) << table;  // test IoU
  EXPECT_EQ(table.find("val acc"), std::string::npos) << table;
}

json Result(double val_accuracy, double throughput, double peak_memory_mb) {
  return {{"status", "completed"},
          {"val_accuracy", val_accuracy},
          {"test_accuracy", val_accuracy - 0.01},
          {"val_loss", 1 - val_accuracy},
          {"throughput", {{"samples_per_s", throughput}, {"end_to_end_samples_per_s", throughput * 0.9}}},
          {"step_time_ms", {{"median", 128000 / throughput}, {"p10", 1}, {"p90", 2}}},
          {"mfu", 0.25},
          {"peak_memory_mb", peak_memory_mb},
          {"params", 1.5e6},
          {"time_to_target_s", nullptr}};
}

const char* const kPatchify = R"({"stem.kind":"patchify"})";
const char* const kBf16 = R"({"runtime.precision":"bf16"})";
const char* const kConvnext = R"({"stages[*].block":"convnext"})";

SearchSpace TestSpace() {
  SearchSpace space;
  space.name = "quickstart";
  space.objectives = {{"val_accuracy", true}, {"throughput", true}};
  space.constraints = {{"peak_memory_mb", std::nullopt, 4096.0}};
  space.repeats = 3;
  space.parity = {"val_accuracy", 0.005};
  return space;
}

// Baseline and three variants over three seeds: patchify is twice as fast at
// parity, bf16 dominates everything but breaks the memory constraint, and
// convnext only failed.
std::vector<TrialRecord> TestTrials() {
  std::vector<TrialRecord> trials;
  auto add = [&trials](const std::string& key, int64_t seed, const std::string& state, json result) {
    TrialRecord t;
    t.trial_id = key + "#" + std::to_string(seed) + state;
    t.config_key = key;
    t.config = json::parse(key);
    t.is_baseline = key == "{}";
    t.seed = seed;
    t.state = state;
    t.result = std::move(result);
    trials.push_back(std::move(t));
  };
  const double baseline_acc[] = {0.900, 0.901, 0.902}, baseline_thr[] = {100, 105, 95};
  const double patch_acc[] = {0.899, 0.900, 0.901}, patch_thr[] = {200, 210, 190};
  for (int seed = 1; seed <= 3; ++seed) {
    add(kPatchify, seed, "completed", Result(patch_acc[seed - 1], patch_thr[seed - 1], 900));
    add("{}", seed, "completed", Result(baseline_acc[seed - 1], baseline_thr[seed - 1], 1000));
    add(kBf16, seed, "completed", Result(0.95, 300 + seed, 5000));
    add(kConvnext, seed, "failed", {{"status", "failed"}, {"error_kind", "runtime"}});
  }
  // A diverged run is counted as failed and left out of the summaries.
  json diverged = Result(0.1, 1000, 900);
  diverged["status"] = "diverged";
  add(kPatchify, 4, "diverged", diverged);
  return trials;
}

TEST(BuildReportTest, EndToEnd) {
  Report report = BuildReport("exp-1", TestSpace(), TestTrials());
  EXPECT_EQ(report.experiment_id, "exp-1");
  EXPECT_EQ(report.name, "quickstart");
  ASSERT_EQ(report.configs.size(), 4u);
  const ConfigSummary& baseline = report.configs[0];
  const ConfigSummary& bf16 = report.configs[1];
  const ConfigSummary& convnext = report.configs[2];
  const ConfigSummary& patchify = report.configs[3];
  EXPECT_EQ(baseline.config_key, "{}");
  EXPECT_EQ(bf16.config_key, kBf16);
  EXPECT_EQ(convnext.config_key, kConvnext);
  EXPECT_EQ(patchify.config_key, kPatchify);

  EXPECT_TRUE(baseline.is_baseline);
  EXPECT_EQ(baseline.seeds_completed, 3);
  EXPECT_EQ(baseline.parity, "baseline");
  EXPECT_NEAR(baseline.metrics.at("val_accuracy").mean, 0.901, 1e-12);
  EXPECT_NEAR(baseline.metrics.at("step_time_ms").mean, (1280 + 128000 / 105.0 + 128000 / 95.0) / 3, 1e-9);
  EXPECT_EQ(baseline.metrics.count("time_to_target_s"), 0u);  // null in every result
  EXPECT_DOUBLE_EQ(baseline.speedup->value, 1);

  EXPECT_EQ(patchify.seeds_completed, 3);
  EXPECT_EQ(patchify.trials_total, 4);
  EXPECT_EQ(patchify.trials_failed, 1);
  EXPECT_EQ(patchify.metrics.at("throughput").n, 3);
  EXPECT_DOUBLE_EQ(patchify.metrics.at("throughput").mean, 200);
  ASSERT_TRUE(patchify.speedup.has_value());
  // On the log scale: 2 exp(-+t(0.975, 4) sqrt(2/1200)) (docs/report.md).
  const double half = 2.776445105 * std::sqrt(2.0 / 1200);
  EXPECT_NEAR(patchify.speedup->value, 2, 1e-12);
  EXPECT_NEAR(patchify.speedup->low, 2 * std::exp(-half), 1e-8);
  EXPECT_NEAR(patchify.speedup->high, 2 * std::exp(half), 1e-8);
  ASSERT_TRUE(patchify.quality_delta.has_value());
  EXPECT_NEAR(patchify.quality_delta->value, -0.001, 1e-12);
  EXPECT_EQ(patchify.quality_delta->n_variant, 3);
  EXPECT_EQ(patchify.quality_delta->n_baseline, 3);
  EXPECT_EQ(patchify.parity, "at parity");

  EXPECT_FALSE(bf16.feasible);
  EXPECT_EQ(bf16.infeasible_reason, "peak_memory_mb mean 5000 > max 4096");
  EXPECT_FALSE(bf16.on_front);
  EXPECT_EQ(bf16.parity, "at parity");

  EXPECT_EQ(convnext.seeds_completed, 0);
  EXPECT_EQ(convnext.trials_failed, 3);
  EXPECT_TRUE(convnext.metrics.empty());
  EXPECT_EQ(convnext.parity, "no data");
  EXPECT_FALSE(convnext.feasible);
  EXPECT_FALSE(convnext.speedup.has_value());
  EXPECT_FALSE(convnext.on_front);

  // The baseline is the most accurate feasible config, patchify the fastest.
  EXPECT_TRUE(baseline.on_front);
  EXPECT_TRUE(patchify.on_front);
  // Normalized: baseline (1, 1), patchify (0.9/0.901, 2).
  EXPECT_NEAR(report.hypervolume, 1 + 0.9 / 0.901, 1e-12);
  EXPECT_EQ(report.reference_point, (std::vector<double>{0, 0}));
  EXPECT_NE(report.hypervolume_note.find("baseline alone scores 1"), std::string::npos);
}

// Random configs over three seeds, some without a config (taken from the
// key), some failed, some with evaluations for time to target.
std::vector<TrialRecord> RandomTrials(std::mt19937& rng, int configs) {
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<TrialRecord> trials;
  for (int c = 0; c < configs; ++c) {
    const json config = c == 0 ? json::object() : json{{"width_mult", 0.5 + 0.01 * c}};
    for (int seed = 1; seed <= 3; ++seed) {
      TrialRecord t;
      t.trial_id = "t" + std::to_string(c) + "-" + std::to_string(seed);
      t.config_key = ConfigKey(config);
      if (c % 2 == 0) t.config = config;
      t.is_baseline = c == 0;
      t.seed = seed;
      t.state = unit(rng) < 0.1 ? "failed" : "completed";
      if (t.state == "completed") {
        t.result = Result(0.85 + 0.1 * unit(rng), 100 + 100 * unit(rng), 500 + 5000 * unit(rng));
        t.result.erase("time_to_target_s");
        t.result["evals"] = json::array();
        for (int e = 1; e <= 3; ++e) {
          t.result["evals"].push_back(
              {{"val_accuracy", 0.8 + 0.05 * e * unit(rng)}, {"train_time_s", 10.0 * e}});
        }
      }
      trials.push_back(std::move(t));
    }
  }
  std::shuffle(trials.begin(), trials.end(), rng);
  return trials;
}

TEST(BuildReportTest, FrontOnlyIsTheFullReportFiltered) {
  std::mt19937 rng(11);
  const std::vector<TrialRecord> trials = RandomTrials(rng, 200);
  Report full = BuildReport("exp-1", TestSpace(), trials);
  ReportBuilder builder("exp-1", TestSpace());
  for (const TrialRecord& t : trials) builder.Add(t);
  Report front = builder.Build(/*front_only=*/true);

  size_t on_front = 0, infeasible = 0, with_time_to_target = 0;
  std::vector<ConfigSummary> kept;
  for (const ConfigSummary& c : full.configs) {
    on_front += c.on_front;
    infeasible += !c.feasible;
    with_time_to_target += c.metrics.count("time_to_target_s");
    EXPECT_EQ(c.config, json::parse(c.config_key));
    if (c.is_baseline || c.on_front) kept.push_back(c);
  }
  ASSERT_EQ(full.configs.size(), 200u);
  EXPECT_TRUE(full.configs.front().is_baseline);
  EXPECT_GT(on_front, 1u);
  EXPECT_GT(infeasible, 10u);
  EXPECT_GT(with_time_to_target, 10u);
  full.configs = kept;
  EXPECT_EQ(ReportToJson(front).dump(), ReportToJson(full).dump());
}

TEST(BuildReportTest, ResultsReadFromTextEqualResultsReadFromDocuments) {
  std::mt19937 rng(5);
  std::vector<TrialRecord> trials = RandomTrials(rng, 60);
  // Shapes the text reader must treat as the document reader does.
  for (size_t i = 0; i < trials.size(); ++i) {
    json& r = trials[i].result;
    if (trials[i].state != "completed") continue;
    if (i % 7 == 0)
      r["bottleneck"] = {{"verdict", i % 2 ? "compute-bound" : "input-bound"},
                         {"summary", "s" + std::to_string(i)}};
    if (i % 11 == 0) r["evals"].push_back(json::array({1, 2}));       // not an object: skipped
    if (i % 13 == 0) r["evals"].push_back({{"val_accuracy", 0.99}});  // no time: skipped
    if (i % 17 == 0)
      r["extra"] = {{"val_accuracy", 0.1}, {"list", {{{"throughput", 5}}}}};  // same names elsewhere
    if (i % 19 == 0) r["throughput"] = 250;                                   // not the nested field: absent
    if (i % 23 == 0)
      r["profile"] = {{"tool", "libtorch"},
                      {"host", "h"},
                      {"trace", "t.json"},
                      {"top_operators", {{{"name", "aten::mm"}, {"class", "compute"}, {"share", 0.5}}}}};
    if (i % 29 == 0) r["params"] = 12345678901234ull;
  }
  Report from_documents = BuildReport("exp-1", TestSpace(), trials);
  ReportBuilder builder("exp-1", TestSpace());
  for (TrialRecord t : trials) {
    const std::string text = t.state == "completed" ? t.result.dump() : "";
    t.result = json();
    builder.Add(std::move(t), text);
  }
  Report from_text = builder.Build();
  EXPECT_EQ(ReportToJson(from_text).dump(), ReportToJson(from_documents).dump());
  size_t profiled = 0, with_verdicts = 0;
  for (const ConfigSummary& c : from_text.configs) {
    profiled += c.profiles.size();
    with_verdicts += !c.bottleneck_verdicts.empty();
  }
  EXPECT_GT(profiled, 0u);
  EXPECT_GT(with_verdicts, 0u);
  ReportBuilder bad("exp-1", TestSpace());
  TrialRecord t = trials.front();
  t.state = "completed";
  EXPECT_THROW(bad.Add(t, "{\"val_accuracy\": 0.5"), std::invalid_argument);
}

TEST(BuildReportTest, MinimizedObjectivesAreInvertedInTheHypervolume) {
  SearchSpace space = TestSpace();
  space.objectives = {{"val_accuracy", true}, {"peak_memory_mb", false}};
  space.constraints.clear();
  Report report = BuildReport("exp-2", space, TestTrials());
  // Accuracy against memory: bf16 is the most accurate, patchify the leanest,
  // the baseline in between on both; all three are on the front.
  EXPECT_TRUE(report.configs[0].on_front);
  EXPECT_TRUE(report.configs[1].on_front);
  EXPECT_TRUE(report.configs[3].on_front);
  // Normalized: baseline (1, 1), bf16 (0.95/0.901, 1000/5000), patchify (0.9/0.901, 1000/900).
  const double bf16_acc = 0.95 / 0.901, bf16_mem = 0.2, patch_acc = 0.9 / 0.901, patch_mem = 1000 / 900.0;
  EXPECT_NEAR(report.hypervolume, bf16_acc * bf16_mem + 1 * (1 - bf16_mem) + patch_acc * (patch_mem - 1),
              1e-12);
}

TEST(BuildReportTest, WithoutBaselineDataThereIsNoHypervolume) {
  std::vector<TrialRecord> trials;
  for (TrialRecord& t : TestTrials()) {
    if (t.is_baseline) t.state = "failed";
    trials.push_back(t);
  }
  Report report = BuildReport("exp-3", TestSpace(), trials);
  EXPECT_EQ(report.configs[0].parity, "no data");
  EXPECT_DOUBLE_EQ(report.hypervolume, 0);
  EXPECT_NE(report.hypervolume_note.find("no baseline data"), std::string::npos);
  EXPECT_EQ(report.configs[3].parity, "inconclusive");
  EXPECT_FALSE(report.configs[3].speedup.has_value());
  EXPECT_TRUE(report.configs[3].on_front);
}

// The exact hypervolume grows as configs^(objectives - 1): over 36 front
// configs in 8 objectives the report says it is not computed, and why (12
// objectives over 30 configs never finished); the front is there.
TEST(BuildReportTest, TooManyObjectivesForAnExactHypervolumeSayWhy) {
  SearchSpace space;
  for (int k = 0; k < 8; ++k) space.objectives.push_back({"m" + std::to_string(k), true});
  space.parity = {"m0", 0.01};
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> uniform(1, 2);
  std::vector<TrialRecord> trials;
  for (int i = 0; i < 36; ++i) {
    TrialRecord t;
    t.trial_id = "t" + std::to_string(i);
    t.config = i == 0 ? json::object() : json{{"x", i}};
    t.config_key = t.config.dump();
    t.is_baseline = i == 0;
    t.seed = 1;
    t.state = "completed";
    // On the simplex sum = 8: no config dominates another.
    std::vector<double> values(8);
    double sum = 0;
    for (double& v : values) sum += v = uniform(rng);
    for (int k = 0; k < 8; ++k) t.result["m" + std::to_string(k)] = values[k] * 8 / sum;
    trials.push_back(std::move(t));
  }
  const Report report = BuildReport("exp-m", space, trials);
  EXPECT_EQ(std::count_if(report.configs.begin(), report.configs.end(),
                          [](const ConfigSummary& c) { return c.on_front; }),
            36);
  EXPECT_EQ(report.hypervolume, 0);
  EXPECT_EQ(
      report.hypervolume_note,
      "hypervolume not computed: the exact hypervolume of 36 front configs in 8 objectives takes more than "
      "20000000 steps (it grows as configs^(objectives - 1)); the front itself is complete");
  // Two objectives over the same configs: computed, as before.
  space.objectives.resize(2);
  EXPECT_GT(BuildReport("exp-m", space, trials).hypervolume, 0);
}

// One malformed field in one stored result ("profile": {"tool": 5} made the
// whole report fail) reads as absent; the rest of the trial and the report are read.
TEST(BuildReportTest, MalformedFieldsOfAStoredResultReadAsAbsent) {
  std::vector<TrialRecord> trials = TestTrials();
  TrialRecord& profiled = trials.front();
  ASSERT_EQ(profiled.state, "completed");
  profiled.result["profile"] = {
      {"tool", 5},
      {"host", json::array({"h"})},
      {"trace", {{"path", "t.json"}}},
      {"report", "r.nsys-rep"},
      {"top_operators", {{{"name", 3}, {"class", "compute"}, {"share", "big"}}, 7}}};
  profiled.result["bottleneck"] = {{"verdict", "compute-bound"}, {"summary", 9}};
  profiled.result["placement"] = {{"shared_cores", "yes"}};
  for (const bool from_text : {false, true}) {
    SCOPED_TRACE(from_text ? "from text" : "from documents");
    Report report;
    if (from_text) {
      ReportBuilder builder("exp-1", TestSpace());
      for (TrialRecord t : trials) {
        const std::string text = t.state == "completed" ? t.result.dump() : "";
        t.result = json();
        builder.Add(std::move(t), text);
      }
      report = builder.Build();
    } else {
      report = BuildReport("exp-1", TestSpace(), trials);
    }
    const auto config =
        std::find_if(report.configs.begin(), report.configs.end(),
                     [&](const ConfigSummary& c) { return c.config_key == profiled.config_key; });
    ASSERT_NE(config, report.configs.end());
    ASSERT_EQ(config->profiles.size(), 1u);
    const json& entry = config->profiles[0];
    EXPECT_EQ(entry["tool"], "");
    EXPECT_EQ(entry["host"], "");
    EXPECT_EQ(entry["trace"], "r.nsys-rep");
    EXPECT_EQ(entry["top_operators"], json::parse(R"([{"name": "", "class": "compute", "share": 0.0}])"));
    EXPECT_EQ(config->bottleneck_verdicts.at("compute-bound"), 1);
    EXPECT_EQ(config->metrics.at("val_accuracy").n, 3);
    EXPECT_EQ(report.configs.size(), 4u);
  }
}

TEST(BuildReportTest, ParityOnALossUsesItsDirection) {
  SearchSpace space = TestSpace();
  space.parity = {"val_loss", 0.005};
  Report report = BuildReport("exp-4", space, TestTrials());
  EXPECT_EQ(report.configs[3].parity, "at parity");  // loss 0.001 higher, within the margin
  EXPECT_NEAR(report.configs[3].quality_delta->value, 0.001, 1e-12);
  EXPECT_EQ(report.configs[1].parity, "at parity");  // lower loss
}

// ---------------------------------------------------------------------------
// Outputs

TEST(ReportOutputTest, JsonHasEveryField) {
  json j = ReportToJson(BuildReport("exp-1", TestSpace(), TestTrials()));
  for (const char* key : {"experiment_id", "name", "objectives", "constraints", "parity", "configs",
                          "hypervolume", "reference_point", "hypervolume_note"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["objectives"][1], json::parse(R"({"metric": "throughput", "goal": "maximize"})"));
  EXPECT_EQ(j["constraints"][0], json::parse(R"({"metric": "peak_memory_mb", "min": null, "max": 4096.0})"));
  EXPECT_EQ(j["reference_point"], json::parse("[0.0, 0.0]"));
  ASSERT_EQ(j["configs"].size(), 4u);
  const json& patchify = j["configs"][3];
  for (const char* key :
       {"config_key", "config", "is_baseline", "seeds_completed", "trials_total", "trials_failed", "metrics",
        "feasible", "infeasible_reason", "on_front", "speedup", "quality_delta", "parity"}) {
    EXPECT_TRUE(patchify.contains(key)) << key;
  }
  EXPECT_EQ(patchify["config"], json::parse(kPatchify));
  EXPECT_EQ(patchify["metrics"]["throughput"]["n"], 3);
  EXPECT_EQ(patchify["speedup"]["n_baseline"], 3);
  EXPECT_TRUE(j["configs"][2]["speedup"].is_null());
}

TEST(ReportOutputTest, CsvIsOneQuotedRowPerConfig) {
  const std::string csv = RenderCsv(BuildReport("exp-1", TestSpace(), TestTrials()));
  ASSERT_EQ(csv.substr(csv.size() - 2), "\r\n");
  std::vector<std::string> lines = Split(csv.substr(0, csv.size() - 2), "\r\n");
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].rfind("config_key,is_baseline,seeds_completed,", 0), 0u);
  EXPECT_NE(lines[0].find(",throughput_mean,"), std::string::npos);
  EXPECT_NE(lines[0].find(",speedup,speedup_low,speedup_high,"), std::string::npos);
  // Keys contain quotes: quoted, quotes doubled.
  EXPECT_EQ(lines[4].rfind(R"("{""stem.kind"":""patchify""}",false,3,4,1,true,,true,)", 0), 0u);
  EXPECT_EQ(lines[1].rfind("{},true,3,3,0,true,,true,", 0), 0u);
  // Same number of fields on every line (no field here holds a comma inside quotes).
  const size_t fields = Count(lines[0], ",");
  for (const std::string& line : lines) EXPECT_EQ(Count(line, ","), fields) << line;
  EXPECT_NE(lines[4].find(",at parity"), std::string::npos);
}

TEST(ReportOutputTest, CsvQuotesCommas) {
  std::vector<TrialRecord> trials = TestTrials();
  for (TrialRecord& t : trials) {
    if (t.config_key == kPatchify) t.config_key = R"({"a":"x,y"})";
  }
  const std::string csv = RenderCsv(BuildReport("exp-1", TestSpace(), trials));
  EXPECT_NE(csv.find("\r\n\"{\"\"a\"\":\"\"x,y\"\"}\",false,"), std::string::npos);
}

// RFC 4180: a field is quoted exactly when it holds a comma, a double quote,
// a CR or an LF, and an inner quote is doubled.
TEST(CsvFieldTest, QuotesOnlyWhatRfc4180Needs) {
  EXPECT_EQ(CsvField(""), "");
  EXPECT_EQ(CsvField("plain text; with: punctuation"), "plain text; with: punctuation");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("line\nbreak"), "\"line\nbreak\"");
  EXPECT_EQ(CsvField("carriage\rreturn"), "\"carriage\rreturn\"");
  EXPECT_EQ(CsvField("\r\n"), "\"\r\n\"");
  EXPECT_EQ(CsvField(R"({"a":1})"), R"("{""a"":1}")");
}

TEST(ReportOutputTest, TableShowsEveryConfigAndTheFront) {
  const std::string table = RenderTable(BuildReport("exp-1", TestSpace(), TestTrials()));
  EXPECT_NE(table.find("experiment exp-1 (quickstart)"), std::string::npos);
  for (const char* text :
       {"config", "seeds", "val acc", "speed-up [95% CI]", "parity", "front", "baseline", "stem=patchify",
        "prec=bf16", "block=convnext", "3 (1 failed)", "0 (3 failed)", "2.00x [1.79,2.24]", "-0.0010 (\u2265",
        "at parity", "no data", "0.9010\u00b10.0025",
        "infeasible: prec=bf16: peak_memory_mb mean 5000 > max 4096", "hypervolume: 1.99889"}) {
    EXPECT_NE(table.find(text), std::string::npos) << text << "\n" << table;
  }
  // Aligned: every column starts at the same display position on every row
  // (the rule line's dashes show where). Positions count code points, as "±" and "Δ" are two bytes.
  auto display_column = [](const std::string& line, size_t byte) {
    size_t column = 0;
    for (size_t i = 0; i < byte; ++i) column += (static_cast<unsigned char>(line[i]) & 0xC0) != 0x80;
    return column;
  };
  std::vector<std::string> lines = Split(table, "\n");
  const std::string& rule = lines[3];
  ASSERT_EQ(rule.rfind("-  ---", 0), 0u);  // the row number, then the config
  const size_t parity_start = rule.rfind("  ", rule.rfind("  ") - 1) + 2;  // the next-to-last column
  EXPECT_EQ(display_column(lines[2], lines[2].find("parity")), parity_start);
  const std::vector<std::string> verdicts = {"baseline", "at parity", "no data", "at parity"};
  std::vector<std::string> markers;
  for (size_t row = 0; row < verdicts.size(); ++row) {
    const std::string& line = lines[4 + row];
    const size_t verdict = line.rfind(verdicts[row]);
    EXPECT_EQ(display_column(line, verdict), parity_start) << line;
    const std::string rest = line.substr(verdict + verdicts[row].size());
    markers.push_back(rest.empty() ? "" : rest.substr(rest.find_first_not_of(' ')));
  }
  EXPECT_EQ(markers, (std::vector<std::string>{"*", "infeasible", "", "*"}));
}

TEST(FormatNumberTest, HugeMagnitudesAreScientificWithTheColumnsDigits) {
  EXPECT_EQ(FormatNumber("%.2f", 1e200), "1e+200");
  EXPECT_EQ(FormatNumber("%.2f", 1.23456e200), "1.23e+200");
  EXPECT_EQ(FormatNumber("%.1f", -2.5e17), "-2.5e+17");
  EXPECT_EQ(FormatNumber("%+.4f", 1.234567e20), "+1.2346e+20");
  EXPECT_EQ(FormatNumber("%.2fx", 3e15), "3e+15x");
  EXPECT_EQ(FormatNumber("%.3f", -std::numeric_limits<double>::infinity()), "-inf");
  // Below 1e15 the text is printf's %f.
  EXPECT_EQ(FormatNumber("%.2f", 999999999999999.0), "999999999999999.00");
  EXPECT_EQ(FormatNumber("%+.4f", -0.00123), "-0.0012");
  EXPECT_EQ(FormatNumber("%.1f", 1e-200), "0.0");
}

// A config whose results are astronomically large (a command trial may report
// anything): its cells stay short, not hundreds of digits.
TEST(ReportOutputTest, TableShowsHugeValuesInScientificNotation) {
  std::vector<TrialRecord> trials = TestTrials();
  for (TrialRecord& t : trials) {
    if (t.config_key != kPatchify || t.state != "completed") continue;
    t.result["throughput"]["samples_per_s"] = 1e200 * t.seed;
    t.result["peak_memory_mb"] = 1e200;
    t.result["params"] = 2e300;
  }
  const std::string table = RenderTable(BuildReport("exp-1", TestSpace(), trials), TableOptions{true});
  for (const char* text : {"2e+200", "1e+200", "2e+300", "2e+198x"}) {
    EXPECT_NE(table.find(text), std::string::npos) << text << "\n" << table;
  }
  EXPECT_EQ(table.find("0000000000000000"), std::string::npos) << table;
}

TEST(ReportOutputTest, HtmlIsSelfContainedWithOneCirclePerConfigWithData) {
  const std::string html = RenderHtml(BuildReport("exp-1", TestSpace(), TestTrials()));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(Count(html, "<svg class=\"plot front-plot\""), 1u);
  EXPECT_EQ(Count(html, "<circle class=\"config\""), 3u);  // convnext has no data
  EXPECT_EQ(Count(html, "<polyline class=\"front\""), 1u);
  EXPECT_EQ(Count(html, "<circle class=\"baseline\""), 1u);
  EXPECT_NE(html.find("data-config=\"{&quot;stem.kind&quot;:&quot;patchify&quot;}\""), std::string::npos);
  EXPECT_NE(html.find("<table class=\"configs\">"), std::string::npos);
  EXPECT_NE(html.find("throughput (samples/s)"), std::string::npos);
  EXPECT_NE(html.find("class=\"legend\""), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("{\"stem"), std::string::npos);  // escaped everywhere
}

TEST(ReportOutputTest, HtmlFrontRunsThroughFrontPointsByThroughput) {
  const std::string html = RenderHtml(BuildReport("exp-1", TestSpace(), TestTrials()));
  const size_t start = html.find("<polyline class=\"front\" points=\"");
  ASSERT_NE(start, std::string::npos);
  const size_t from = start + std::string("<polyline class=\"front\" points=\"").size();
  const std::vector<std::string> vertices = Split(html.substr(from, html.find('"', from) - from), " ");
  ASSERT_EQ(vertices.size(), 2u);  // baseline and patchify
  EXPECT_LT(std::stod(vertices[0]), std::stod(vertices[1]));
}

TEST(ReportOutputTest, EmptyReportRenders) {
  Report report = BuildReport("empty", TestSpace(), {});
  EXPECT_TRUE(report.configs.empty());
  const std::string html = RenderHtml(report);
  EXPECT_EQ(Count(html, "<circle class=\"config\""), 0u);
  EXPECT_EQ(Count(html, "<polyline class=\"front\""), 1u);
  EXPECT_EQ(Split(RenderCsv(report), "\r\n").size(), 2u);  // header and the empty rest
  EXPECT_NE(RenderTable(report).find("0 configs"), std::string::npos);
}

// Past 1,000 configs the page draws the baseline, every front config and an even sample of the
// others, and says so; the text table and the statistics keep every config.
TEST(ReportOutputTest, HtmlOfManyConfigsDrawsTheBaselineTheFrontAndASampleAndSaysSo) {
  std::vector<TrialRecord> trials;
  for (int i = 0; i <= 2500; ++i) {
    TrialRecord t;
    t.config = i == 0 ? json::object() : json{{"w", i}};
    t.config_key = t.config.dump();
    t.trial_id = "t" + std::to_string(i);
    t.is_baseline = i == 0;
    t.seed = 1;
    t.state = "completed";
    t.result = Result(0.8 + (i * 37 % 101) / 1000.0, 100 + (i * 53 % 89), 100);
    trials.push_back(std::move(t));
  }
  const Report report = BuildReport("exp-big", TestSpace(), trials);
  ASSERT_EQ(report.configs.size(), 2501u);
  const std::string html = RenderHtml(report);
  const size_t circles = Count(html, "<circle class=\"config\"");
  EXPECT_LE(circles, 1000u);
  EXPECT_GE(circles, 500u);  // every k-th of the others: at least half the room whatever k rounds to
  EXPECT_NE(html.find("This page draws " + std::to_string(circles) + " of the 2501 configs"), std::string::npos);
  EXPECT_EQ(Count(html, "<circle class=\"baseline\""), 1u);
  int front = 0;
  for (const ConfigSummary& c : report.configs) {
    if (!c.on_front) continue;
    ++front;
    EXPECT_NE(html.find("data-config=\"" + EscapeHtml(c.config_key) + "\""), std::string::npos) << c.config_key;
  }
  EXPECT_GT(front, 0);
  EXPECT_EQ(Count(html, "<tr data-row=") + Count(html, "<tr class=\"baseline\" data-row="), circles);
  EXPECT_NE(RenderTable(report).find("2501 configs"), std::string::npos);
  EXPECT_EQ(RenderHtml(BuildReport("exp-1", TestSpace(), TestTrials())).find("This page draws"), std::string::npos);
}

// The table's delta shows the one-sided bound that decided the verdict: the loss side for "at
// parity" and "inconclusive", the other for "worse"; for a lower-is-better metric the directions
// swap. Welch over 3 seeds each, the bound at the 95% one-sided quantile.
TEST(ReportOutputTest, TheDeltaShowsTheBoundThatDecidedTheVerdict) {
  SearchSpace space = TestSpace();
  space.objectives = {{"val_loss", false}, {"throughput", true}};
  space.parity = {"val_loss", 0.01, "welch"};
  std::vector<TrialRecord> trials;
  auto add = [&trials](const std::string& key, int64_t seed, double loss) {
    TrialRecord t;
    t.config_key = key;
    t.config = json::parse(key);
    t.trial_id = key + std::to_string(seed);
    t.is_baseline = key == "{}";
    t.seed = seed;
    t.state = "completed";
    t.result = Result(0.9, 100, 100);
    t.result["val_loss"] = loss;
    trials.push_back(std::move(t));
  };
  for (int seed = 1; seed <= 3; ++seed) {
    add("{}", seed, 0.100 + 0.001 * seed);
    add(kPatchify, seed, 0.101 + 0.001 * seed);  // +0.001 loss: at parity within 0.01
    add(kBf16, seed, 0.200 + 0.001 * seed);      // +0.1 loss: worse
  }
  const Report report = BuildReport("exp-loss", space, trials);
  const std::string table = RenderTable(report, TableOptions{true});
  for (const ConfigSummary& c : report.configs) {
    if (c.is_baseline) {
      EXPECT_FALSE(c.parity_bound);
      continue;
    }
    ASSERT_TRUE(c.parity_bound) << c.label;
    ASSERT_TRUE(c.quality_delta) << c.label;
    // Welch's one-sided 95% bounds of variant - baseline: the two-sided interval's half-width
    // scaled from the 97.5% to the 95% quantile (same df).
    const MetricSummary v = SummarizeMetric({c.label == "stem=patchify" ? 0.102 : 0.201, c.label == "stem=patchify" ? 0.103 : 0.202,
                                             c.label == "stem=patchify" ? 0.104 : 0.203});
    const MetricSummary b = SummarizeMetric({0.101, 0.102, 0.103});
    const Interval one_sided = WelchInterval(v, b, 0.95);
    if (c.parity == "at parity") {
      EXPECT_FALSE(c.parity_bound->at_least);  // lower is better: a loss is a higher delta
      EXPECT_NEAR(c.parity_bound->bound, one_sided.high, 1e-12);
      EXPECT_LT(c.parity_bound->bound, 0.01);
    } else {
      EXPECT_EQ(c.parity, "worse") << c.label;
      EXPECT_TRUE(c.parity_bound->at_least);
      EXPECT_NEAR(c.parity_bound->bound, one_sided.low, 1e-12);
      EXPECT_GT(c.parity_bound->bound, 0.01);
    }
    EXPECT_NEAR(c.parity_bound->quantile, 0.95, 1e-12);
    EXPECT_NE(table.find(FormatNumber("%+.4f", c.quality_delta->value) + (c.parity_bound->at_least ? " (\u2265" : " (\u2264") +
                         FormatNumber("%+.4f", c.parity_bound->bound) + ")"),
              std::string::npos)
        << c.label << "\n" << table;
  }
}

// The JSON as the coordinator sends it, built one config at a time, is the whole tree's dump(2),
// byte for byte: with configs (failures, intervals, nulls), with one, with none.
TEST(ReportOutputTest, RenderedJsonIsTheTreesDumpByteForByte) {
  const Report report = BuildReport("exp-1", TestSpace(), TestTrials());
  ASSERT_GE(report.configs.size(), 3u);
  EXPECT_EQ(RenderJson(report), ReportToJson(report).dump(2));
  Report one = report;
  one.configs.resize(1);
  EXPECT_EQ(RenderJson(one), ReportToJson(one).dump(2));
  const Report empty = BuildReport("empty", TestSpace(), {});
  EXPECT_EQ(RenderJson(empty), ReportToJson(empty).dump(2));
  EXPECT_NE(RenderJson(empty).find("\"configs\": []"), std::string::npos);
}

}  // namespace
}  // namespace frontier

namespace frontier {
namespace {

// Time to target from the evaluations in each result, against the baseline's
// mean final validation accuracy minus the parity margin.
TEST(TimeToTargetTest, FromEvaluationsAgainstTheBaseline) {
  SearchSpace space;
  space.name = "ttt";
  space.objectives = {{"val_accuracy", true}, {"throughput", true}};
  space.parity = {"val_accuracy", 0.01};
  auto record = [](const std::string& id, bool baseline, double final_val, json evals) {
    TrialRecord t;
    t.trial_id = id;
    t.config = baseline ? json::object() : json{{"block", "convnext"}};
    t.config_key = ConfigKey(t.config);
    t.is_baseline = baseline;
    t.state = "completed";
    t.result = {{"status", "completed"},
                {"val_accuracy", final_val},
                {"throughput", {{"samples_per_s", 100.0}}},
                {"evals", evals}};
    return t;
  };
  const json base_evals = json::array(
      {{{"val_accuracy", 0.5}, {"train_time_s", 1.0}}, {{"val_accuracy", 0.8}, {"train_time_s", 2.0}}});
  const std::vector<TrialRecord> trials = {
      record("b1", true, 0.80, base_evals),
      record("b2", true, 0.80, base_evals),
      // goal 0.79: reached at the second evaluation (1.5 s), and at the third (3.0 s); never by v3
      record("v1", false, 0.795,
             json::array({{{"val_accuracy", 0.7}, {"train_time_s", 0.7}},
                          {{"val_accuracy", 0.795}, {"train_time_s", 1.5}}})),
      record("v2", false, 0.80,
             json::array({{{"val_accuracy", 0.6}, {"train_time_s", 1.0}},
                          {{"val_accuracy", 0.7}, {"train_time_s", 2.0}},
                          {{"val_accuracy", 0.8}, {"train_time_s", 3.0}}})),
      record("v3", false, 0.70, json::array({{{"val_accuracy", 0.7}, {"train_time_s", 9.0}}})),
  };
  const Report report = BuildReport("exp-1", space, trials);
  ASSERT_TRUE(report.time_to_target_goal.has_value());
  EXPECT_DOUBLE_EQ(*report.time_to_target_goal, 0.79);
  const ConfigSummary& base = report.configs[0];
  ASSERT_TRUE(base.is_baseline);
  EXPECT_EQ(base.metrics.at("time_to_target_s").n, 2);
  EXPECT_DOUBLE_EQ(base.metrics.at("time_to_target_s").mean, 2.0);
  const ConfigSummary& variant = report.configs[1];
  EXPECT_EQ(variant.metrics.at("time_to_target_s").n, 2);  // v3 never reached it
  EXPECT_DOUBLE_EQ(variant.metrics.at("time_to_target_s").mean, 2.25);
  EXPECT_EQ(ReportToJson(report)["time_to_target_goal"], 0.79);
  EXPECT_EQ(TimeToGoal(trials[2].result, "val_loss", 0.1, true), std::nullopt);  // no such metric in evals
}

// Data-parallel spaces (docs/distributed.md): a config at 2 ranks against its
// 1-rank twin; scaling efficiency as a report column and as a constraint.
TEST(ReportTest, ScalingEfficiencyComparesEachConfigWithItsOneRankTwin) {
  SearchSpace space;
  space.dimensions = {{"runtime.ranks", {"runtime.ranks"}, {1, 2}}, {"block", {"arch.stages[*].block"}, {"basic", "convnext"}}};
  space.base = json::parse(R"({"runtime": {"ranks": 1}})");
  space.objectives = {{"val_accuracy", true}, {"throughput", true}};
  space.constraints = {{"scaling_efficiency", 0.7, std::nullopt}};
  space.parity = {"val_accuracy", 0.01};
  std::vector<TrialRecord> trials;
  // (ranks, block, throughput, per-rank throughput): basic scales at 0.8, convnext at 0.55.
  const std::vector<std::tuple<int, std::string, double, double>> runs = {
      {1, "basic", 100, 100}, {2, "basic", 160, 80}, {1, "convnext", 50, 50}, {2, "convnext", 55, 27.5}};
  for (const auto& [ranks, block, throughput, per_rank] : runs) {
    for (int seed = 1; seed <= 2; ++seed) {
      TrialRecord t;
      t.trial_id = block + std::to_string(ranks) + "-" + std::to_string(seed);
      t.config = json::object();
      if (ranks != 1) t.config["runtime.ranks"] = ranks;
      if (block != "basic") t.config["block"] = block;
      t.config_key = t.config.dump();
      t.is_baseline = ranks == 1 && block == "basic";
      t.seed = seed;
      t.state = "completed";
      t.result = {{"val_accuracy", 0.9},
                  {"ranks", ranks},
                  {"throughput", {{"samples_per_s", throughput}, {"per_rank_samples_per_s", per_rank}}},
                  {"comms_ms", ranks == 1 ? 0.0 : 3.0},
                  {"comms_exposed_share", ranks == 1 ? 0.0 : 0.25}};
      trials.push_back(t);
    }
  }
  const Report report = BuildReport("e", space, trials);
  ASSERT_EQ(report.configs.size(), 4u);
  EXPECT_TRUE(report.data_parallel);
  std::map<std::string, const ConfigSummary*> by_label;
  for (const ConfigSummary& c : report.configs) by_label[c.label] = &c;
  ASSERT_TRUE(by_label.count("ranks=2") && by_label.count("ranks=2 · convnext")) << report.configs[1].label;
  const ConfigSummary& basic2 = *by_label["ranks=2"];
  const ConfigSummary& convnext2 = *by_label["ranks=2 · convnext"];
  EXPECT_EQ(basic2.ranks, 2);
  EXPECT_DOUBLE_EQ(*basic2.scaling_efficiency, 0.8);
  EXPECT_DOUBLE_EQ(*convnext2.scaling_efficiency, 0.55);
  EXPECT_DOUBLE_EQ(*by_label["baseline"]->scaling_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(basic2.metrics.at("comms_exposed_share").mean, 0.25);
  // The constraint (scaling_efficiency >= 0.7) holds for basic at 2 ranks, not for convnext.
  EXPECT_TRUE(basic2.feasible) << basic2.infeasible_reason;
  EXPECT_FALSE(convnext2.feasible);
  EXPECT_NE(convnext2.infeasible_reason.find("scaling_efficiency mean 0.55 < min 0.7"), std::string::npos)
      << convnext2.infeasible_reason;
  const std::string csv = RenderCsv(report);
  EXPECT_NE(csv.find(",scaling_efficiency,"), std::string::npos);
  EXPECT_NE(csv.find(",2,0.8,80.0,3.0,0.25"), std::string::npos) << csv;
}

}  // namespace
}  // namespace frontier
