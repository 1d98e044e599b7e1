// The kernel lab's timing on the judge's clock (docs/kernel-lab.md#the-judges-clock).
//
// Two sandboxed runners serve timed calls of the op: the candidate's, which
// loads the candidate, and the reference's, which never does. The judge times
// every window of calls itself. With the runner stopped (SIGSTOP) it writes
// the window's inputs into the runner's memory; then it starts its clock,
// continues the runner, tells it to run, and stops the clock once the runner
// has answered and is stopped again; then it reads what the calls returned
// from the runner's memory. So the candidate's process never runs while the
// reference is timed, never sees a window's inputs before the clock runs, and
// cannot change what it returned once the clock has stopped; nothing it writes
// is taken for a time. Each window holds enough calls (each on inputs of its
// own) that the clock's own cost is small beside them.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/sandbox/sandbox.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/ops/correctness.h"
#include "worker/trial/ops/op.h"

namespace frontier::lab {

// The runner's half (frontier-trial --op-candidate-run ... --serve-timing). Opens the
// FIFOs the judge made in `folder` (commands, replies): made before the
// candidate is loaded, so the runner holds them whatever the candidate does
// with the folder's names.
class TimedCallServer {
 public:
  explicit TimedCallServer(const std::string& folder);  // throws when the FIFOs cannot be opened
  TimedCallServer(const TimedCallServer&) = delete;
  TimedCallServer& operator=(const TimedCallServer&) = delete;
  ~TimedCallServer();
  // Answers the judge's commands with `variant` of `call` until told to quit
  // (returns) or the judge is gone (throws). `upstream_seed`: the output
  // gradient every forward+backward uses (ops::UpstreamGradient).
  void Serve(const ops::OpCall& call, const std::string& variant, const DeviceInfo& dev,
             uint64_t upstream_seed);

 private:
  nlohmann::json Next();
  void Reply(const nlohmann::json& reply);
  int commands_ = -1, replies_ = -1;
  std::string pending_;
};

// What the judge's clock gave.
struct ClockedTiming {
  // {"clock": "judge", "calls_per_window", "clock_overhead_ms", "speedup",
  // "speedup_forward", "forward_ms", "forward_backward_ms",
  // "reference_forward_ms", "reference_forward_backward_ms", "shapes",
  // "peak_mb" (the candidate's runner's own count), "reference_peak_mb",
  // "bytes_moved_mb", "achieved_gb_s", "bandwidth_share"}; null when the
  // timing did not finish.
  nlohmann::json timing;
  // The candidate's timed calls (forward+backward, then forward only) and
  // the cases they ran, for the judge to compare with the reference.
  std::vector<ops::GateCase> cases, forward_cases;
  std::vector<ops::CaseRun> runs, forward_runs;
  sandbox::Outcome candidate, reference;  // how each runner ended
  // The candidate's runner broke the protocol (a reply that is not one, a
  // tensor that cannot be read): its verdict is refused. Empty otherwise.
  std::string problem;
  // The rounds ran past the runners' wall time (all of them together): why.
  std::string timed_out;
  // The reference's runner failed: not the candidate's doing (the judge
  // cannot time). Empty otherwise.
  std::string judge_problem;
};

// Times `variant` of `call` against the op's reference over `rounds` rounds
// (each a forward-only and a forward+backward window in both runners, in
// rotating order; each window's inputs drawn from a seed of the operating
// system's, the same for both runners). `reference` and `candidate` start the
// runners (argv with --serve-timing and --seed `upstream_seed`; each folder
// must exist and is where the FIFOs are made); single_process and on_start
// are set here.
ClockedTiming ClockTiming(const ops::OpCall& call, const std::string& variant, const DeviceInfo& dev,
                          sandbox::Options reference, sandbox::Options candidate, int rounds,
                          uint64_t upstream_seed);

}  // namespace frontier::lab
