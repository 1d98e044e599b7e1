// frontier-trial's command (trial_main.cc parses its flags with CLI11): reads
// one trial spec, runs it and prints JSON lines: the events, then one result
// (docs/trial-output.md). Torch-free header.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "worker/trial/trainer.h"
#include "worker/warm_slot.h"

namespace CLI {
class App;
}

namespace frontier {

// The help text of each flag, as frontier-trial --help prints it.
namespace trial_help {
inline constexpr const char* kSpec = "trial spec (JSON, docs/trial-spec.md); '-' reads standard input";
inline constexpr const char* kProgressEvery = "a progress event every N steps (default 10, 0 = none)";
inline constexpr const char* kArtifactDir =
    "profiles (the spec's `profile` section) go to DIR/<trial_id>/ (default ./artifacts; docs/profiling.md)";
inline constexpr const char* kPeakFlops =
    "the worker's calibrated peaks as JSON (docs/trial-protocol.md; default $FRONTIER_PEAK_FLOPS)";
inline constexpr const char* kCalibrate =
    "measure this device's peak FLOP/s (timed square GEMMs) and print one JSON line instead of running a trial";
inline constexpr const char* kDevice = "with --calibrate: cpu or cuda (default cpu)";
inline constexpr const char* kThreads = "with --calibrate: intra-op threads on the CPU (default: all usable cores)";
inline constexpr const char* kDtypes = "with --calibrate: comma-separated precisions (default fp32,bf16)";
inline constexpr const char* kOpBench =
    "instead of training: time every variant of each op the spec's model calls, at its shapes, and print one JSON "
    "line (docs/plugins.md#the-op-benchmark)";
inline constexpr const char* kServe =
    "the warm slot's server: forks each trial frontier-worker sends on standard input (not for people)";
inline constexpr const char* kRounds = "with --op-bench: timed rounds (default 15)";
inline constexpr const char* kExitStatus =
    "exit status: 0 completed (or calibrated), 2 failed, 3 diverged, 64 usage error";
inline constexpr const char* kOpCandidate =
    "instead of training: judge one kernel-lab candidate (a plugin source) for --op at the shapes of --spec's "
    "model: compiled and run in a sandbox, gated, timed; one JSON line (docs/kernel-lab.md)";
inline constexpr const char* kOpCandidateRun =
    "the kernel lab's sandboxed runner (started by --op-candidate; not for people)";
inline constexpr const char* kOpContract =
    "print what a variant of op OP must do (its contract, the reference's source, an example, the gate's rules)";
inline constexpr const char* kOp = "with --op-candidate: the op the candidate is a variant of";
inline constexpr const char* kWorkdir = "with --op-candidate: the candidate's private folder (created)";
inline constexpr const char* kDraws = "with --op-candidate: fresh random draws per call (default 3)";
inline constexpr const char* kRunTimeout =
    "with --op-candidate: each sandboxed run's wall-time limit in seconds (default 120)";
inline constexpr const char* kSeed = "with --op-candidate: the gate's seed (default: fresh from the system)";
}  // namespace trial_help

// Runs the spec at `spec_path` ("-": read from `in`) with `options` (its emit
// is replaced by printing to `out`), prints the result to `out` and the
// error of a failed or diverged trial to `err`. An invalid spec gives a
// failed result naming the field. Returns the exit code (TrialExit).
int RunTrialSpec(const std::string& spec_path, TrialOptions options, std::istream& in, std::ostream& out,
                 std::ostream& err);

// frontier-trial --serve: the warm slot's server (worker/warm_slot.h,
// docs/worker.md#warm-slots). Standard input is the worker's socket; says it is
// ready, then forks a fresh child for each trial the worker sends (adopted by
// the worker, which supervises it), answering with its pid. Runs no trial
// itself and touches no tensor, so every child starts from the same state.
// Returns when the worker closes the socket.
int ServeTrials(std::ostream& err);

// frontier-trial --op-bench: RunOpBench (op_bench.h) on the spec at
// `spec_path` ("-": `in`), its JSON line on `out`. Returns 0, or kExitFailed
// with the problem on `err` (an invalid spec, a plugin that does not load).
int RunOpBenchSpec(const std::string& spec_path, int rounds, std::istream& in, std::ostream& out, std::ostream& err);

// frontier-trial's kernel-lab modes (kernel_lab.h).
struct LabCommand {
  std::string candidate;      // --op-candidate SOURCE: judge it
  std::string candidate_run;  // --op-candidate-run PLUGIN: the sandboxed runner
  std::string contract;       // --op-contract OP
  std::string op, workdir, out;
  int draws = 3;
  uint64_t seed = 0;
  bool serve = false;        // the runner serves the judge's timed calls (lab_timing.h)
  bool reference = false;    // ... of the op's reference, never loading the plugin
  double run_seconds = 120;  // --run-timeout: each sandboxed run's wall-time limit
  bool active() const { return !candidate.empty() || !candidate_run.empty() || !contract.empty(); }
};
void AddLabFlags(CLI::App& app, LabCommand& lab);

// Runs the mode `lab` names with the spec at `spec_path` and `rounds` timed
// rounds: the judge prints its verdict line on `out` (exit 0 whatever the
// verdict; 64 for a usage error), the contract prints one JSON line.
int RunLabCommand(const LabCommand& lab, const std::string& spec_path, int rounds, std::ostream& out,
                  std::ostream& err);

// Prints the calibration line (device.h Calibrate) to `out`: GEMMs of
// 512..2048 on the CPU, 512..8192 on CUDA, at least 3 repetitions and 0.5 s
// per size. Returns 0, or kExitUsage with the problem on `err` (an unknown
// device or dtype). The request is frontier-trial --calibrate's flags, or a
// warm slot's calibration (worker/warm_slot.h).
int RunCalibration(const CalibrationRequest& options, std::ostream& out, std::ostream& err);

}  // namespace frontier
