// frontier-trial: runs exactly one trial and prints JSON lines (progress
// events, then one result). Parses flags; RunTrialSpec
// (worker/trial/trial_command.h) does the rest. See docs/trial-output.md.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "worker/flags.h"
#include "worker/host.h"
#include "worker/trial/trial_command.h"

int main(int argc, char** argv) {
  frontier::UseTheCpusBlasKernels(argv);  // before any GEMM: OpenBLAS reads its setting when loaded
  namespace help = frontier::trial_help;
  std::string spec_path;
  frontier::TrialOptions options;
  CLI::App app("frontier-trial: runs one trial and prints JSON lines", "frontier-trial");
  app.footer(help::kExitStatus);
  frontier::CalibrationRequest calibrate;
  frontier::LabCommand lab;
  frontier::AddLabFlags(app, lab);
  bool calibrating = false, op_bench = false, serving = false;
  int rounds = 15;
  app.add_option("--spec", spec_path, help::kSpec)->option_text("FILE");
  app.add_option("--peak-flops", options.peak_flops_json, help::kPeakFlops)
      ->option_text("JSON")
      ->envname("FRONTIER_PEAK_FLOPS");
  app.add_flag("--calibrate", calibrating, help::kCalibrate);
  app.add_flag("--op-bench", op_bench, help::kOpBench);
  app.add_flag("--serve", serving, help::kServe);
  app.add_option("--rounds", rounds, help::kRounds)->option_text("N")->check(frontier::AtLeast(1));
  app.add_option("--device", calibrate.device, help::kDevice)->option_text("cpu|cuda");
  app.add_option("--threads", calibrate.threads, help::kThreads)
      ->option_text("N")
      ->check(frontier::AtLeast(1));
  app.add_option("--dtypes", calibrate.dtypes, help::kDtypes)->option_text("LIST")->delimiter(',');
  app.add_option("--progress-every", options.progress_every, help::kProgressEvery)
      ->option_text("N")
      ->check(frontier::AtLeast(0));
  app.add_option("--artifact-dir", options.artifact_dir, help::kArtifactDir)
      ->option_text("DIR")
      ->check(frontier::NonEmptyFolder());
  if (const auto exit = frontier::ParseFlags(app, argc, argv)) return *exit;
  if (serving) return frontier::ServeTrials(std::cerr);
  if (calibrating) return frontier::RunCalibration(calibrate, std::cout, std::cerr);
  if (lab.active()) return frontier::RunLabCommand(lab, spec_path, rounds, std::cout, std::cerr);
  if (spec_path.empty()) return frontier::PrintUsageError("frontier-trial", "--spec is required", app.help());
  if (op_bench) return frontier::RunOpBenchSpec(spec_path, rounds, std::cin, std::cout, std::cerr);
  return frontier::RunTrialSpec(spec_path, options, std::cin, std::cout, std::cerr);
}
