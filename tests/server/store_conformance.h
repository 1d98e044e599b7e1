// The Store conformance suite: every Store implementation must pass it.
// Instantiate with INSTANTIATE_TEST_SUITE_P(Name, StoreConformanceTest, Values(factory)).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "server/store/store.h"

namespace frontier {

using StoreFactory = std::function<std::unique_ptr<Store>()>;

class StoreConformanceTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override { store_ = GetParam()(); }

  static TrialRow Trial(int seed, int max_attempts = 3) {
    TrialRow t;
    t.config_json = seed == 1 ? "{}" : R"({"stem":"patchify"})";
    t.is_baseline = seed == 1;
    t.seed = seed;
    t.steps = 100;
    t.max_attempts = max_attempts;
    t.spec_json = R"({"schema":1,"seed":)" + std::to_string(seed) + "}";
    return t;
  }

  std::string NewExperiment(int trials, int max_attempts = 3) {
    ExperimentRecord e;
    e.name = "x";
    e.space_yaml = "name: x";
    e.source_name = "x.yaml";
    e.skipped = {"{\"a\":1}: reason"};
    std::vector<TrialRow> rows;
    for (int i = 1; i <= trials; ++i) rows.push_back(Trial(i, max_attempts));
    return store_->CreateExperiment(e, rows, 1000);
  }

  // A kernel-lab run named `name` of the op attention_kernel (CreateOpRun's input).
  static OpRunRecord OpRun(const std::string& name, int64_t created_ms = 1000) {
    OpRunRecord r;
    r.name = name;
    r.op = "attention_kernel";
    r.spec_json = R"({"rounds":2,"target":1.5,"shapes":"model"})";
    r.owner = "alice";
    r.created_ms = created_ms;
    return r;
  }

  // A timed folder candidate `name` of `run_id` whose source (and hash) is `source`'s.
  static OpCandidateRow OpCandidate(const std::string& run_id, const std::string& name,
                                    const std::string& source) {
    OpCandidateRow c;
    c.run_id = run_id;
    c.candidate = name;
    c.source_kind = "folder";
    c.source_hash = "sha-of-" + source;
    c.source = source;
    c.outcome = "timed";
    c.speedup = 1.25;
    c.speedup_low = 1.125;
    c.speedup_high = 1.375;
    c.result_json = R"({"outcome":"timed"})";
    c.created_ms = 2000;
    return c;
  }

  std::unique_ptr<Store> store_;
};

}  // namespace frontier
