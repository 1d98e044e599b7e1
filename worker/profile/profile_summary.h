// Where a profile's time goes, from its recorded operator calls: calls
// nested by their intervals, self times, operator classes, small calls
// counted as overhead, shares by class and bound, the operator table and a
// Chrome trace (docs/profiling.md). Torch-free: frontier-trial's profiler
// (LibTorch, worker/trial/measure/profiler.h) and the worker, for a command
// trial's recording by the Python SDK (profile_recording.h), summarize with
// this one code, so both get the same classes, shares and verdict rules.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace frontier {

// One operator call as a profiler recorded it.
struct ProfiledCall {
  std::string name;  // e.g. "aten::addmm"
  uint64_t thread = 0;
  double start_us = 0, end_us = 0;  // the profiler's clock, microseconds
  double cpu_us = -1;               // CPU time of its thread between start and end; -1: not recorded
  double cuda_us = -1;              // CUDA time between its start and end events; -1: not recorded
  int64_t bytes = -1;               // bytes of its tensor inputs and outputs; -1: not recorded
  std::string dtype;                // the first floating-point tensor's, e.g. "BFloat16"; "" when unknown
  std::vector<std::vector<int64_t>> shapes;  // input shapes ([] for a scalar or non-tensor argument)
  int64_t estimated_flops = 0;      // FLOPs estimated from this call's shapes (a convolution backward)
  std::string estimated_flops_source;
};

// One profiled step: its interval on the profiler's clock.
struct ProfiledStep {
  int step = 0;  // 0-based step index
  double start_us = 0, end_us = 0;
  double thread_cpu_us = -1;  // the training thread's CPU time in the step; -1: not recorded
};

// What the shares are of (docs/profiling.md, the time basis).
enum class TimeBasis {
  kThreadCpu,  // the training thread's CPU time (every call's cpu_us and every step's thread_cpu_us)
  kWall,       // the profiled steps' wall time (a profiler that records no per-call CPU time)
  kCuda,       // the profiled steps' wall time, by the operators' CUDA time
};

// A profile as recorded, before it is summarized.
struct ProfileRecording {
  std::string tool = "libtorch";
  std::string profiler;  // says which, e.g. "LibTorch 1.13.0 legacy autograd profiler"
  std::string process = "frontier-trial";  // names the trace's process, with the trial id
  std::string host, trial_id;
  int pid = 0;
  int first = 0, count = 0;  // the spec's window: steps [first, first + count)
  TimeBasis basis = TimeBasis::kThreadCpu;
  std::vector<ProfiledStep> steps;  // in order
  std::vector<ProfiledCall> calls;  // any order; calls that start outside every step are dropped
  std::map<std::string, int64_t> flops_by_op;  // FLOPs a FLOP counter charged in the steps, by operator
  std::string error;                           // a problem while recording; kept in the summary
};

struct ProfileSummary {
  nlohmann::json profile;    // the result's "profile" object (docs/profiling.md)
  nlohmann::json operators;  // operators.json: {trial_id, steps, operators: every row}
  std::string trace;  // trace.json's text: a Chrome trace (Perfetto opens it); empty without recorded steps
};

ProfileSummary SummarizeProfile(const ProfileRecording& recording);

// Whether `call` is one of the recorded steps' calls: it finished, and it
// started inside a step (not between two profiled steps: logging, evaluation).
// The summary and the kernel-lab calls (lab_calls.h) look at these only.
bool InRecordedSteps(const ProfileRecording& recording, const ProfiledCall& call);

// Writes the trace and the operator table as trace.json and operators.json
// into `dir` (created when needed) and records "artifact_dir", "trace" and
// "operators_file" in summary->profile, or "error" when they cannot be
// written (the summary itself stays).
void WriteProfileArtifacts(const std::filesystem::path& dir, ProfileSummary* summary);

}  // namespace frontier
