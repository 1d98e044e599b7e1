#include "worker/trial/lab_timing.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>

#include <torch/torch.h>

#include "search_spaces/input_bounds.h"
#include "worker/sandbox/program.h"
#include "worker/trial/lab_exchange.h"
#include "worker/trial/measure/cpu_allocator.h"
#include "worker/trial/measure/step_stats.h"
#include "worker/trial/op_bench.h"
#include "os/monotonic.h"

namespace frontier::lab {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxLine = size_t{1} << 20;           // a command or a reply
constexpr int64_t kMaxTensorBytes = int64_t{1} << 30;  // one tensor a runner returns
constexpr int64_t kMaxWindowBytes = int64_t{2} << 30;  // all a window's calls return
constexpr int64_t kMaxWindowInputBytes = 64 << 20;     // the inputs of a window's calls
constexpr double kWindowMs = 5;                        // a window's reference calls last about this long
constexpr int kMaxCallsPerWindow = 64;
constexpr int kMinWarmupRounds = 3;   // warm-up rounds, then more until no window faults in memory,
constexpr int kMaxWarmupRounds = 10;  // at most this many
constexpr int kOverheadWindows = 5;
constexpr double kStopSeconds = 5;  // a runner not stopped this long after SIGSTOP: refused


// The output gradient every forward+backward uses: of the reference's output shape at the recorded call.
torch::Tensor Upstream(const ops::OpCall& call, uint64_t seed) {
  torch::NoGradGuard no_grad;
  const torch::Tensor out = call.run(ops::OpRegistry().At(call.op).reference, call.inputs);
  return ops::UpstreamGradient(out.sizes(), seed).to(torch::kFloat).to(out.device());
}

// A seed from the operating system: the timed inputs' draws cannot be foreseen from anything a runner sees.
uint64_t OsSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// `n` calls' inputs, each drawn as the op draws them, from a seed of the operating system's.
std::vector<std::vector<torch::Tensor>> FreshSets(const ops::OpCall& call, int n) {
  TimingDraws draws = DrawTimingInputs(call, n - 1, OsSeed());
  std::vector<std::vector<torch::Tensor>> sets{std::move(draws.fixed)};
  for (auto& set : draws.rounds) sets.push_back(std::move(set));
  return sets;
}

json Describe(const torch::Tensor& t) {
  return {{"address", reinterpret_cast<uint64_t>(t.data_ptr())},
          {"dtype", DtypeCodeOf(t.scalar_type())},
          {"shape", t.sizes().vec()}};
}

// A tensor of the runner's memory as its reply describes it, read with bounds.
torch::Tensor ReadRemote(const sandbox::Program& program, const json& d, int64_t* budget) {
  if (d.is_null()) return {};
  if (!d.is_object() || !d.contains("address") || !d["address"].is_number_unsigned() ||
      !d.contains("dtype") || !d["dtype"].is_number_integer() || !d.contains("shape") ||
      !d["shape"].is_array() || d["shape"].size() > 8) {
    throw std::runtime_error(
        "a tensor it returned is not described as {address, dtype, shape} of at most 8 dims");
  }
  const c10::ScalarType dtype = DtypeOfCode(d["dtype"].get<int64_t>());
  std::vector<int64_t> shape;
  int64_t bytes = static_cast<int64_t>(c10::elementSize(dtype));
  for (const json& size : d["shape"]) {
    if (!size.is_number_integer() || size.get<int64_t>() < 0 ||
        (size.get<int64_t>() > 0 && bytes > kMaxTensorBytes / size.get<int64_t>())) {
      throw std::runtime_error("a tensor it returned has a size that is negative or over " +
                               std::to_string(kMaxTensorBytes) + " bytes");
    }
    shape.push_back(size.get<int64_t>());
    bytes *= shape.back();
  }
  if (bytes > *budget) throw std::runtime_error("its calls returned more than the window's bound in all");
  *budget -= bytes;
  torch::Tensor t = torch::empty(shape, dtype);
  if (bytes > 0) program.Read(d["address"].get<uint64_t>(), t.data_ptr(), static_cast<size_t>(bytes));
  return t;
}

std::string Text(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_string()) return "";
  const std::string s = j[key].get<std::string>();
  return s.size() > 2000 ? s.substr(0, 2000) : s;
}

// The runner's process ended (its sandbox::Run returned): the verdict comes from how.
struct RunnerEnded : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The timing ran past its wall time (the runners' limit, for all its rounds).
struct Overdue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One runner as the judge drives it: its sandbox on a thread of its own, its FIFOs, its program once found.
class Runner {
 public:
  Runner(std::string name, sandbox::Options options) : name_(std::move(name)), options_(std::move(options)) {}
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  ~Runner() {
    End();
    for (int fd : {commands_, replies_}) {
      if (fd >= 0) close(fd);
    }
  }

  void Start() {
    for (const char* name : {"commands", "replies"}) {
      const std::string path = options_.folder + "/" + name;
      if (mkfifo(path.c_str(), 0600) != 0) throw std::runtime_error(path + ": " + std::strerror(errno));
    }
    // Both read-write: opening never blocks, a write never meets a reader that is gone (the judge is one),
    // and the runner's own opens find both ends there.
    commands_ = open((options_.folder + "/commands").c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    replies_ = open((options_.folder + "/replies").c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (commands_ < 0 || replies_ < 0)
      throw std::runtime_error(name_ + ": its FIFOs: " + std::strerror(errno));
    options_.single_process = true;
    // Its OpenMP threads bound to cores: unbound, a continued runner's threads at 2 threads on 2 cores often
    // shared one core for a window (its calls' times varied 3x where the op benchmark's in one process varied
    // 5%).
    options_.environment.emplace_back("OMP_PROC_BIND", "true");
    options_.on_start = [this](int group) { group_ = group; };
    thread_ = std::thread([this] {
      outcome_ = sandbox::Run(options_);
      ended_ = true;
    });
  }

  // The first reply ({"ready": true}): the runner has set up; its program is found and stopped.
  void AwaitReady(Monotonic::time_point deadline) {
    const json ready = Receive(deadline);
    if (!ready.is_object() || ready.value("ready", false) != true) {
      throw std::runtime_error(name_ + " did not answer ready");
    }
    program_ = sandbox::Program::Find(group_);
    program_->Stop(kStopSeconds);
  }

  // Continues the runner, sends `command`, waits for the reply and stops the runner again.
  json Ask(const json& command, Monotonic::time_point deadline) {
    program_->Continue();
    const std::string line = command.dump() + "\n";
    for (size_t at = 0; at < line.size();) {
      const ssize_t n = write(commands_, line.data() + at, line.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error(name_ + ": sending a command: " + std::strerror(errno));
      at += static_cast<size_t>(n);
    }
    json reply = Receive(deadline);
    program_->Stop(kStopSeconds);
    return reply;
  }

  const sandbox::Program& program() const { return *program_; }
  const std::string& name() const { return name_; }

  // Ends the runner: asked to quit when it answers, killed otherwise; waits for its sandbox.
  sandbox::Outcome End(bool ask = false) {
    if (!thread_.joinable()) return outcome_;
    if (program_ && !ended_) {
      if (ask) {
        program_->Continue();
        const std::string quit = "{\"cmd\":\"quit\"}\n";
        ssize_t ignored = write(commands_, quit.data(), quit.size());
        (void)ignored;
        const auto deadline = Monotonic::now() + std::chrono::seconds(10);
        while (!ended_ && Monotonic::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (!ended_) kill(program_->pid(), SIGKILL);
    } else if (!ended_ && group_ > 0) {
      kill(-group_, SIGKILL);
    }
    thread_.join();
    return outcome_;
  }

 private:
  // The next reply line, parsed with bounds.
  json Receive(Monotonic::time_point deadline) {
    for (;;) {
      const size_t newline = pending_.find('\n');
      if (newline != std::string::npos) {
        const std::string line = pending_.substr(0, newline);
        pending_.erase(0, newline + 1);
        try {
          return ParseBoundedJson(line, kMaxLine);
        } catch (const std::exception& e) {
          throw std::runtime_error(name_ + " replied with something that is not JSON: " + e.what());
        }
      }
      if (pending_.size() > kMaxLine) throw std::runtime_error(name_ + " replied with a line over 1 MiB");
      pollfd fd{replies_, POLLIN, 0};
      const bool was_ended = ended_;
      if (poll(&fd, 1, 20) > 0) {
        char buffer[65536];
        const ssize_t n = read(replies_, buffer, sizeof buffer);
        if (n > 0) pending_.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (was_ended) throw RunnerEnded(name_ + " ended");
      if (Monotonic::now() >= deadline) throw Overdue(name_ + " had not answered when the time ran out");
    }
  }

  std::string name_;
  sandbox::Options options_;
  int commands_ = -1, replies_ = -1;
  std::string pending_;
  std::thread thread_;
  std::atomic<int> group_{0};
  std::atomic<bool> ended_{false};
  sandbox::Outcome outcome_;
  std::optional<sandbox::Program> program_;
};

// One window: the runner is given `sets` (each one call's inputs) while stopped, then runs them on the clock.
struct Window {
  double ms = 0;
  std::vector<ops::CaseRun> runs;  // with `keep`
};

Window RunWindow(Runner& runner, const std::vector<std::vector<torch::Tensor>>& sets, bool backward,
                 bool keep, Monotonic::time_point deadline) {
  json described = json::array();
  for (const auto& set : sets) {
    json inputs = json::array();
    for (const torch::Tensor& t : set)
      inputs.push_back({{"dtype", DtypeCodeOf(t.scalar_type())}, {"shape", t.sizes().vec()}});
    described.push_back(inputs);
  }
  // The clock runs while the runner may: from continuing it to having it stopped again, for the allocation
  // and for the calls. Not while the judge writes the inputs (the runner is stopped then).
  Window window;
  auto start = Monotonic::now();
  const json allocated = runner.Ask({{"cmd", "alloc"}, {"sets", described}}, deadline);
  window.ms = MillisecondsSince(start);
  if (!allocated.is_object() || !allocated.contains("inputs") || !allocated["inputs"].is_array() ||
      allocated["inputs"].size() != sets.size()) {
    throw std::runtime_error(runner.name() + " did not give one input list per call");
  }
  std::vector<std::vector<uint64_t>> addresses;
  for (size_t s = 0; s < sets.size(); ++s) {
    const json& list = allocated["inputs"][s];
    if (!list.is_array() || list.size() != sets[s].size()) {
      throw std::runtime_error(runner.name() + " did not give an address per input");
    }
    addresses.emplace_back();
    for (size_t i = 0; i < sets[s].size(); ++i) {
      if (!list[i].is_number_unsigned())
        throw std::runtime_error(runner.name() + " gave an address that is not one");
      const torch::Tensor t = sets[s][i].contiguous();
      addresses.back().push_back(list[i].get<uint64_t>());
      if (t.nbytes() > 0) runner.program().Write(addresses.back().back(), t.data_ptr(), t.nbytes());
    }
  }
  start = Monotonic::now();
  const json ran = runner.Ask({{"cmd", "run"}, {"backward", backward}}, deadline);
  window.ms += MillisecondsSince(start);
  if (!ran.is_object() || !ran.contains("calls") || !ran["calls"].is_array() ||
      ran["calls"].size() != sets.size()) {
    throw std::runtime_error(runner.name() + " did not answer one result per call");
  }
  if (!keep) return window;
  int64_t budget = kMaxWindowBytes;
  for (size_t s = 0; s < sets.size(); ++s) {
    const json& r = ran["calls"][s];
    if (!r.is_object()) throw std::runtime_error(runner.name() + " answered a result that is not an object");
    ops::CaseRun run;
    run.error = Text(r, "error");
    run.backward_error = Text(r, "backward_error");
    run.output_requires_grad = r.contains("output_requires_grad") && r["output_requires_grad"] == true;
    if (run.error.empty()) {
      run.output = ReadRemote(runner.program(), r.value("output", json()), &budget);
      if (!run.output.defined()) run.error = "returned no output";
      const json grads = r.value("grads", json::array());
      if (!grads.is_array() || grads.size() != sets[s].size()) {
        throw std::runtime_error(runner.name() + " did not answer a gradient (or null) per input");
      }
      for (const json& g : grads) run.grads.push_back(ReadRemote(runner.program(), g, &budget));
    }
    for (size_t i = 0; i < sets[s].size(); ++i) {  // the inputs after the call, where they were written
      const torch::Tensor& like = sets[s][i];
      torch::Tensor after = torch::empty(like.sizes(), like.options().device(torch::kCPU));
      if (after.nbytes() > 0) runner.program().Read(addresses[s][i], after.data_ptr(), after.nbytes());
      run.inputs_after.push_back(after);
    }
    window.runs.push_back(std::move(run));
  }
  return window;
}

}  // namespace

TimedCallServer::TimedCallServer(const std::string& folder) {
  commands_ = open((folder + "/commands").c_str(), O_RDONLY | O_CLOEXEC);
  replies_ = open((folder + "/replies").c_str(), O_WRONLY | O_CLOEXEC);
  if (commands_ < 0 || replies_ < 0) {
    throw std::runtime_error(folder + ": the judge's FIFOs cannot be opened: " + std::strerror(errno));
  }
}

TimedCallServer::~TimedCallServer() {
  for (int fd : {commands_, replies_}) {
    if (fd >= 0) close(fd);
  }
}

json TimedCallServer::Next() {
  for (;;) {
    const size_t newline = pending_.find('\n');
    if (newline != std::string::npos) {
      const std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      return ParseBoundedJson(line, kMaxLine);
    }
    if (pending_.size() > kMaxLine) throw std::runtime_error("a command over 1 MiB");
    char buffer[65536];
    const ssize_t n = read(commands_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("the judge is gone");
    pending_.append(buffer, static_cast<size_t>(n));
  }
}

void TimedCallServer::Reply(const json& reply) {
  const std::string line = reply.dump() + "\n";
  for (size_t at = 0; at < line.size();) {
    const ssize_t n = write(replies_, line.data() + at, line.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(std::string("replying: ") + std::strerror(errno));
    at += static_cast<size_t>(n);
  }
}

void TimedCallServer::Serve(const ops::OpCall& call, const std::string& variant, const DeviceInfo& dev,
                            uint64_t upstream_seed) {
  const torch::Tensor upstream = Upstream(call, upstream_seed);
  // Memory freed stays in the process, as in a training process's steady state: a window's calls then take
  // no page faults for memory an earlier window used (glibc otherwise returns the heap's top to the kernel
  // between windows, and the next window faults it in again: 2,400 faults, +26 ms, in a 11 ms call here).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  std::vector<std::vector<torch::Tensor>> sets;  // host tensors the judge writes
  std::vector<torch::Tensor> held;  // what the last window returned, alive until the next command
  Reply({{"ready", true}});
  for (;;) {
    const json command = Next();
    const std::string cmd = command.value("cmd", "");
    held.clear();
    if (cmd == "quit") return;
    if (cmd == "alloc") {
      // The same room as the last window's when the shapes are the same (they are for most ops): its pages
      // are the ones the judge wrote last time.
      std::vector<std::vector<torch::Tensor>> room;
      json addresses = json::array();
      size_t s = 0;
      for (const json& inputs : command.at("sets")) {
        room.emplace_back();
        json list = json::array();
        size_t i = 0;
        for (const json& d : inputs) {
          const auto shape = d.at("shape").get<std::vector<int64_t>>();
          const c10::ScalarType dtype = DtypeOfCode(d.at("dtype").get<int64_t>());
          const bool same = s < sets.size() && i < sets[s].size() && sets[s][i].sizes().vec() == shape &&
                            sets[s][i].scalar_type() == dtype;
          room.back().push_back(same ? sets[s][i] : torch::empty(shape, dtype));
          list.push_back(reinterpret_cast<uint64_t>(room.back().back().data_ptr()));
          ++i;
        }
        addresses.push_back(list);
        ++s;
      }
      sets = std::move(room);
      Reply({{"inputs", addresses}});
    } else if (cmd == "run") {
      const bool backward = command.at("backward").get<bool>();
      json calls = json::array();
      for (std::vector<torch::Tensor>& set : sets) {
        json result = {{"error", ""}, {"backward_error", ""}, {"output", nullptr}, {"grads", json::array()}};
        std::vector<torch::Tensor> leaves;
        for (const torch::Tensor& t : set) {
          leaves.push_back(t.to(dev.device).detach().requires_grad_(backward && t.is_floating_point()));
        }
        torch::Tensor out;
        try {
          if (backward) {
            out = call.run(variant, leaves);
          } else {
            torch::NoGradGuard no_grad;
            out = call.run(variant, leaves);
          }
        } catch (const std::exception& e) {
          result["error"] = std::string("threw: ") + e.what();
        }
        if (out.defined() && backward) {
          try {
            out.backward(upstream.to(out.options()));
          } catch (const std::exception& e) {
            result["backward_error"] = std::string("its backward threw: ") + e.what();
          }
        }
        if (out.defined()) {
          result["output_requires_grad"] = out.requires_grad();
          held.push_back(out.detach().to(torch::kCPU).contiguous());
          result["output"] = Describe(held.back());
        }
        for (size_t i = 0; i < leaves.size(); ++i) {
          const torch::Tensor grad = leaves[i].grad();
          if (grad.defined()) {
            held.push_back(grad.detach().to(torch::kCPU).contiguous());
            result["grads"].push_back(Describe(held.back()));
          } else {
            result["grads"].push_back(nullptr);
          }
          if (dev.is_cuda())
            set[i].copy_(leaves[i].detach());  // the inputs after the call, where the judge reads
        }
        calls.push_back(result);
      }
      Synchronize(dev);
      Reply({{"calls", calls}});
    } else if (cmd == "peak") {
      double peak = -1;
      if (!dev.is_cuda() && InstallCountingCpuAllocator() && !sets.empty()) {
        peak = PeakMb(call, variant, sets.front(), upstream);
      }
      Reply({{"peak_mb", peak}});
    } else {
      throw std::runtime_error("unknown command '" + cmd + "'");
    }
  }
}

ClockedTiming ClockTiming(const ops::OpCall& call, const std::string& variant, const DeviceInfo& dev,
                          sandbox::Options reference, sandbox::Options candidate, int rounds,
                          uint64_t upstream_seed) {
  ClockedTiming result;
  const ops::Op& op = ops::OpRegistry().At(call.op);
  const double seconds = std::max(reference.limits.wall_seconds, candidate.limits.wall_seconds);
  const auto deadline = Monotonic::now() + std::chrono::duration_cast<Monotonic::duration>(
                                                 std::chrono::duration<double>(seconds));
  Runner ref("the reference's runner", std::move(reference));
  Runner mine("the candidate's runner", std::move(candidate));
  Runner* current = &ref;  // whose step failed, when one does
  // The judge's own tensor work (drawing inputs) on one thread while runners are timed: no thread of its
  // pool spins on a core a runner needs (at 2 threads on 2 cores the windows after a draw ran up to 3x
  // slower). Restored for the comparison.
  const int judge_threads = at::get_num_threads();
  at::set_num_threads(1);
  struct Restore {
    int threads;
    ~Restore() { at::set_num_threads(threads); }
  } restore{judge_threads};
  try {
    ref.Start();
    mine.Start();
    ref.AwaitReady(deadline);
    current = &mine;
    mine.AwaitReady(deadline);

    // The clock's own cost: empty windows of the reference's runner.
    current = &ref;
    std::vector<double> empty;
    for (int w = 0; w < kOverheadWindows; ++w) empty.push_back(RunWindow(ref, {}, true, false, deadline).ms);
    const double overhead_ms = Summarize(empty).median;
    // Warm-up, one call a window, until a round's windows fault no page in either runner (the kernel's
    // count: their heaps have grown to what a window needs).
    const std::vector<std::vector<torch::Tensor>> warmup = FreshSets(call, 1);
    double reference_call_ms = 0;
    int warmup_rounds = 0;
    for (bool faulted = true;
         warmup_rounds < kMinWarmupRounds || (faulted && warmup_rounds < kMaxWarmupRounds); ++warmup_rounds) {
      const int64_t before = ref.program().MinorFaults() + mine.program().MinorFaults();
      for (bool backward : {false, true}) {
        current = &ref;
        const double ms = RunWindow(ref, warmup, backward, false, deadline).ms;
        if (backward) reference_call_ms = ms;
        current = &mine;
        RunWindow(mine, warmup, backward, false, deadline);
      }
      faulted = ref.program().MinorFaults() + mine.program().MinorFaults() > before;
    }

    // Calls per window: the reference's calls about kWindowMs long, their inputs bounded.
    int64_t set_bytes = 1;
    for (const torch::Tensor& t : warmup.front()) set_bytes += static_cast<int64_t>(t.nbytes());
    const double call_ms = std::max(reference_call_ms - overhead_ms, 1e-3);
    int per_window = static_cast<int>(std::ceil(kWindowMs / call_ms));
    per_window = std::clamp<int>(per_window, 1, kMaxCallsPerWindow);
    per_window = std::max<int>(1, std::min<int64_t>(per_window, kMaxWindowInputBytes / set_bytes));

    std::map<std::pair<bool, bool>, std::vector<double>>
        ms;  // (candidate?, backward?) -> per call, per round
    int64_t faults[2] = {0, 0};  // page faults in the timed windows: the reference's runner, the candidate's
    for (int round = 0; round < rounds; ++round) {
      for (bool backward : {false, true}) {
        // Each window's inputs from a seed of their own: what a runner saw says nothing of the next.
        const std::vector<std::vector<torch::Tensor>> sets = FreshSets(call, per_window);
        for (int turn = 0; turn < 2; ++turn) {  // rotating order: neither runner always goes first
          const bool is_candidate = (turn + round) % 2 == 1;
          current = is_candidate ? &mine : &ref;
          const int64_t faults_before = current->program().MinorFaults();
          Window window = RunWindow(*current, sets, backward, is_candidate, deadline);
          faults[is_candidate] += current->program().MinorFaults() - faults_before;
          ms[{is_candidate, backward}].push_back(window.ms / per_window);
          for (int k = 0; k < per_window; ++k) {
            ops::GateCase c;
            c.label = "timed round " + std::to_string(round + 1) +
                      (per_window > 1 ? ", call " + std::to_string(k + 1) : std::string()) +
                      (backward ? "" : ", forward only");
            c.inputs = sets[static_cast<size_t>(k)];
            c.upstream_seed = upstream_seed;
            if (!backward) {
              c.forward_only = true;
              c.mode = ops::GateCase::Mode::kNoGrad;
            }
            if (!is_candidate) continue;
            (backward ? result.cases : result.forward_cases).push_back(std::move(c));
            (backward ? result.runs : result.forward_runs)
                .push_back(std::move(window.runs[static_cast<size_t>(k)]));
          }
        }
      }
    }
    current = &ref;
    const json ref_peak = ref.Ask({{"cmd", "peak"}}, deadline);
    current = &mine;
    const json my_peak = mine.Ask({{"cmd", "peak"}}, deadline);

    const auto ratios = [&](bool backward) {
      std::vector<double> r;
      for (int round = 0; round < rounds; ++round) {
        r.push_back(ms[{false, backward}][static_cast<size_t>(round)] /
                    ms[{true, backward}][static_cast<size_t>(round)]);
      }
      return r;
    };
    const SeriesStats mine_total = Summarize(ms[{true, true}]);
    json timing = {{"clock", "judge"},
                   {"calls_per_window", per_window},
                   {"warmup_rounds", warmup_rounds},
                   {"page_faults", faults[1]},
                   {"reference_page_faults", faults[0]},
                   {"clock_overhead_ms", overhead_ms},
                   {"speedup", MedianInterval(ratios(true))},
                   {"speedup_forward", MedianInterval(ratios(false))},
                   {"forward_ms", MsSummary(Summarize(ms[{true, false}]))},
                   {"forward_backward_ms", MsSummary(mine_total)},
                   {"reference_forward_ms", MsSummary(Summarize(ms[{false, false}]))},
                   {"reference_forward_backward_ms", MsSummary(Summarize(ms[{false, true}]))},
                   {"shapes", call.Shapes()},
                   {"reference", op.reference}};
    const auto peak = [](const json& reply) {
      return reply.is_object() && reply.contains("peak_mb") && reply["peak_mb"].is_number() &&
                     std::isfinite(reply["peak_mb"].get<double>()) && reply["peak_mb"].get<double>() >= 0
                 ? std::optional<double>(reply["peak_mb"].get<double>())
                 : std::nullopt;
    };
    if (const auto p = peak(my_peak)) timing["peak_mb"] = *p;
    if (const auto p = peak(ref_peak)) timing["reference_peak_mb"] = *p;
    if (call.bytes_moved) {
      const double bytes = call.bytes_moved(true);
      timing["bytes_moved_mb"] = bytes / (1 << 20);
      timing["achieved_gb_s"] = bytes / (mine_total.median / 1e3) / 1e9;
      timing["bandwidth_share"] = bytes / (mine_total.median / 1e3) / MeasureCopyBandwidth(dev);
    }
    result.timing = timing;
    result.reference = ref.End(/*ask=*/true);
    result.candidate = mine.End(/*ask=*/true);
    if (!result.reference.ok()) result.judge_problem = "the reference's runner " + result.reference.Reason();
    return result;
  } catch (const RunnerEnded&) {
    // Its sandbox's outcome says why (the caller's verdict); the other runner is ended below.
  } catch (const Overdue& e) {
    result.timed_out = e.what();
  } catch (const std::exception& e) {
    (current == &ref ? result.judge_problem : result.problem) = e.what();
  }
  result.timing = nullptr;
  result.reference = ref.End();
  result.candidate = mine.End();
  if (current == &ref && result.judge_problem.empty() && result.timed_out.empty()) {
    result.judge_problem =
        "the reference's runner " + result.reference.Reason() + ": " + result.reference.stderr_text;
  }
  return result;
}

}  // namespace frontier::lab
