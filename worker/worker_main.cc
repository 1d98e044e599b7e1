// frontier-worker: the long-running agent for one machine's devices. Parses
// flags into WorkerFlags; RunWorker (worker/agent/worker_command.h) checks
// them and runs the agent. See docs/worker.md.
#include <CLI/CLI.hpp>

#include "worker/agent/worker_command.h"
#include "worker/flags.h"

int main(int argc, char** argv) {
  namespace help = frontier::worker_help;
  frontier::WorkerFlags f;
  CLI::App app("frontier-worker: leases trials from a coordinator and runs each in a frontier-trial process",
               "frontier-worker");
  app.footer(help::kExitStatus);
  app.add_option("--coordinator", f.coordinator, help::kCoordinator)->option_text("HOST:PORT");
  app.add_option("--slots", f.slots, help::kSlots)->option_text("N");
  app.add_option("--device", f.device, help::kDevice)->option_text("cpu|cuda");
  app.add_option("--trial-binary", f.trial_binary, help::kTrialBinary)->option_text("PATH");
  app.add_option("--trial-timeout", f.trial_timeout_s, help::kTrialTimeout)->option_text("SECONDS");
  auto* threads = app.add_option("--threads-per-trial", f.threads_per_trial, help::kThreadsPerTrial);
  threads->option_text("N");
  app.add_option("--progress-every", f.progress_every, help::kProgressEvery)->option_text("N");
  app.add_option("--work-dir", f.work_dir, help::kWorkDir)->option_text("DIR");
  app.add_option("--artifact-dir", f.artifact_dir, help::kArtifactDir)
      ->option_text("DIR")
      ->check(frontier::NonEmptyFolder());
  app.add_option("--max-trials", f.max_trials, help::kMaxTrials)->option_text("N");
  app.add_option("--drain-timeout", f.drain_timeout_s, help::kDrainTimeout)->option_text("SECONDS");
  app.add_option("--name", f.name, help::kName)->option_text("NAME");
  app.add_option("--token-file", f.token_file, help::kTokenFile)->option_text("FILE");
  app.add_option("--tls-ca", f.tls_ca, help::kTlsCa)->option_text("FILE");
  app.add_option("--tls-cert", f.tls_cert, help::kTlsCert)->option_text("FILE");
  app.add_option("--tls-key", f.tls_key, help::kTlsKey)->option_text("FILE");
  auto* metrics = app.add_option("--metrics-listen", f.metrics_listen, help::kMetricsListen);
  metrics->option_text("HOST:PORT");
  app.add_option("--cpus", f.cpus, help::kCpus)->option_text("LIST");
  app.add_option("--memory-limit-mb", f.memory_limit_mb, help::kMemoryLimitMb)->option_text("N");
  bool no_calibrate = false;
  app.add_flag("--no-calibrate", no_calibrate, help::kNoCalibrate);
  app.add_flag("--cold-trials", f.cold_trials, help::kColdTrials);
  app.add_option("--host-lock", f.host_lock, help::kHostLock)->option_text("FILE");
  app.add_option("--rank-launcher", f.rank_launcher, help::kRankLauncher)->option_text("local|srun");
  app.add_option("--rendezvous-host", f.rendezvous_host, help::kRendezvousHost)->option_text("HOST");
  if (const auto exit = frontier::ParseFlags(app, argc, argv)) return *exit;
  f.threads_per_trial_given = threads->count() > 0;
  f.calibrate = !no_calibrate;
  f.metrics_listen_given = metrics->count() > 0;
  return frontier::RunWorker(f, app.help());
}
