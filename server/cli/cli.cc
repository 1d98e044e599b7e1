#include "server/cli/cli.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "frontier/v1/frontier.grpc.pb.h"
#include "metrics/endpoint.h"
#include "server/rpc/coordinator.h"

namespace frontier {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::frontier::v1;
using nlohmann::json;

std::atomic<bool> g_interrupted{false};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* StateName(v1::TrialState s) {
  switch (s) {
    case v1::TRIAL_PENDING: return "pending";
    case v1::TRIAL_RUNNING: return "running";
    case v1::TRIAL_COMPLETED: return "completed";
    case v1::TRIAL_FAILED: return "failed";
    case v1::TRIAL_DIVERGED: return "diverged";
    case v1::TRIAL_STOPPED: return "stopped";
    case v1::TRIAL_CANCELLED: return "cancelled";
    default: return "unknown";
  }
}

const char* ExperimentStateName(v1::ExperimentState s) {
  switch (s) {
    case v1::EXPERIMENT_RUNNING: return "running";
    case v1::EXPERIMENT_COMPLETED: return "completed";
    case v1::EXPERIMENT_CANCELLED: return "cancelled";
    default: return "unknown";
  }
}

int Finished(const v1::TrialCounts& c) {
  return c.completed() + c.failed() + c.diverged() + c.stopped() + c.cancelled();
}

std::string Duration(double seconds) {
  char buf[32];
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, (s / 60) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  }
  return buf;
}

// One gRPC connection to a coordinator; every call has a deadline, and a
// failed call becomes a message on stderr and an exit code.
class Client {
 public:
  Client(const std::string& address, const ClientSecurity& security)
      : address_(address),
        channel_(MakeClientChannel(address, security)),
        stub_(v1::ExperimentService::NewStub(channel_)) {}

  v1::ExperimentService::Stub& stub() { return *stub_; }

  std::unique_ptr<grpc::ClientContext> Context(int seconds = 30) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
    return ctx;
  }

  // Prints the failure and returns the exit code for a status.
  int Failure(const grpc::Status& s, const std::string& what) const {
    std::cerr << "frontier: " << what << ": " << s.error_message();
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      std::cerr << " (is frontier-server running at " << address_ << "?)";
    }
    std::cerr << "\n";
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) return kCliInvalid;
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED || s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      return kCliDenied;
    }
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) return kCliNotFound;
    return kCliFailed;
  }

 private:
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ExperimentService::Stub> stub_;
};

json ExperimentJson(const v1::Experiment& e) {
  const auto& c = e.counts();
  return {{"id", e.id()},
          {"name", e.name()},
          {"state", ExperimentStateName(e.state())},
          {"source", e.source_name()},
          {"created_unix_ms", e.created_unix_ms()},
          {"trials",
           {{"total", c.total()},
            {"pending", c.pending()},
            {"running", c.running()},
            {"completed", c.completed()},
            {"failed", c.failed()},
            {"diverged", c.diverged()},
            {"stopped", c.stopped()},
            {"cancelled", c.cancelled()}}},
          {"skipped", std::vector<std::string>(e.skipped().begin(), e.skipped().end())}};
}

std::string ExperimentLine(const v1::Experiment& e) {
  const auto& c = e.counts();
  std::ostringstream os;
  os << e.id() << "  " << e.name() << "  " << ExperimentStateName(e.state()) << "  " << Finished(c) << "/"
     << c.total() << " done (running " << c.running() << ", failed " << c.failed() << ", diverged " << c.diverged()
     << ")";
  return os.str();
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

json TrialJson(const v1::Trial& t) {
  json j = {{"id", t.id()},
            {"config", json::parse(t.config_json())},
            {"baseline", t.is_baseline()},
            {"seed", t.seed()},
            {"steps", t.steps()},
            {"state", StateName(t.state())},
            {"attempt", t.attempt()},
            {"worker", t.worker_id()},
            {"error", t.error()}};
  j["result"] = t.result_json().empty() ? json(nullptr) : json::parse(t.result_json());
  return j;
}

int PrintTrials(const v1::ListTrialsResponse& trials, const std::string& output) {
  if (output == "json") {
    json all = json::array();
    for (const auto& t : trials.trials()) all.push_back(TrialJson(t));
    std::cout << all.dump(2) << "\n";
    return kCliOk;
  }
  const bool csv = output == "csv";
  if (csv) {
    std::cout << "id,config,seed,state,attempt,val_accuracy,test_accuracy,median_step_ms,throughput,mfu,"
                 "peak_memory_mb,worker,error,val_iou,test_iou\n";
  } else {
    // "val": validation accuracy, or IoU for the BEV task.
    std::printf("%-18s %-9s %4s %3s %8s %10s %10s  %s\n", "trial", "state", "seed", "try", "val", "step_ms",
                "samples/s", "config");
  }
  for (const auto& t : trials.trials()) {
    json r = t.result_json().empty() ? json::object() : json::parse(t.result_json());
    auto num = [&](const json& v) { return v.is_number() ? v.get<double>() : std::nan(""); };
    const double val = num(r.value("val_accuracy", json()));
    const double test = num(r.value("test_accuracy", json()));
    const double val_iou = num(r.value("val_iou", json())), test_iou = num(r.value("test_iou", json()));
    const double step = r.contains("step_time_ms") ? num(r["step_time_ms"].value("median", json())) : std::nan("");
    const double tput = r.contains("throughput") && r["throughput"].is_object()
                            ? num(r["throughput"].value("samples_per_s", json()))
                            : std::nan("");
    const double mfu = num(r.value("mfu", json()));
    const double mem = num(r.value("peak_memory_mb", json()));
    const std::string config = t.is_baseline() ? "baseline" : t.config_json();
    if (csv) {
      std::cout << t.id() << "," << CsvField(t.config_json()) << "," << t.seed() << "," << StateName(t.state())
                << "," << t.attempt() << "," << val << "," << test << "," << step << "," << tput << "," << mfu << ","
                << mem << "," << t.worker_id() << "," << CsvField(t.error()) << "," << val_iou << "," << test_iou
                << "\n";
    } else {
      std::printf("%-18s %-9s %4lld %3d %8.4f %10.2f %10.0f  %s%s\n", t.id().c_str(), StateName(t.state()),
                  static_cast<long long>(t.seed()), t.attempt(), std::isnan(val) ? val_iou : val, step, tput,
                  config.c_str(),
                  t.error().empty() ? "" : ("  [" + t.error() + "]").c_str());
    }
  }
  return kCliOk;
}

// ---- frontier run: the embedded coordinator and local workers ----

std::string SiblingBinary(const std::string& name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& candidate : {self.parent_path() / name, self.parent_path().parent_path() / "worker" / name}) {
      if (fs::exists(candidate)) return candidate.string();
    }
  }
  return name;  // from PATH
}

class LocalWorkers {
 public:
  ~LocalWorkers() { Stop(std::chrono::seconds(5)); }

  // `metrics_listen` is each worker's --metrics-listen (HOST:0 gives each a free port; "0": none).
  void Start(int count, const std::string& coordinator, const fs::path& log_dir,
             const std::string& metrics_listen) {
    const std::string binary = SiblingBinary("frontier-worker");
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const std::string threads = std::to_string(std::max(1u, cores / static_cast<unsigned>(count)));
    fs::create_directories(log_dir);
    const std::string artifacts = fs::absolute(log_dir / "artifacts").string();  // profiles (docs/profiling.md)
    for (int i = 0; i < count; ++i) {
      const std::string log = (log_dir / ("worker-" + std::to_string(i) + ".log")).string();
      const std::string name = "local-" + std::to_string(i);
      const pid_t pid = fork();
      if (pid < 0) throw std::runtime_error("cannot start a worker: fork failed");
      if (pid == 0) {
        FILE* f = std::fopen(log.c_str(), "a");
        if (f) {
          dup2(fileno(f), STDOUT_FILENO);
          dup2(fileno(f), STDERR_FILENO);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        setpgid(0, 0);  // Ctrl-C reaches the CLI, which stops the workers itself
        execl(binary.c_str(), binary.c_str(), "--coordinator", coordinator.c_str(), "--threads-per-trial",
              threads.c_str(), "--name", name.c_str(), "--metrics-listen", metrics_listen.c_str(), "--artifact-dir",
              artifacts.c_str(), static_cast<char*>(nullptr));
        execlp(binary.c_str(), binary.c_str(), "--coordinator", coordinator.c_str(), "--threads-per-trial",
               threads.c_str(), "--name", name.c_str(), "--metrics-listen", metrics_listen.c_str(), "--artifact-dir",
               artifacts.c_str(), static_cast<char*>(nullptr));
        std::fprintf(stderr, "cannot execute %s\n", binary.c_str());
        _exit(127);
      }
      pids_.push_back(pid);
    }
  }

  // Workers that exited on their own (e.g. a missing binary).
  int Exited() {
    int n = 0;
    for (pid_t& pid : pids_) {
      int status = 0;
      if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
      }
      if (pid < 0) ++n;
    }
    return n;
  }

  // SIGTERM (workers drain), then SIGKILL after `grace`.
  void Stop(std::chrono::seconds grace) {
    for (pid_t pid : pids_) {
      if (pid > 0) kill(pid, SIGTERM);
    }
    const auto deadline = std::chrono::steady_clock::now() + grace;
    for (pid_t& pid : pids_) {
      while (pid > 0) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) {
          pid = -1;
        } else if (std::chrono::steady_clock::now() > deadline) {
          kill(-pid, SIGKILL);  // the worker's process group: its trial too
          kill(pid, SIGKILL);
          waitpid(pid, &status, 0);
          pid = -1;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    }
    pids_.clear();
  }

 private:
  std::vector<pid_t> pids_;
};

struct RunOptions {
  std::string space;
  int workers = 2;
  std::string runs_dir = "runs";
  std::string db;
  std::string resume;
  std::string html;
  std::string output = "table";
  std::string metrics_listen = "127.0.0.1:0";  // the embedded coordinator's /metrics; "0": none
};

int Run(const RunOptions& o) {
  if (o.space.empty() == o.resume.empty()) {
    std::cerr << "frontier run: give a search-space file, or --resume EXPERIMENT (with --db)\n";
    return kCliUsage;
  }
  if (o.workers < 1) {
    std::cerr << "frontier run: --workers must be at least 1\n";
    return kCliUsage;
  }
  fs::create_directories(o.runs_dir);
  std::string db = o.db;
  if (db.empty()) db = (fs::path(o.runs_dir) / "frontier.db").string();
  CoordinatorOptions co;
  co.listen = "127.0.0.1:0";
  co.store = db;
  co.scheduler.lease_timeout_ms = 60'000;
  co.scheduler.heartbeat_interval_ms = 5'000;
  co.scheduler.restart_grace_ms = 0;  // embedded: no worker of an earlier run can still hold a lease
  spdlog::set_level(spdlog::level::warn);
  Coordinator coordinator(co);
  // Trials an interrupted earlier run left running are re-queued now.
  coordinator.scheduler().store().ExpireLeases(std::numeric_limits<int64_t>::max());
  const std::string address = "127.0.0.1:" + std::to_string(coordinator.Start());
  std::string workers_metrics = "0";
  if (!MetricsDisabled(o.metrics_listen)) {
    coordinator.ServeMetrics(o.metrics_listen);
    workers_metrics = o.metrics_listen.substr(0, o.metrics_listen.rfind(':')) + ":0";
  }
  Client client(address, ClientSecurity{});

  std::string id = o.resume;
  if (id.empty()) {
    v1::SubmitExperimentRequest req;
    req.set_space_yaml(ReadFile(o.space));
    req.set_source_name(o.space);
    v1::SubmitExperimentResponse resp;
    const grpc::Status s = client.stub().SubmitExperiment(client.Context().get(), req, &resp);
    if (!s.ok()) return client.Failure(s, "submit " + o.space);
    id = resp.experiment().id();
    std::cout << "experiment " << id << " '" << resp.experiment().name() << "': " << resp.experiment().counts().total()
              << " trials";
    if (resp.experiment().skipped_size() > 0) {
      std::cout << ", " << resp.experiment().skipped_size() << " incompatible combinations skipped";
    }
    std::cout << "\n";
    for (const auto& skipped : resp.experiment().skipped()) std::cout << "  skipped " << skipped << "\n";
  }
  std::cout << "store " << db << ", coordinator " << address << ", " << o.workers
            << " local workers (logs in " << (fs::path(o.runs_dir) / id).string() << ")\n";
  if (!coordinator.metrics_url().empty()) {
    std::cout << "metrics: coordinator " << coordinator.metrics_url()
              << ", each worker's /metrics address is in its log\n";
  }

  LocalWorkers workers;
  workers.Start(o.workers, address, fs::path(o.runs_dir) / id, workers_metrics);
  struct sigaction sa = {};
  sa.sa_handler = [](int) { g_interrupted = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

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
    const auto& c = e.counts();
    if (done_at_start < 0) done_at_start = Finished(c);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int done_now = Finished(c) - done_at_start;
    std::ostringstream line;
    line << "[" << id << "] " << Finished(c) << "/" << c.total() << " done, " << c.running() << " running, "
         << c.failed() << " failed, " << c.diverged() << " diverged  elapsed " << Duration(elapsed);
    if (done_now > 0 && c.total() > Finished(c)) {
      line << "  ETA " << Duration(elapsed / done_now * (c.total() - Finished(c)));
    }
    const auto now = std::chrono::steady_clock::now();
    if (tty) {
      std::cout << "\r" << line.str() << "\033[K" << std::flush;
    } else if (line.str() != last_line && now - last_print > std::chrono::seconds(10)) {
      std::cout << line.str() << "\n" << std::flush;
      last_print = now;
    }
    last_line = line.str();
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

  for (const std::string& format : {o.output, std::string("html")}) {
    v1::GetReportRequest req;
    req.set_experiment_id(id);
    req.set_format(format);
    v1::GetReportResponse resp;
    const grpc::Status s = client.stub().GetReport(client.Context().get(), req, &resp);
    if (!s.ok()) return client.Failure(s, "report of " + id);
    if (format == "html") {
      const std::string html = o.html.empty() ? (fs::path(o.runs_dir) / (id + ".html")).string() : o.html;
      std::ofstream(html) << resp.content();
      std::cout << "HTML report: " << html << "\n";
    } else {
      std::cout << resp.content() << "\n";
    }
  }
  coordinator.Shutdown();
  return e.state() == v1::EXPERIMENT_COMPLETED ? kCliOk : kCliFailed;
}

int Watch(Client& client, const std::string& id) {
  v1::WatchExperimentRequest req;
  req.set_experiment_id(id);
  grpc::ClientContext ctx;  // no deadline: the stream lasts as long as the experiment
  auto reader = client.stub().WatchExperiment(&ctx, req);
  v1::ExperimentEvent event;
  v1::ExperimentState last = v1::EXPERIMENT_RUNNING;
  while (reader->Read(&event)) {
    const auto& c = event.experiment().counts();
    std::cout << "[" << Finished(c) << "/" << c.total() << "] " << event.message() << "\n" << std::flush;
    last = event.experiment().state();
  }
  const grpc::Status s = reader->Finish();
  if (!s.ok()) return client.Failure(s, "watch " + id);
  return last == v1::EXPERIMENT_COMPLETED ? kCliOk : kCliFailed;
}

int Report(Client& client, const std::string& id, const std::string& format, bool front_only,
           const std::string& html) {
  v1::GetReportRequest req;
  req.set_experiment_id(id);
  req.set_format(html.empty() ? format : "html");
  req.set_front_only(front_only);
  v1::GetReportResponse resp;
  const grpc::Status s = client.stub().GetReport(client.Context(120).get(), req, &resp);
  if (!s.ok()) return client.Failure(s, "report of " + id);
  if (!html.empty()) {
    std::ofstream out(html);
    out << resp.content();
    if (!out) {
      std::cerr << "frontier: cannot write " << html << "\n";
      return kCliFailed;
    }
    std::cout << "wrote " << html << "\n";
  } else {
    std::cout << resp.content() << (resp.content().empty() || resp.content().back() != '\n' ? "\n" : "");
  }
  return kCliOk;
}

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{"frontier: architecture search and ablations for perception models"};
  app.require_subcommand(1);
  std::string server = "127.0.0.1:50051";
  std::string output = "table";
  const std::vector<std::string> formats = {"table", "json", "csv"};
  std::string token_file;
  ClientSecurity security;
  auto add_server = [&](CLI::App* cmd) {
    cmd->add_option("--server", server, "coordinator address host:port")->capture_default_str();
    cmd->add_option("--token-file", token_file, "user token for a coordinator that requires one (else $FRONTIER_TOKEN)");
    cmd->add_option("--tls-ca", security.tls_ca_file, "connect with TLS, trusting this CA (PEM)");
    cmd->add_option("--tls-cert", security.tls_cert_file, "client certificate for mutual TLS (PEM)");
    cmd->add_option("--tls-key", security.tls_key_file, "the client certificate's key (PEM)");
  };
  auto add_output = [&](CLI::App* cmd) {
    cmd->add_option("--output,-o", output, "table, json or csv")->check(CLI::IsMember(formats))->capture_default_str();
  };

  RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "run an experiment on this machine: embedded coordinator + local workers");
  run_cmd->add_option("space", run.space, "search-space file (YAML)");
  run_cmd->add_option("--workers,-w", run.workers, "local workers (each runs one trial at a time)")
      ->capture_default_str();
  run_cmd->add_option("--runs-dir", run.runs_dir, "folder for the store, worker logs and reports")
      ->capture_default_str();
  run_cmd->add_option("--db", run.db, "SQLite store (default RUNS_DIR/frontier.db)");
  run_cmd->add_option("--resume", run.resume, "continue an interrupted experiment of the store");
  run_cmd->add_option("--html", run.html, "where to write the HTML report (default RUNS_DIR/EXP.html)");
  run_cmd->add_option("--metrics-listen", run.metrics_listen,
                      "host:port for the coordinator's Prometheus /metrics (port 0: any free port; 0: none)")
      ->capture_default_str();
  run_cmd->add_option("--output,-o", run.output, "report format: table, json or csv")
      ->check(CLI::IsMember(formats))
      ->capture_default_str();

  std::string space_file;
  auto* submit = app.add_subcommand("submit", "submit a search-space file to a coordinator");
  submit->add_option("space", space_file, "search-space file (YAML)")->required();
  add_server(submit);
  add_output(submit);

  std::string id;
  auto experiment_cmd = [&](const char* name, const char* help) {
    auto* cmd = app.add_subcommand(name, help);
    cmd->add_option("experiment", id, "experiment id, e.g. exp-000001")->required();
    add_server(cmd);
    return cmd;
  };
  auto* status = experiment_cmd("status", "an experiment's state and trial counts");
  add_output(status);
  auto* watch = experiment_cmd("watch", "follow an experiment until it ends");
  auto* cancel = experiment_cmd("cancel", "cancel an experiment");
  auto* trials = experiment_cmd("trials", "an experiment's trials with their metrics");
  add_output(trials);
  auto* pareto = experiment_cmd("pareto", "the Pareto front and the baseline, with parity verdicts");
  add_output(pareto);
  std::string html;
  auto* report = experiment_cmd("report", "the full report: statistics over seeds, front, parity");
  add_output(report);
  report->add_option("--html", html, "write the self-contained HTML report to this file");
  int limit = 100;
  auto* list = app.add_subcommand("list", "experiments, newest first");
  add_server(list);
  add_output(list);
  list->add_option("--limit", limit, "at most this many")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kCliOk : kCliUsage;
  }

  try {
    if (run_cmd->parsed()) return Run(run);
    security.token = ReadToken(token_file, "FRONTIER_TOKEN");
    Client client(server, security);
    if (submit->parsed()) {
      v1::SubmitExperimentRequest req;
      req.set_space_yaml(ReadFile(space_file));
      req.set_source_name(space_file);
      v1::SubmitExperimentResponse resp;
      const grpc::Status s = client.stub().SubmitExperiment(client.Context().get(), req, &resp);
      if (!s.ok()) return client.Failure(s, "submit " + space_file);
      if (output == "json") {
        std::cout << ExperimentJson(resp.experiment()).dump(2) << "\n";
      } else {
        std::cout << resp.experiment().id() << "\n";
        std::cerr << ExperimentLine(resp.experiment()) << "\n";
      }
      return kCliOk;
    }
    if (status->parsed() || cancel->parsed()) {
      v1::Experiment e;
      grpc::Status s;
      if (cancel->parsed()) {
        v1::CancelExperimentRequest req;
        req.set_experiment_id(id);
        s = client.stub().CancelExperiment(client.Context().get(), req, &e);
      } else {
        v1::GetExperimentRequest req;
        req.set_experiment_id(id);
        s = client.stub().GetExperiment(client.Context().get(), req, &e);
      }
      if (!s.ok()) return client.Failure(s, "experiment " + id);
      if (output == "json") {
        std::cout << ExperimentJson(e).dump(2) << "\n";
      } else {
        std::cout << ExperimentLine(e) << "\n";
      }
      return kCliOk;
    }
    if (list->parsed()) {
      v1::ListExperimentsRequest req;
      req.set_limit(limit);
      v1::ListExperimentsResponse resp;
      const grpc::Status s = client.stub().ListExperiments(client.Context().get(), req, &resp);
      if (!s.ok()) return client.Failure(s, "list");
      if (output == "json") {
        json all = json::array();
        for (const auto& e : resp.experiments()) all.push_back(ExperimentJson(e));
        std::cout << all.dump(2) << "\n";
      } else {
        for (const auto& e : resp.experiments()) std::cout << ExperimentLine(e) << "\n";
      }
      return kCliOk;
    }
    if (watch->parsed()) return Watch(client, id);
    if (trials->parsed()) {
      v1::ListTrialsRequest req;
      req.set_experiment_id(id);
      v1::ListTrialsResponse resp;
      const grpc::Status s = client.stub().ListTrials(client.Context().get(), req, &resp);
      if (!s.ok()) return client.Failure(s, "trials of " + id);
      return PrintTrials(resp, output);
    }
    if (pareto->parsed()) return Report(client, id, output, true, "");
    if (report->parsed()) return Report(client, id, output, false, html);
  } catch (const std::exception& e) {
    std::cerr << "frontier: " << e.what() << "\n";
    return kCliFailed;
  }
  return kCliUsage;
}

}  // namespace frontier
