#include "worker/profile/profile_summary.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "worker/host.h"
#include "worker/profile/op_class.h"

namespace frontier {
namespace {

using json = nlohmann::json;

// Operators listed in the result (the full table is in operators.json).
constexpr int kTopOperators = 15;
// A call whose bytes were not recorded is estimated from its shapes at this
// many bytes per element (docs/profiling.md).
constexpr int64_t kAssumedElementBytes = 4;
// On the CPU, an operator call that spends less than this much of its
// thread's CPU time (wall time where the profiler records no CPU time), its
// nested calls included, is a small call: its time is the framework's
// (dispatch, the profiler's bookkeeping), not its work's. A LibTorch dispatch
// costs a few microseconds, a convolution's four nested dispatches 10-20
// (docs/profiling.md, Small calls).
constexpr double kSmallCallCpuUs = 50;

// Elements of a shape, in double: a recording's shapes are the trial's word, and their product may
// not fit 64 bits.
double Elements(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), 1.0, [](double n, int64_t d) { return n * static_cast<double>(d); });
}

// Estimated bytes as a count that sums without overflow: at most 2^40 a call (a recording has at most
// hundreds of thousands of calls).
int64_t ByteCount(double bytes) { return static_cast<int64_t>(std::min(std::max(bytes, 0.0), 1099511627776.0)); }

json Round(double value, double scale = 1e3) { return std::round(value * scale) / scale; }

// A recorded call with what the summary works out about it.
struct OpEvent : ProfiledCall {
  explicit OpEvent(const ProfiledCall& call) : ProfiledCall(call) {}
  int parent = -1;
  double self_us = 0, cuda_self_us = 0, cpu_self_us = 0;
  std::string op_class;
  bool classified_ancestor = false;  // an enclosing call is compute or memory class (its bytes cover this one)
  int outer = -1;       // the outermost compute- or memory-class call enclosing it (or itself); -1: none
  bool small = false;   // that call is a small call: this one's time is overhead
  std::string bound;    // compute | memory | overhead, small calls counted as overhead
  double duration_us() const { return end_us - start_us; }
  double cpu_duration_us() const { return cpu_us >= 0 ? cpu_us : duration_us(); }
};

// Bytes an operator call reads and writes when its tensors were not recorded,
// estimated from its input shapes at kAssumedElementBytes (outputs: the
// largest input for elementwise-like ops, n x m for products; convolution
// outputs are not estimated).
int64_t EstimateBytes(const OpEvent& e) {
  double inputs = 0, largest = 0;
  for (const auto& shape : e.shapes) {
    if (shape.empty()) continue;  // a scalar or a non-tensor argument
    const double n = Elements(shape);
    inputs += n;
    largest = std::max(largest, n);
  }
  double outputs = 0;
  if (e.op_class == "elementwise" || e.op_class == "normalization" || e.op_class == "data_movement") {
    outputs = largest;
  } else if (e.op_class == "compute") {
    // aten::addmm(self, a, b) / aten::mm(a, b) / aten::bmm(a, b): the output is a's rows x b's columns.
    const size_t a = e.name == "aten::addmm" || e.name == "aten::baddbmm" ? 1 : 0;
    if ((e.name == "aten::mm" || e.name == "aten::addmm" || e.name == "aten::bmm" ||
         e.name == "aten::baddbmm") &&
        e.shapes.size() > a + 1 && e.shapes[a].size() >= 2 && e.shapes[a + 1].size() >= 2) {
      const auto& x = e.shapes[a];
      const auto& y = e.shapes[a + 1];
      if (x.back() > 0) outputs = Elements(x) / static_cast<double>(x.back()) * static_cast<double>(y.back());
    } else if (e.name == "aten::linear" && e.shapes.size() >= 2 && !e.shapes[0].empty() &&
               e.shapes[1].size() == 2 && e.shapes[0].back() > 0) {
      // (..., in) x (out, in)^T
      outputs = Elements(e.shapes[0]) / static_cast<double>(e.shapes[0].back()) * static_cast<double>(e.shapes[1][0]);
    }
  }
  return ByteCount((inputs + outputs) * kAssumedElementBytes);
}

struct OpRow {
  std::string name, op_class;
  int64_t calls = 0, small_calls = 0;
  double self_us = 0, total_us = 0, cuda_self_us = 0, cuda_total_us = 0, cpu_self_us = 0;
  double basis_us = 0, small_basis_us = 0;  // self time on the profile's basis; in small calls
  int64_t flops = 0;
  std::string flops_source;
  int64_t bytes = 0;
  std::vector<std::vector<int64_t>> example_shapes;
  std::string dtype;
};

class Summarizer {
 public:
  explicit Summarizer(const ProfileRecording& recording)
      : r_(recording), cuda_(recording.basis == TimeBasis::kCuda) {}

  ProfileSummary Run() {
    ProfileSummary out;
    const int n_steps = static_cast<int>(r_.steps.size());
    std::vector<int> recorded_steps;
    for (const ProfiledStep& s : r_.steps) recorded_steps.push_back(s.step);
    json& profile = out.profile;
    profile = {{"tool", r_.tool},
               {"profiler", r_.profiler},
               {"host", r_.host},
               {"steps", {{"first", r_.first}, {"count", r_.count}, {"recorded", n_steps}}},
               {"cuda", cuda_}};
    if (n_steps == 0) {
      profile["error"] = r_.error.empty() ? "no profiled step was recorded" : r_.error;
      return out;
    }
    const std::vector<OpEvent> calls = Calls();
    double window_us = 0, window_cpu_us = 0;
    bool cpu_recorded = true;
    for (const ProfiledStep& s : r_.steps) {
      window_us += s.end_us - s.start_us;
      window_cpu_us += std::max(0.0, s.thread_cpu_us);
      cpu_recorded = cpu_recorded && s.thread_cpu_us >= 0;
    }
    // Shares are of the profile's basis: on CUDA the operators' CUDA time over
    // the steps' wall time; on the CPU the training thread's CPU time, which
    // time spent waiting for a core on a loaded machine does not inflate, or
    // the wall time where the profiler records no per-call CPU time.
    const bool thread_cpu = r_.basis == TimeBasis::kThreadCpu;
    // The calls' thread CPU times were recorded (frontier-trial's profiler; the SDK's has none).
    const bool per_call_cpu =
        thread_cpu || (cuda_ && !r_.calls.empty() &&
                       std::all_of(r_.calls.begin(), r_.calls.end(), [](const ProfiledCall& c) { return c.cpu_us >= 0; }));
    const double basis_window_us = thread_cpu ? window_cpu_us : window_us;
    const auto basis_self = [&](const OpEvent& c) {
      return cuda_ ? c.cuda_self_us : thread_cpu ? c.cpu_self_us : c.self_us;
    };
    const auto share_of = [&](double us) { return Round(basis_window_us > 0 ? us / basis_window_us : 0, 1e4); };

    std::map<std::string, OpRow> rows;
    std::map<std::string, double> bound_us;
    std::map<std::string, int64_t> bytes_by_dtype;
    double self_sum_us = 0, cpu_self_sum_us = 0, top_level_cuda_us = 0, small_us = 0;
    int64_t small_calls = 0, measured_byte_calls = 0, estimated_byte_calls = 0;
    for (const OpEvent& c : calls) {
      OpRow& row = rows[c.name];
      if (row.calls == 0) {
        row.name = c.name;
        row.op_class = c.op_class;
        row.example_shapes = c.shapes;
        row.dtype = c.dtype;
      }
      ++row.calls;
      row.self_us += c.self_us;
      row.cpu_self_us += c.cpu_self_us;
      row.total_us += c.duration_us();
      row.cuda_self_us += c.cuda_self_us;
      row.cuda_total_us += std::max(0.0, c.cuda_us);
      row.basis_us += basis_self(c);
      if (c.small) {
        row.small_basis_us += basis_self(c);
        small_us += basis_self(c);
        if (c.outer == static_cast<int>(&c - calls.data())) {  // the small call itself, not a nested one
          ++row.small_calls;
          ++small_calls;
        }
      }
      if (!c.classified_ancestor && BoundClass(c.op_class) != "overhead") {
        const bool measured = c.bytes >= 0;
        const int64_t bytes = measured ? c.bytes : EstimateBytes(c);
        row.bytes += bytes;
        bytes_by_dtype[measured ? (c.dtype.empty() ? "other" : c.dtype) : "unrecorded (fp32 assumed)"] += bytes;
        ++(measured ? measured_byte_calls : estimated_byte_calls);
      }
      if (c.estimated_flops > 0) {
        row.flops += c.estimated_flops;
        row.flops_source = c.estimated_flops_source;
      }
      bound_us[c.bound] += basis_self(c);
      self_sum_us += c.self_us;
      cpu_self_sum_us += c.cpu_self_us;
      if (c.parent < 0) top_level_cuda_us += std::max(0.0, c.cuda_us);
    }
    for (const auto& [op, n] : r_.flops_by_op) {
      OpRow& row = rows[op];
      if (row.name.empty()) {  // counted, yet not recorded
        row.name = op;
        row.op_class = OperatorClass(op);
      }
      row.flops += n;
      row.flops_source = "flop_counter";
    }

    std::vector<const OpRow*> ordered;
    for (const auto& [name, row] : rows) ordered.push_back(&row);
    std::sort(ordered.begin(), ordered.end(), [&](const OpRow* a, const OpRow* b) {
      return a->basis_us != b->basis_us ? a->basis_us > b->basis_us : a->name < b->name;
    });
    const auto row_json = [&](const OpRow& r) {
      json j = {{"name", r.name},
                {"class", r.op_class},
                {"bound", BoundClass(r.op_class)},
                {"calls", r.calls},
                {"calls_per_step", Round(static_cast<double>(r.calls) / n_steps)},
                {"small_calls_per_step", Round(static_cast<double>(r.small_calls) / n_steps)},
                {"self_cpu_ms", Round(r.self_us / 1e3, 1e4)},
                {"self_cpu_ms_per_step", Round(r.self_us / 1e3 / n_steps, 1e4)},
                {"cpu_total_ms", Round(r.total_us / 1e3, 1e4)},
                {"share", share_of(r.basis_us)},
                {"small_share", share_of(r.small_basis_us)},
                {"bytes_per_step", r.bytes / n_steps}};
      if (per_call_cpu) j["self_thread_cpu_ms_per_step"] = Round(r.cpu_self_us / 1e3 / n_steps, 1e4);
      if (!r.dtype.empty()) j["dtype"] = r.dtype;
      if (r.flops > 0) {
        j["flops_per_step"] = r.flops / n_steps;
        j["flops_source"] = r.flops_source;
        // FLOPs are charged to the outermost counted call (aten::conv2d, not its
        // aten::mkldnn_convolution): its inclusive time is the time they took.
        const double seconds = (cuda_ && r.cuda_total_us > 0 ? r.cuda_total_us : r.total_us) / 1e6;
        if (seconds > 0) j["achieved_flops_per_s"] = static_cast<double>(r.flops) / seconds;
      } else {
        j["flops_per_step"] = nullptr;
      }
      if (cuda_) {
        j["self_cuda_ms"] = Round(r.cuda_self_us / 1e3, 1e4);
        j["self_cuda_ms_per_step"] = Round(r.cuda_self_us / 1e3 / n_steps, 1e4);
        j["cuda_total_ms"] = Round(r.cuda_total_us / 1e3, 1e4);
      }
      if (!r.example_shapes.empty()) j["input_dims"] = r.example_shapes;
      return j;
    };

    json table = json::array();
    for (const OpRow* r : ordered) table.push_back(row_json(*r));
    json top = json::array();
    for (size_t i = 0; i < ordered.size() && static_cast<int>(i) < kTopOperators; ++i) top.push_back(table[i]);

    struct ClassTotals {
      double basis_us = 0, small_basis_us = 0, cpu_self_us = 0, self_us = 0, cuda_self_us = 0;
      int64_t flops = 0, bytes = 0, calls = 0;
    };
    std::map<std::string, ClassTotals> by_class;
    for (const auto& [name, r] : rows) {
      ClassTotals& t = by_class[r.op_class];
      t.basis_us += r.basis_us;
      t.small_basis_us += r.small_basis_us;
      t.cpu_self_us += r.cpu_self_us;
      t.self_us += r.self_us;
      t.cuda_self_us += r.cuda_self_us;
      t.flops += r.flops;
      t.bytes += r.bytes;
      t.calls += r.calls;
    }
    json classes = json::object();
    int64_t all_flops = 0, all_bytes = 0;
    for (const auto& [name, t] : by_class) {
      json c = {{"share", share_of(t.basis_us)},
                {"small_share", share_of(t.small_basis_us)},
                {"calls_per_step", Round(static_cast<double>(t.calls) / n_steps)},
                {"flops_per_step", t.flops / n_steps},
                {"bytes_per_step", t.bytes / n_steps},
                {"bytes_per_flop",
                 t.flops > 0 ? json(Round(static_cast<double>(t.bytes) / t.flops, 1e4)) : json(nullptr)}};
      if (per_call_cpu) c["self_thread_cpu_ms_per_step"] = Round(t.cpu_self_us / 1e3 / n_steps, 1e4);
      if (!thread_cpu && !cuda_) c["self_cpu_ms_per_step"] = Round(t.self_us / 1e3 / n_steps, 1e4);
      if (cuda_) c["self_cuda_ms_per_step"] = Round(t.cuda_self_us / 1e3 / n_steps, 1e4);
      const double seconds = (cuda_ ? t.cuda_self_us : thread_cpu ? t.cpu_self_us : t.self_us) / 1e6;
      if (t.flops > 0 && seconds > 0) c["achieved_flops_per_s"] = static_cast<double>(t.flops) / seconds;
      classes[name] = c;
      all_flops += t.flops;
      all_bytes += t.bytes;
    }
    json by_bound = json::object();
    for (const char* bound : {"compute", "memory", "overhead"}) by_bound[bound] = share_of(bound_us[bound]);
    if (cuda_) {
      // The device idles between kernels while the CPU launches the next ones.
      by_bound["gpu_idle"] = share_of(std::max(0.0, window_us - top_level_cuda_us));
    } else {
      by_bound["outside_operators"] =
          share_of(std::max(0.0, basis_window_us - (thread_cpu ? cpu_self_sum_us : self_sum_us)));
    }

    profile["time_basis"] = cuda_        ? "the profiled steps' wall time, by the operators' CUDA time"
                            : thread_cpu ? "the training thread's CPU time in the profiled steps"
                                         : "the profiled steps' wall time";
    profile["window_ms"] = Round(window_us / 1e3, 1e4);
    profile["window_ms_per_step"] = Round(window_us / 1e3 / n_steps, 1e4);
    if (cpu_recorded) profile["window_thread_cpu_ms"] = Round(window_cpu_us / 1e3, 1e4);
    profile["op_self_cpu_ms"] = Round(self_sum_us / 1e3, 1e4);
    profile["self_time_coverage"] = Round(window_us > 0 ? self_sum_us / window_us : 0, 1e4);
    if (per_call_cpu) profile["op_self_thread_cpu_ms"] = Round(cpu_self_sum_us / 1e3, 1e4);
    // The check that the operators account for the profiled time: on the CPU
    // their time over the window's on the same basis.
    profile["coverage"] = cuda_ ? Round(window_us > 0 ? std::min(1.0, top_level_cuda_us / window_us) : 0, 1e4)
                                : share_of(thread_cpu ? cpu_self_sum_us : self_sum_us);
    profile["calls"] = calls.size();
    profile["operators"] = rows.size();
    profile["small_calls"] = {
        {"threshold", cuda_        ? "CUDA time below the call's CPU (launch) time"
                      : thread_cpu ? "under " + std::to_string(static_cast<int>(kSmallCallCpuUs)) +
                                         " us of thread CPU time"
                                   : "under " + std::to_string(static_cast<int>(kSmallCallCpuUs)) +
                                         " us of wall time"},
        {"calls_per_step", Round(static_cast<double>(small_calls) / n_steps)},
        {"share", share_of(small_us)}};
    profile["flops_per_step"] = all_flops / n_steps;
    profile["bytes_per_step"] = all_bytes / n_steps;
    json dtypes = json::object();
    for (const auto& [dtype, bytes] : bytes_by_dtype) dtypes[dtype] = bytes / n_steps;
    profile["bytes_per_step_by_dtype"] = dtypes;
    profile["bytes_from_recorded_tensors"] =
        Round(measured_byte_calls + estimated_byte_calls > 0
                  ? static_cast<double>(measured_byte_calls) / (measured_byte_calls + estimated_byte_calls)
                  : 0,
              1e4);
    profile["bytes_per_flop"] =
        all_flops > 0 ? json(Round(static_cast<double>(all_bytes) / all_flops, 1e4)) : json(nullptr);
    profile["by_bound"] = by_bound;
    profile["by_class"] = classes;
    profile["top_operators"] = top;
    if (!r_.error.empty()) profile["error"] = r_.error;

    out.operators = {{"trial_id", r_.trial_id}, {"steps", recorded_steps}, {"operators", table}};
    out.trace = Trace(calls, recorded_steps);
    return out;
  }

 private:
  // The calls inside the recorded steps, nested on each thread by their
  // intervals, with self times, classes and small calls worked out.
  std::vector<OpEvent> Calls() const {
    std::vector<OpEvent> calls;
    for (const ProfiledCall& c : r_.calls)
      if (InRecordedSteps(r_, c)) calls.emplace_back(c);
    std::sort(calls.begin(), calls.end(), [](const OpEvent& a, const OpEvent& b) {
      if (a.thread != b.thread) return a.thread < b.thread;
      if (a.start_us != b.start_us) return a.start_us < b.start_us;
      return a.end_us > b.end_us;
    });
    std::vector<int> stack;
    for (size_t i = 0; i < calls.size(); ++i) {
      OpEvent& c = calls[i];
      c.op_class = OperatorClass(c.name);
      while (!stack.empty() &&
             (calls[stack.back()].thread != c.thread || calls[stack.back()].end_us <= c.start_us)) {
        stack.pop_back();
      }
      if (!stack.empty()) {
        OpEvent& parent = calls[stack.back()];
        c.parent = stack.back();
        c.classified_ancestor = parent.classified_ancestor || BoundClass(parent.op_class) != "overhead";
        c.outer = parent.outer;
      }
      if (c.outer < 0 && BoundClass(c.op_class) != "overhead") {
        c.outer = static_cast<int>(i);
        c.small = IsSmall(c);
      } else if (c.outer >= 0) {
        c.small = calls[c.outer].small;
      }
      c.bound = c.small ? "overhead" : BoundClass(c.op_class);
      c.self_us = c.duration_us();
      c.cpu_self_us = c.cpu_duration_us();
      c.cuda_self_us = std::max(0.0, c.cuda_us);
      stack.push_back(static_cast<int>(i));
    }
    for (const OpEvent& c : calls) {
      if (c.parent < 0) continue;
      calls[c.parent].self_us -= c.duration_us();
      calls[c.parent].cpu_self_us -= c.cpu_duration_us();
      if (c.cuda_us > 0) calls[c.parent].cuda_self_us -= c.cuda_us;
    }
    for (OpEvent& c : calls) {
      c.self_us = std::max(0.0, c.self_us);
      c.cpu_self_us = std::max(0.0, c.cpu_self_us);
      c.cuda_self_us = std::max(0.0, c.cuda_self_us);
    }
    return calls;
  }

  // A small call (docs/profiling.md): on CUDA its kernels take less time than
  // launching them did (CUDA time below the call's CPU time); on the CPU it
  // spends less than kSmallCallCpuUs of its thread's CPU time (wall time
  // where that was not recorded).
  bool IsSmall(const OpEvent& c) const {
    if (cuda_) return c.cuda_us >= 0 && c.cuda_us < c.duration_us();
    return c.cpu_duration_us() < kSmallCallCpuUs;
  }

  // trace.json's text, written here rather than built as a json tree: a profiled step of an
  // attention block on this CPU makes ~27,000 calls, and the tree (a map per event and per args)
  // took 1.1 s of the 1.2 s the summary of three such steps took. The same bytes as
  // nlohmann::json's dump of {"displayTimeUnit", "otherData", "traceEvents"} (keys sorted).
  std::string Trace(const std::vector<OpEvent>& calls, const std::vector<int>& recorded_steps) const {
    const double origin_us = r_.steps.front().start_us;
    const int pid = r_.pid;
    std::map<uint64_t, int> tids;
    for (const OpEvent& c : calls) tids.emplace(c.thread, static_cast<int>(tids.size()));
    const json other = {
        {"trial_id", r_.trial_id}, {"profiler", r_.profiler}, {"host", r_.host}, {"steps", recorded_steps}};
    std::string out = R"({"displayTimeUnit":"ms","otherData":)" + other.dump() + R"(,"traceEvents":[)";
    out.reserve(out.size() + 64 * 1024 + calls.size() * 256);
    const auto add = [&out](const json& event) {
      if (out.back() != '[') out += ',';
      out += event.dump();
    };
    add({{"name", "process_name"},
         {"ph", "M"},
         {"pid", pid},
         {"args", {{"name", r_.process + " " + r_.trial_id}}}});
    for (const auto& [thread, tid] : tids) {
      add({{"name", "thread_name"},
           {"ph", "M"},
           {"pid", pid},
           {"tid", tid},
           {"args", {{"name", tid == 0 ? "training thread" : "thread " + std::to_string(thread)}}}});
    }
    for (size_t i = 0; i < r_.steps.size(); ++i) {
      add({{"name", "ProfilerStep#" + std::to_string(recorded_steps[i])},
           {"ph", "X"},
           {"cat", "step"},
           {"pid", pid},
           {"tid", 0},
           {"ts", Round(r_.steps[i].start_us - origin_us)},
           {"dur", Round(r_.steps[i].end_us - r_.steps[i].start_us)}});
    }
    const auto number = [&out](const json& value) { out += value.dump(); };
    const auto text = [&out](const std::string& value) { out += json(value).dump(); };
    for (const OpEvent& c : calls) {
      // Keys in nlohmann's (sorted) order: args{bound, bytes, class, cpu_us, cuda_us, dtype, input_dims,
      // self_us}, cat, dur, name, ph, pid, tid, ts.
      if (out.back() != '[') out += ',';
      out += R"({"args":{"bound":)";
      text(c.bound);
      if (c.bytes >= 0) {
        out += R"(,"bytes":)";
        number(c.bytes);
      }
      out += R"(,"class":)";
      text(c.op_class);
      if (c.cpu_us >= 0) {
        out += R"(,"cpu_us":)";
        number(Round(c.cpu_us));
      }
      if (c.cuda_us >= 0) {
        out += R"(,"cuda_us":)";
        number(Round(c.cuda_us));
      }
      if (!c.dtype.empty()) {
        out += R"(,"dtype":)";
        text(c.dtype);
      }
      if (!c.shapes.empty()) {
        out += R"(,"input_dims":[)";
        for (size_t i = 0; i < c.shapes.size(); ++i) {
          out += i == 0 ? "[" : ",[";
          for (size_t j = 0; j < c.shapes[i].size(); ++j) {
            if (j > 0) out += ',';
            out += std::to_string(c.shapes[i][j]);
          }
          out += ']';
        }
        out += ']';
      }
      out += R"(,"self_us":)";
      number(Round(c.self_us));
      out += R"(},"cat":"cpu_op","dur":)";
      number(Round(c.duration_us()));
      out += R"(,"name":)";
      text(c.name);
      out += R"(,"ph":"X","pid":)";
      out += std::to_string(pid);
      out += R"(,"tid":)";
      out += std::to_string(tids.at(c.thread));
      out += R"(,"ts":)";
      number(Round(c.start_us - origin_us));
      out += '}';
    }
    out += "]}";
    return out;
  }

  const ProfileRecording& r_;
  const bool cuda_;
};

}  // namespace

ProfileSummary SummarizeProfile(const ProfileRecording& recording) { return Summarizer(recording).Run(); }

bool InRecordedSteps(const ProfileRecording& recording, const ProfiledCall& call) {
  if (call.end_us < call.start_us) return false;
  return std::any_of(recording.steps.begin(), recording.steps.end(), [&](const ProfiledStep& s) {
    return call.start_us >= s.start_us && call.start_us <= s.end_us;
  });
}

void WriteProfileArtifacts(const std::filesystem::path& folder, ProfileSummary* summary) {
  namespace fs = std::filesystem;
  json& profile = summary->profile;
  if (summary->trace.empty()) return;
  std::error_code ec;
  const fs::path dir = fs::absolute(folder, ec).lexically_normal();
  profile["artifact_dir"] = dir.string();
  fs::create_directories(dir, ec);
  if (ec) {
    profile["error"] = "cannot write the trace: cannot create " + dir.string() + ": " + ec.message();
    return;
  }
  if (fs::is_symlink(dir, ec) || !fs::is_directory(fs::symlink_status(dir, ec))) {
    profile["error"] = "cannot write the trace: " + dir.string() + " is not a folder (a symbolic link?)";
    return;
  }
  const fs::path trace = dir / "trace.json";
  if (std::string problem = WriteNewFile(trace.string(), summary->trace + "\n"); !problem.empty()) {
    profile["error"] = "cannot write the trace: " + problem;
    return;
  }
  profile["trace"] = trace.string();
  const fs::path operators = dir / "operators.json";
  if (std::string problem = WriteNewFile(operators.string(), summary->operators.dump() + "\n"); !problem.empty()) {
    profile["error"] = "cannot write the operator table: " + problem;
    return;
  }
  profile["operators_file"] = operators.string();
}

}  // namespace frontier
