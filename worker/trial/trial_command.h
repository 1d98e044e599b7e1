// frontier-trial's command (trial_main.cc parses its flags with CLI11): reads
// one trial spec, runs it and prints JSON lines: the events, then one result
// (docs/trial-output.md). Torch-free header.
#pragma once

#include <iosfwd>
#include <string>

#include "worker/trial/trainer.h"

namespace frontier {

// The help text of each flag, as frontier-trial --help prints it.
namespace trial_help {
inline constexpr const char* kSpec = "trial spec (JSON, docs/trial-spec.md); '-' reads standard input";
inline constexpr const char* kProgressEvery = "a progress event every N steps (default 10, 0 = none)";
inline constexpr const char* kArtifactDir =
    "profiles (the spec's `profile` section) go to DIR/<trial_id>/ (default ./artifacts; docs/profiling.md)";
inline constexpr const char* kExitStatus = "exit status: 0 completed, 2 failed, 3 diverged, 64 usage error";
}  // namespace trial_help

// Runs the spec at `spec_path` ("-": read from `in`) with `options` (its emit
// is replaced by printing to `out`), prints the result to `out` and the
// error of a failed or diverged trial to `err`. An invalid spec gives a
// failed result naming the field. Returns the exit code (TrialExit).
int RunTrialSpec(const std::string& spec_path, TrialOptions options, std::istream& in, std::ostream& out,
                 std::ostream& err);

}  // namespace frontier
