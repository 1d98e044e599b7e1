// Coordinator load benchmark: N simulated workers against a running
// frontier-server. No training: each leased trial reports one progress event
// and completes with a small synthetic result.
// Prints one JSON line: trials/s (from the first lease to the last
// completion) and p50/p99 latency per RPC; LeaseTrial counts the leases that
// returned a trial, LeaseTrial(empty) the polls that waited out their wait_ms
// on an empty queue.
//
//   load_generator --server HOST:PORT --workers N --trials T [--lease-next 0] [--cpu-of NAME=PID,...]
//                  [--trace FILE]
//       (--cpu-of: also the CPU milliseconds per trial those processes, with their children, and the
//       simulated workers used during the run; --trace: every call as a line "END_MS RPC LATENCY_MS",
//       END_MS from the load's start, to see whether slow calls come together or one by one.
//       LeaseTrial(steady) is LeaseTrial without each worker's first lease: the 64 first leases
//       arrive at once when the run starts)
//   load_generator --fill-store URL --trials T   (creates an experiment of T
//       pending trials directly through the Store; coordinator_load.sh then
//       finishes them all in one SQL statement, for the report query at scale)
//
// The chaos soak (tests/bench/chaos_soak.sh) runs it in two more modes:
//   load_generator --server HOST:PORT --submit T   (submits an experiment of T
//       trials, max_attempts 100, retrying while the coordinator is down
//       with one submit_id, so that it creates one experiment; prints its id)
//   load_generator --server HOST:PORT --soak-worker LEDGER [--work-ms W]
//       (one simulated worker until killed, riding out coordinator and store
//       outages, each completion asking for the next trial; before each CompleteTrial it appends
//       "send TRIAL ATTEMPT WORKER VAL_ACCURACY" to LEDGER, after it
//       "accepted ..." or "rejected ..." with the same fields: each line one
//       write(2), so a kill -9 loses none that was written)
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <time.h>

#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontier/v1/frontier.grpc.pb.h"
#include "search_spaces/search_space.h"
#include "server/store/open_store.h"
#include "server/store/store.h"
#include "tests/bench/bench_main.h"

namespace {

namespace v1 = frontier::v1;
using Clock = std::chrono::steady_clock;

// A space of `configs` configurations at one seed: width_mult values, and
// where `configs` has a divisor (the largest up to its square root) that many
// learning rates, the grid being their product: no dimension lists more
// choices than a user's space may (kMaxSpaceNodes values in all,
// search_spaces/search_space.h), so 100,000 trials are a 271 x 369 grid and
// the baseline.
std::string SpaceYaml(int configs, int max_attempts = 3) {
  int rates = 1;
  for (int d = 2; static_cast<long long>(d) * d <= configs; ++d) {
    if (configs % d == 0) rates = d;
  }
  std::ostringstream os;
  os << "name: load\ntask: {dataset: synthetic, input: {channels: 1, height: 8, width: 8, classes: 2}, "
        "batch_size: 4, steps: 2, warmup_steps: 0, eval_every: 0}\n"
        "baseline:\n  arch: {stem: {kind: conv3x3, width: 8, stride: 1}, stages: [{block: basic, width: 8, "
        "depth: 1}]}\n"
        "space:\n  width_mult: [";
  for (int i = 0; i < configs / rates; ++i) os << (i ? ", " : "") << 1.0 + 0.0005 * (i + 1);
  os << "]\n";
  if (rates > 1) {
    os << "  task.optimizer.lr: [";
    for (int i = 0; i < rates; ++i) os << (i ? ", " : "") << 0.01 * (1.0 + 0.001 * (i + 1));
    os << "]\n";
  }
  os << "objectives: [{metric: val_accuracy, goal: maximize}, {metric: throughput, goal: maximize}]\n"
        "repeats: 1\nstrategy: {name: grid}\nmax_attempts: "
     << max_attempts << "\n";
  return os.str();
}

std::string FakeResult(std::mt19937& rng, double val_accuracy = -1) {
  std::uniform_real_distribution<double> u(0, 1);
  return nlohmann::json{{"event", "result"},
                        {"schema", 1},
                        {"status", "completed"},
                        {"val_accuracy", val_accuracy >= 0 ? val_accuracy : 0.8 + 0.1 * u(rng)},
                        {"test_accuracy", 0.8 + 0.1 * u(rng)},
                        {"step_time_ms", {{"median", 10 + u(rng)}}},
                        {"throughput", {{"samples_per_s", 1000 + 100 * u(rng)}}},
                        {"mfu", 0.3},
                        {"peak_memory_mb", 100},
                        {"params", 1000}}
      .dump();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

int FillStore(const std::string& url, int trials) {
  if (trials < 2) throw std::invalid_argument("--trials: the store holds the baseline and at least one more trial");
  auto store = frontier::OpenStore(url);
  frontier::ExperimentRecord e;
  e.name = "load";
  e.space_yaml = SpaceYaml(trials - 1);
  e.source_name = "load.yaml";
  const frontier::SearchSpace space = frontier::ParseSearchSpace(e.space_yaml, e.source_name);
  e.goals_json = frontier::GoalsJson(space).dump();  // as Submit does
  // The baseline, then the grid's configurations, keyed as Submit keys them.
  std::vector<frontier::Config> configs = frontier::EnumerateGrid(space);
  configs.insert(configs.begin(), frontier::Config::object());
  std::vector<frontier::TrialRow> rows;
  for (const frontier::Config& config : configs) {
    frontier::TrialRow t;
    t.config_json = frontier::ConfigKey(config);
    t.is_baseline = rows.empty();
    t.seed = 1;
    t.steps = 2;
    t.spec_json = "{}";
    rows.push_back(std::move(t));
  }
  const auto t0 = Clock::now();
  const std::string id = store->CreateExperiment(e, rows, 1);
  std::cout << nlohmann::json{{"experiment", id},
                              {"trials", trials},
                              {"fill_s", std::chrono::duration<double>(Clock::now() - t0).count()}}
                   .dump()
            << std::endl;
  return 0;
}

// CPU seconds process `pid` has used so far: its own threads, its children
// reaped (PostgreSQL's ended backends) and its children alive (the backends
// still connected), from /proc. 0 for pid 0.
double CpuSecondsOf(int pid) {
  if (pid <= 0) return 0;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  // Fields after the command's closing parenthesis: state is the 3rd field, ppid the 4th, utime the 14th.
  auto fields = [](const std::string& path) {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream rest(text.substr(text.rfind(')') + 1));
    return std::vector<std::string>(std::istream_iterator<std::string>(rest), {});
  };
  auto field = [](const std::vector<std::string>& f, size_t n) {
    return f.size() > n - 3 ? std::stod(f[n - 3]) : 0;
  };
  const std::vector<std::string> own = fields("/proc/" + std::to_string(pid) + "/stat");
  double ticks = field(own, 14) + field(own, 15) + field(own, 16) + field(own, 17);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::vector<std::string> f = fields(entry.path() / "stat");
    if (f.size() > 1 && f[1] == std::to_string(pid)) ticks += field(f, 14) + field(f, 15);
  }
  return ticks / tick;
}

double OwnCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// --cpu-of NAME=PID,NAME=PID: the processes whose CPU the load run reports per trial.
std::vector<std::pair<std::string, int>> ParseCpuOf(const std::string& flag) {
  std::vector<std::pair<std::string, int>> out;
  std::istringstream in(flag);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) out.emplace_back(item.substr(0, eq), std::stoi(item.substr(eq + 1)));
  }
  return out;
}

// A channel that reconnects within half a second of the coordinator coming
// back (gRPC's default backoff grows to two minutes).
std::shared_ptr<grpc::Channel> SoakChannel(const std::string& server) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  return grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args);
}

// Calls `call(ctx)` until it returns a status other than UNAVAILABLE (the
// coordinator or its store is down) or DEADLINE_EXCEEDED.
template <typename Call>
grpc::Status Retrying(Call&& call, int deadline_s = 10) {
  for (;;) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
    const grpc::Status s = call(ctx);
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
        s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)
      return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int Submit(const std::string& server, int trials) {
  auto users = v1::ExperimentService::NewStub(SoakChannel(server));
  v1::SubmitExperimentRequest submit;
  submit.set_space_yaml(SpaceYaml(trials - 1, /*max_attempts=*/100));
  submit.set_source_name("soak.yaml");
  // One key for this logical submission and every retry of it: a reply lost
  // to a coordinator kill after its commit does not create a second experiment.
  submit.set_submit_id("soak-" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}()));
  v1::SubmitExperimentResponse submitted;
  const grpc::Status s =
      Retrying([&](grpc::ClientContext& c) { return users->SubmitExperiment(&c, submit, &submitted); }, 60);
  if (!s.ok()) {
    std::cerr << "submit: " << s.error_message() << "\n";
    return 1;
  }
  std::cout << submitted.experiment().id() << std::endl;
  return 0;
}

// Appends one line to the ledger with a single write(2).
void Append(int fd, const std::string& line) {
  const std::string text = line + "\n";
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    std::perror("ledger");
    std::exit(1);
  }
}

int SoakWorker(const std::string& server, const std::string& ledger, int work_ms) {
  const int fd = open(ledger.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) {
    std::perror(ledger.c_str());
    return 1;
  }
  auto stub = v1::WorkerService::NewStub(SoakChannel(server));
  std::mt19937 rng(std::random_device{}());
  v1::RegisterWorkerRequest reg;
  reg.set_host("soak-" + std::to_string(getpid()));
  reg.set_device("cpu");
  v1::RegisterWorkerResponse registered;
  if (!Retrying([&](grpc::ClientContext& c) { return stub->RegisterWorker(&c, reg, &registered); }).ok())
    return 1;
  const std::string& me = registered.worker_id();
  v1::LeaseTrialResponse leased;  // the next trial, when the last completion brought one
  for (;;) {
    if (!leased.has_trial()) {
      v1::LeaseTrialRequest lease;
      lease.set_worker_id(me);
      lease.set_wait_ms(500);
      if (!Retrying([&](grpc::ClientContext& c) { return stub->LeaseTrial(&c, lease, &leased); }).ok() ||
          !leased.has_trial()) {
        leased.Clear();
        continue;
      }
    }
    v1::ReportProgressRequest progress;
    progress.set_worker_id(me);
    progress.set_trial_id(leased.trial_id());
    progress.set_attempt(leased.attempt());
    progress.set_event_json(R"({"event":"progress","step":1,"loss":1.0})");
    v1::ReportProgressResponse progressed;
    Retrying([&](grpc::ClientContext& c) { return stub->ReportProgress(&c, progress, &progressed); });
    if (progressed.stop()) {  // the lease was lost meanwhile
      leased.Clear();
      continue;
    }
    if (work_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(work_ms));
    // A value that names this completion: the checker finds it in the stored result.
    const double val_accuracy = std::uniform_int_distribution<int64_t>(1, 1'000'000'000)(rng) * 1e-9;
    char fields[256];
    std::snprintf(fields, sizeof fields, "%s %d %s %.9f", leased.trial_id().c_str(), leased.attempt(),
                  me.c_str(), val_accuracy);
    Append(fd, std::string("send ") + fields);
    v1::CompleteTrialRequest complete;
    complete.set_worker_id(me);
    complete.set_trial_id(leased.trial_id());
    complete.set_attempt(leased.attempt());
    complete.set_result_json(FakeResult(rng, val_accuracy));
    complete.set_lease_next(true);  // as the worker agent does
    v1::CompleteTrialResponse reply;
    const grpc::Status s =
        Retrying([&](grpc::ClientContext& c) { return stub->CompleteTrial(&c, complete, &reply); });
    if (s.ok()) Append(fd, std::string(reply.accepted() ? "accepted " : "rejected ") + fields);
    leased = s.ok() ? reply.next() : v1::LeaseTrialResponse();
  }
}
// What the simulated workers of the load mode share: the trial count, the
// latencies each hands over when it stops, the run's first lease and last completion.
struct Load {
  Load(int total, bool lease_next) : total(total), lease_next(lease_next) {}
  const int total;
  const bool
      lease_next;  // false: a LeaseTrial call per trial, as workers before CompleteTrial.lease_next did
  std::atomic<int> completed{0};
  std::atomic<bool> done{false};
  std::mutex mu;  // guards what follows
  std::condition_variable stopped;
  int workers_stopped = 0;
  std::map<std::string, std::vector<double>> latency_ms;
  std::vector<std::tuple<double, const char*, double>> trace;  // (end ms, rpc, ms) of every call
  Clock::time_point start = Clock::now();
  Clock::time_point first_lease = Clock::time_point::max();
  Clock::time_point last_completion;  // the run ends here, not when the last idle long poll returns

  void WaitForWorkers(int workers) {
    std::unique_lock<std::mutex> lock(mu);
    stopped.wait(lock, [&] { return workers_stopped == workers; });
  }
};

// One simulated worker of the load mode on gRPC's callback API: each call's
// completion makes the next call, so the 64 workers cost gRPC's few callback
// threads, not 64 threads each woken per call (this client shares the cores
// with the coordinator and PostgreSQL). Per trial: a lease unless the last
// completion brought one, one progress event, the completion.
// The callback-API start of one WorkerService method, for SimulatedWorker::Call.
#define Rpc(method) [](auto* async, auto... args) { async->method(args...); }

class SimulatedWorker {
 public:
  SimulatedWorker(Load& load, std::unique_ptr<v1::WorkerService::Stub> stub, int index)
      : load_(load), stub_(std::move(stub)), rng_(index) {
    register_.set_host("sim-" + std::to_string(index));
    register_.set_device("cpu");
  }

  void Start() {
    Call("RegisterWorker", Rpc(RegisterWorker), register_, registered_,
         [this](const grpc::Status&) { Next(); });
  }

 private:
  // Starts the call `start` makes, with a fresh context; `then` runs with its status on a gRPC thread.
  template <typename Start, typename Request, typename Response, typename Then>
  void Call(const char* rpc, Start&& start, const Request& request, Response& response, Then&& then) {
    context_ = std::make_unique<grpc::ClientContext>();
    context_->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    response.Clear();
    const auto t0 = Clock::now();
    start(stub_->async(), context_.get(), &request, &response,
          [this, rpc, t0, then = std::forward<Then>(then)](grpc::Status status) {
            const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
            if (rpc != nullptr) mine_[rpc].push_back(ms);
            last_ms_ = ms;
            trace_.emplace_back(std::chrono::duration<double, std::milli>(Clock::now() - load_.start).count(),
                                rpc != nullptr ? rpc : "LeaseTrial", ms);
            then(status);
          });
  }

  void Next() {
    if (load_.done) return Stop();
    if (next_.has_trial()) return Progress();
    lease_.set_worker_id(registered_.worker_id());
    lease_.set_wait_ms(200);
    Call(nullptr, Rpc(LeaseTrial), lease_, next_, [this](const grpc::Status& status) {
      // Leases that returned a trial apart from empty long polls (which wait up to wait_ms by design).
      mine_[next_.has_trial() ? "LeaseTrial" : "LeaseTrial(empty)"].push_back(last_ms_);
      if (next_.has_trial() && leased_before_) mine_["LeaseTrial(steady)"].push_back(last_ms_);
      leased_before_ = leased_before_ || next_.has_trial();
      if (!status.ok()) next_.Clear();
      Next();
    });
  }

  void Progress() {
    first_ = std::min(first_, Clock::now());
    progress_.set_worker_id(registered_.worker_id());
    progress_.set_trial_id(next_.trial_id());
    progress_.set_attempt(next_.attempt());
    progress_.set_event_json(R"({"event":"progress","step":1,"loss":1.0})");
    Call("ReportProgress", Rpc(ReportProgress), progress_, progressed_,
         [this](const grpc::Status&) { Complete(); });
  }

  void Complete() {
    complete_.set_worker_id(registered_.worker_id());
    complete_.set_trial_id(next_.trial_id());
    complete_.set_attempt(next_.attempt());
    complete_.set_result_json(FakeResult(rng_));
    complete_.set_lease_next(load_.lease_next);  // as the worker agent does
    const char* rpc = load_.lease_next ? "CompleteTrial+lease" : "CompleteTrial";
    Call(rpc, Rpc(CompleteTrial), complete_, completed_, [this](const grpc::Status& status) {
      if (status.ok() && completed_.accepted()) {
        const int now_completed = ++load_.completed;
        if (now_completed == load_.total) {
          std::lock_guard<std::mutex> lock(load_.mu);
          load_.last_completion = Clock::now();
        }
        if (now_completed >= load_.total) load_.done = true;
      }
      next_ = status.ok() ? completed_.next() : v1::LeaseTrialResponse();
      // A lease that came with the completion took as long as that call.
      if (next_.has_trial()) {
        mine_["LeaseTrial"].push_back(last_ms_);
        if (leased_before_) mine_["LeaseTrial(steady)"].push_back(last_ms_);
        leased_before_ = true;
      }
      Next();
    });
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(load_.mu);
    load_.first_lease = std::min(load_.first_lease, first_);
    for (auto& [rpc, v] : mine_)
      load_.latency_ms[rpc].insert(load_.latency_ms[rpc].end(), v.begin(), v.end());
    load_.trace.insert(load_.trace.end(), trace_.begin(), trace_.end());
    ++load_.workers_stopped;
    load_.stopped.notify_all();
  }

  Load& load_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::mt19937 rng_;
  std::unique_ptr<grpc::ClientContext> context_;  // of the one call in flight
  double last_ms_ = 0;                            // that call's latency
  bool leased_before_ = false;                    // this worker had a lease: the next is steady state
  std::vector<std::tuple<double, const char*, double>> trace_;
  std::map<std::string, std::vector<double>> mine_;
  Clock::time_point first_ = Clock::time_point::max();
  v1::RegisterWorkerRequest register_;
  v1::RegisterWorkerResponse registered_;
  v1::LeaseTrialRequest lease_;
  v1::LeaseTrialResponse next_;  // the trial to run, from a lease or the last completion
  v1::ReportProgressRequest progress_;
  v1::ReportProgressResponse progressed_;
  v1::CompleteTrialRequest complete_;
  v1::CompleteTrialResponse completed_;
};

int Main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  const auto int_flag = [&](const std::string& flag, const char* otherwise) {
    return static_cast<int>(frontier::bench::IntFlag(flag, flags.count(flag) ? flags[flag] : otherwise));
  };
  const int trials = int_flag("--trials", "2000");
  if (flags.count("--fill-store")) return FillStore(flags["--fill-store"], trials);
  if (!flags.count("--server")) {
    std::cerr << "usage: load_generator --server HOST:PORT --workers N --trials T [--lease-next 0] [--cpu-of "
                 "NAME=PID,...]\n"
                 "       load_generator --fill-store URL --trials T\n"
                 "       load_generator --server HOST:PORT --submit T\n"
                 "       load_generator --server HOST:PORT --soak-worker LEDGER [--work-ms W]\n";
    return 64;
  }
  const std::string server = flags["--server"];
  const int workers = int_flag("--workers", "16");
  const int work_ms = int_flag("--work-ms", "0");
  // --lease-next 0: a LeaseTrial call per trial, as workers before CompleteTrial.lease_next did.
  const bool lease_next = !flags.count("--lease-next") || flags["--lease-next"] != "0";
  if (flags.count("--submit")) return Submit(server, int_flag("--submit", ""));
  if (flags.count("--soak-worker")) return SoakWorker(server, flags["--soak-worker"], work_ms);
  auto channel = grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
  auto users = v1::ExperimentService::NewStub(channel);

  v1::SubmitExperimentRequest submit;
  submit.set_space_yaml(SpaceYaml(trials - 1));
  submit.set_source_name("load.yaml");
  v1::SubmitExperimentResponse submitted;
  const auto s0 = Clock::now();
  {
    grpc::ClientContext ctx;
    const grpc::Status s = users->SubmitExperiment(&ctx, submit, &submitted);
    if (!s.ok()) {
      std::cerr << "submit: " << s.error_message() << "\n";
      return 1;
    }
  }
  const double submit_s = std::chrono::duration<double>(Clock::now() - s0).count();
  const int total = submitted.experiment().counts().total();

  Load load(total, lease_next);
  // A few channels shared by the simulated workers, as real workers on a few hosts would have.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < std::min(workers, 8); ++c) {
    grpc::ChannelArguments args;
    args.SetInt("load_generator_channel", c);  // distinct args: distinct connections
    channels.push_back(grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args));
  }
  std::vector<std::unique_ptr<SimulatedWorker>> simulated;
  for (int w = 0; w < workers; ++w) {
    simulated.push_back(std::make_unique<SimulatedWorker>(
        load, v1::WorkerService::NewStub(channels[w % channels.size()]), w));
  }
  // CPU per trial over the run (submission apart): what each part costs when all share the cores, a
  // steadier figure than trials/s on a machine whose speed drifts.
  const auto cpu_of = ParseCpuOf(flags.count("--cpu-of") ? flags["--cpu-of"] : "");
  std::vector<double> cpu0;
  for (const auto& [name, pid] : cpu_of) cpu0.push_back(CpuSecondsOf(pid));
  const double own0 = OwnCpuSeconds();
  for (auto& worker : simulated) worker->Start();
  load.WaitForWorkers(workers);
  nlohmann::json cpu_ms = {{"simulated_workers", (OwnCpuSeconds() - own0) * 1000 / total}};
  for (size_t i = 0; i < cpu_of.size(); ++i) {
    cpu_ms[cpu_of[i].first] = (CpuSecondsOf(cpu_of[i].second) - cpu0[i]) * 1000 / total;
  }
  const auto& latency_ms = load.latency_ms;
  const auto first_lease = load.first_lease;
  const auto last_completion = load.last_completion;
  const double run_s = std::chrono::duration<double>(last_completion - first_lease).count();

  nlohmann::json out = {{"workers", workers},
                        {"trials", total},
                        {"submit_s", submit_s},
                        {"run_s", run_s},
                        {"trials_per_s", total / run_s}};
  out["cpu_ms_per_trial"] = cpu_ms;
  for (const auto& [rpc, v] : latency_ms) {
    out["latency_ms"][rpc] = {{"n", v.size()}, {"p50", Percentile(v, 0.5)}, {"p99", Percentile(v, 0.99)}};
  }
  if (flags.count("--trace")) {
    std::ofstream trace(flags["--trace"]);
    auto calls = load.trace;
    std::sort(calls.begin(), calls.end());
    for (const auto& [end_ms, rpc, ms] : calls) trace << end_ms << " " << rpc << " " << ms << "\n";
  }
  std::cout << out.dump() << std::endl;
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  return frontier::bench::GuardedMain("load_generator", [&] { return Main(argc, argv); });
}
