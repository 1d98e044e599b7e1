// Test helpers shared by the suites that drive the stores and the CLI: a
// tiny search space (a baseline and one variant, one seed each) and
// `frontier ARGS...` run in-process with its output captured.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/cli/cli.h"

namespace frontier::testing {

// Two configurations of a 4-step synthetic task, one seed each: 2 trials.
inline constexpr const char* kTwoConfigSpace = R"(
name: tiny
task: {dataset: synthetic, input: {channels: 1, height: 8, width: 8, classes: 3},
       batch_size: 8, steps: 4, warmup_steps: 1, eval_every: 0}
baseline:
  arch: {stem: {kind: conv3x3, width: 8, stride: 1}, stages: [{block: basic, width: 8, depth: 1}]}
  runtime: {threads: 1}
space:
  stages[*].block: [basic, mbconv]
objectives: [{metric: val_accuracy, goal: maximize}, {metric: throughput, goal: maximize}]
repeats: 1
)";

// `frontier ARGS...` (RunCli): its exit code; stdout into *out, stderr into *err.
inline int RunFrontier(std::vector<std::string> args, std::string* out, std::string* err) {
  args.insert(args.begin(), "frontier");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = RunCli(static_cast<int>(argv.size()), argv.data());
  *out = ::testing::internal::GetCapturedStdout();
  *err = ::testing::internal::GetCapturedStderr();
  return code;
}

}  // namespace frontier::testing
