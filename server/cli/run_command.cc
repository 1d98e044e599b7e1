#include "server/cli/run_command.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "metrics/endpoint.h"
#include "server/cli/cli.h"
#include "server/cli/client.h"
#include "server/cli/commands.h"
#include "server/cli/local_cluster.h"
#include "server/cli/output.h"
#include "server/rpc/coordinator_process.h"

namespace frontier {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_interrupted{false};

// Submits the space of `o` and prints what was created; sets `id`. Returns the exit code of a failure, else
// kCliOk.
int SubmitSpace(Client& client, const RunOptions& o, std::string& id) {
  const std::optional<std::string> space = ReadSpaceFile(o.space);
  if (!space) return kCliInvalid;
  v1::SubmitExperimentRequest req;
  req.set_space_yaml(*space);
  req.set_source_name(o.space);
  v1::SubmitExperimentResponse resp;
  const grpc::Status s = client.SubmitExperiment(req, &resp);
  if (!s.ok()) return client.Failure(s, "submit " + o.space);
  id = resp.experiment().id();
  std::cout << "experiment " << id << " '" << resp.experiment().name()
            << "': " << resp.experiment().counts().total() << " trials";
  if (resp.experiment().skipped_size() > 0) {
    std::cout << ", " << resp.experiment().skipped_size() << " incompatible combinations skipped";
  }
  std::cout << "\n";
  for (const auto& skipped : resp.experiment().skipped()) std::cout << "  skipped " << skipped << "\n";
  return kCliOk;
}

// The artifact store of the store `db`: ARTIFACTS beside it, where the read
// commands' --db looks (experiment_source.h).
fs::path ArtifactsBeside(const std::string& db) { return fs::absolute(fs::path(db)).parent_path() / "artifacts"; }

// Prints the report in o.output and writes the HTML one, linking the artifacts beside `db`.
int PrintReports(Client& client, const RunOptions& o, const std::string& id, const std::string& db) {
  for (const std::string& format : {o.output, std::string("html")}) {
    const std::string html = o.html.empty() ? (fs::path(o.runs_dir) / (id + ".html")).string() : o.html;
    v1::GetReportRequest req;
    req.set_experiment_id(id);
    req.set_format(format);
    if (format == "html") {
      req.set_artifacts_href(ArtifactsBeside(db).lexically_relative(fs::absolute(html).parent_path()).generic_string());
    }
    v1::GetReportResponse resp;
    const grpc::Status s = client.stub().GetReport(client.Context().get(), req, &resp);
    if (!s.ok()) return client.Failure(s, "report of " + id);
    if (format == "html") {
      std::ofstream(html) << resp.content();
      std::cout << "HTML report: " << html << "\n";
    } else {
      std::cout << resp.content() << "\n";
    }
  }
  return kCliOk;
}

// kCliOk, or kCliUsage with the reason on standard error.
int CheckRunOptions(const RunOptions& o) {
  const char* problem = nullptr;
  if (o.space.empty() == o.resume.empty()) {
    problem = "give a search-space file, or --resume EXPERIMENT (with --db)";
  } else if (o.memory_limit_mb < 0) {
    problem = "--memory-limit-mb takes a whole number of MiB >= 0";
  } else if (o.workers < 1 || o.slots < 1) {
    problem = "--workers and --slots must be at least 1";
  } else if (o.device == DeviceKind::kCuda && o.workers != 1) {
    problem = "with --device cuda one worker drives the GPUs: give --slots N (one per GPU), not --workers";
  }
  if (problem == nullptr) return kCliOk;
  std::cerr << "frontier run: " << problem << "\n";
  return kCliUsage;
}

// "[ID] 3/10 done, 2 running, 0 failed, 0 diverged  elapsed 1m02s  ETA 2m10s".
std::string ProgressLine(const std::string& id, const v1::Experiment& e, double elapsed, int done_at_start) {
  const auto& c = e.counts();
  const int done_now = Finished(c) - done_at_start;
  std::ostringstream line;
  line << "[" << id << "] " << Finished(c) << "/" << c.total() << " done, " << c.running() << " running, "
       << c.failed() << " failed, " << c.diverged() << " diverged  elapsed " << Duration(elapsed);
  if (!e.paused().empty()) line << "  paused: " << e.paused();
  if (done_now > 0 && c.total() > Finished(c)) {
    line << "  ETA " << Duration(elapsed / done_now * (c.total() - Finished(c)));
  }
  return line.str();
}

}  // namespace

int Run(const RunOptions& o) {
  if (const int code = CheckRunOptions(o); code != kCliOk) return code;
  fs::create_directories(o.runs_dir);
  std::string db = o.db;
  if (db.empty()) db = (fs::path(o.runs_dir) / "frontier.db").string();
  CoordinatorOptions co;
  co.listen = "127.0.0.1:0";
  co.scheduler.lease_timeout_ms = 60'000;
  co.scheduler.heartbeat_interval_ms = 5'000;
  co.scheduler.restart_grace_ms = 0;  // embedded: no worker of an earlier run can still hold a lease
  co.artifacts_dir = ArtifactsBeside(db).string();
  spdlog::set_level(spdlog::level::warn);
  CoordinatorProcess process(db, co);
  Coordinator& coordinator = process.coordinator();
  // Trials an interrupted earlier run left running are re-queued now.
  process.store().ExpireLeases(std::numeric_limits<int64_t>::max());
  const std::string address = "127.0.0.1:" + std::to_string(coordinator.Start());
  std::string workers_metrics = "0";
  if (!MetricsDisabled(o.metrics_listen)) {
    coordinator.ServeMetrics(o.metrics_listen);
    workers_metrics = o.metrics_listen.substr(0, o.metrics_listen.rfind(':')) + ":0";
  }
  Client client(address, ClientSecurity{});

  std::string id = o.resume;
  if (id.empty()) {
    if (const int code = SubmitSpace(client, o, id); code != kCliOk) return code;
  }
  std::cout << "store " << db << ", coordinator " << address << ", " << o.workers << " local workers"
            << (o.slots > 1 || o.device != DeviceKind::kCpu ? " of " + std::to_string(o.slots) + " " + NameOf(o.device) + " slots" : "")
            << " (logs in " << (fs::path(o.runs_dir) / id).string() << ")\n";
  if (!coordinator.metrics_url().empty()) {
    std::cout << "metrics: coordinator " << coordinator.metrics_url()
              << ", each worker's /metrics address is in its log\n";
  }

  LocalWorkers workers;
  workers.Start(LocalWorkerOptions{o.workers, o.slots, o.device, o.memory_limit_mb}, address, fs::path(o.runs_dir) / id,
                workers_metrics);
  struct sigaction sa = {};
  sa.sa_handler = [](int) { g_interrupted = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // the terminal closed: stop the workers as on Ctrl-C

  const bool tty = isatty(STDOUT_FILENO);
  const auto start = std::chrono::steady_clock::now();
  int done_at_start = -1;
  std::string last_line;
  auto last_print = start - std::chrono::hours(1);
  v1::Experiment e;
  while (true) {
    v1::GetExperimentRequest req;
    req.set_experiment_id(id);
    const grpc::Status s = client.stub().GetExperiment(client.Context().get(), req, &e);
    if (!s.ok()) return client.Failure(s, "experiment " + id);
    if (done_at_start < 0) done_at_start = Finished(e.counts());
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string line = ProgressLine(id, e, elapsed, done_at_start);
    const auto now = std::chrono::steady_clock::now();
    if (tty) {
      std::cout << "\r" << line << "\033[K" << std::flush;
    } else if (line != last_line && now - last_print > std::chrono::seconds(10)) {
      std::cout << line << "\n" << std::flush;
      last_print = now;
    }
    last_line = line;
    if (e.state() != v1::EXPERIMENT_RUNNING) break;
    if (g_interrupted) {
      std::cout << "\ninterrupted: stopping workers; finished trials are kept in " << db << "\n";
      workers.Stop(std::chrono::seconds(3));
      coordinator.Shutdown();
      std::cout << "resume with: frontier run --resume " << id << " --db " << db << "\n";
      return kCliInterrupted;
    }
    if (workers.Exited() == o.workers) {
      std::cout << "\nfrontier run: every local worker exited; see their logs in "
                << (fs::path(o.runs_dir) / id).string() << "\n";
      coordinator.Shutdown();
      return kCliFailed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::cout << (tty ? "\n" : "") << last_line << "\n";
  workers.Stop(std::chrono::seconds(10));
  if (const int code = PrintReports(client, o, id, db); code != kCliOk) return code;
  coordinator.Shutdown();
  return e.state() == v1::EXPERIMENT_COMPLETED ? kCliOk : kCliFailed;
}

}  // namespace frontier
