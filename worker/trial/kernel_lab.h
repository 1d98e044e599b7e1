// The kernel lab's two halves inside frontier-trial (docs/kernel-lab.md).
//
// The judge (`frontier-trial --op-candidate SOURCE`) evaluates one candidate
// op variant, a plugin source a person or a language model wrote: it compiles
// the source in a sandbox (worker/sandbox/sandbox.h), runs the correctness
// gate's cases in a second sandboxed process that loads the compiled plugin
// (the runner), compares every output and gradient with the op's reference
// itself, and only then times the candidate against the reference on its own
// clock, in two more sandboxed runners (lab_timing.h: the candidate's, and the
// reference's, which never loads it). The candidate never runs in the judge's
// process, and nothing it writes decides its verdict: the runners' files and
// memory are read with bounds and compared by the judge, which never loads
// the plugin; no time a runner writes is read.
//
// The runner (`frontier-trial --op-candidate-run PLUGIN`, started by the
// judge inside the sandbox) builds the spec's model and records its op calls
// before it loads the plugin, finds the one variant the plugin registered,
// and runs the gate's cases (writing their results to its folder) or serves
// the judge's timed calls (--serve-timing; --reference: never loading it).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

namespace frontier {

// What the judge is asked to do.
struct CandidateOptions {
  std::string source;     // the candidate: a .cc/.cpp (a plugin) or .cu file, UTF-8, at most kMaxCandidateBytes
  std::string op;         // the op it is a variant of ("attention_kernel", "bev_pool", a plugin's op)
  std::string spec_path;  // a trial spec whose model calls the op: the shapes (and dtype) the candidate is judged at
  std::string workdir;    // the candidate's private folder: created if missing, must not hold an earlier verdict
  int draws = 3;          // fresh random draws per call (the gate's other cases come on top)
  uint64_t seed = 0;      // the gate's seed; 0: drawn from the operating system
  int rounds = 15;        // timed rounds (each runs the reference and the candidate once)
  double compile_seconds = 180;  // the compiler's wall-time limit
  double run_seconds = 120;      // each runner's wall-time limit (CPU time: the same, per thread)
  int64_t memory_mb = 6144;      // each sandboxed process's address-space limit
  std::string self;              // this frontier-trial (the runner); empty: /proc/self/exe
};

inline constexpr int64_t kMaxCandidateBytes = 256 * 1024;

// Judges one candidate; never throws for anything the candidate does (nor
// for a spec that cannot be read: that is a verdict too). Returns the
// verdict, also written to WORKDIR/verdict.json:
// {"event": "op_candidate", "schema": 1, "op", "source", "variant",
//  "outcome": "timed" | "compile_error" | "incorrect" | "crashed" |
//             "timed_out" | "refused",
//  "reason" (a sentence, every outcome but timed), "compile": {"command",
//  "seconds", "log"}, "gate": VariantCheck's JSON (correctness.h) for every
//  recorded call, "timing": {"speedup": {median, low, high, rounds},
//  "forward_backward_ms", "reference_forward_backward_ms", "peak_mb",
//  "reference_peak_mb", "bandwidth_share", ...}, "plugin" (the compiled
//  library), "torch_version", "compiler", "flags", "sandbox": {"isolation"}}.
nlohmann::json JudgeCandidate(const CandidateOptions& options);

// The runner: what the judge starts inside the sandbox.
struct CandidateRunOptions {
  std::string plugin;     // the compiled candidate
  std::string op;
  std::string spec_path;
  std::string out;  // its folder: runs.json + runs.bin, or the judge's FIFOs (serve)
  int draws = 3;
  uint64_t seed = 1;
  bool serve = false;      // serve the judge's timed calls (lab_timing.h) instead of running the gate's cases
  bool reference = false;  // never load the plugin: the op's reference (the judge's reference runner)
};

// Exit status of the runner when the plugin does not load as a plugin (its
// registration throws, a name is taken), or registers no variant of the op
// or more than one (the judge's outcome: refused).
inline constexpr int kExitNotAVariant = 5;

// Runs the runner; returns its exit status (0, kExitNotAVariant, or 2 with
// the problem on `err`).
int RunCandidate(const CandidateRunOptions& options, std::ostream& err);

// What a person or a model needs to write a variant of `op`: {"op",
// "contract", "reference_source", "example_candidate", "gate_rules",
// "compiler"}. Throws std::invalid_argument for an unknown op.
nlohmann::json OpContract(const std::string& op);

}  // namespace frontier
