#include "worker/trial/measure/profiler.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/csrc/profiler/util.h>
#include <torch/version.h>

#include "worker/host.h"
#include "worker/trial/measure/flop_counter.h"
#include "worker/trial/measure/op_class.h"

namespace frontier {
namespace {

using json = nlohmann::json;
namespace legacy = torch::autograd::profiler;
namespace profiler_impl = torch::profiler::impl;

// Operators listed in the result (the full table is in operators.json).
constexpr int kTopOperators = 15;
// A call whose own recorder saw no tensors (docs/profiling.md) is estimated
// from the legacy profiler's shapes at this many bytes per element.
constexpr int64_t kAssumedElementBytes = 4;
// On the CPU, an operator call that spends less than this much of the
// training thread's CPU time, its nested calls included, is a small call:
// its time is the framework's (dispatch, the profiler's bookkeeping), not its
// work's. A LibTorch dispatch costs a few microseconds, a convolution's four
// nested dispatches 10-20 (docs/profiling.md, Small calls).
constexpr double kSmallCallCpuUs = 50;

double ThreadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

// What the legacy profiler does not record about a call: the CPU time of the
// thread running it at its start and end, and the bytes of its tensor inputs
// and outputs by their real element size.
struct CallRecord {
  double cpu_start_us = 0, cpu_end_us = 0;
  int64_t bytes = 0;
  std::string dtype;  // the first floating-point tensor's, e.g. "BFloat16"; "" when none
};

// Filled by a thread-local RecordFunction callback while the profiler records;
// keyed by the RecordFunction handle, which the legacy profiler's events carry.
struct CallRecorder {
  std::mutex mutex;
  std::unordered_map<uint64_t, CallRecord> records;
};
std::atomic<CallRecorder*> g_recorder{nullptr};

struct RecorderContext : at::ObserverContext {
  double cpu_start_us = 0;
  int64_t input_bytes = 0;
  std::string dtype;
};

int64_t TensorBytes(const at::Tensor& t, std::string* dtype) {
  if (!t.defined()) return 0;
  if (dtype->empty() && t.is_floating_point()) *dtype = c10::toString(t.scalar_type());
  return t.numel() * static_cast<int64_t>(t.element_size());
}

int64_t ValueBytes(const c10::IValue& v, std::string* dtype) {
  if (v.isTensor()) return TensorBytes(v.toTensor(), dtype);
  int64_t bytes = 0;
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) bytes += TensorBytes(t, dtype);
  }
  return bytes;
}

std::unique_ptr<at::ObserverContext> RecordStart(const at::RecordFunction& fn) {
  if (g_recorder.load() == nullptr) return nullptr;
  auto context = std::make_unique<RecorderContext>();
  context->cpu_start_us = ThreadCpuUs();
  try {
    for (const c10::IValue& v : fn.inputs()) context->input_bytes += ValueBytes(v, &context->dtype);
  } catch (const std::exception&) {  // an opaque tensor without a size: its bytes stay uncounted
  }
  return context;
}

void RecordEnd(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  CallRecorder* recorder = g_recorder.load();
  if (recorder == nullptr || ctx == nullptr) return;
  auto* context = static_cast<RecorderContext*>(ctx);
  CallRecord record;
  record.cpu_end_us = ThreadCpuUs();
  record.cpu_start_us = context->cpu_start_us;
  record.bytes = context->input_bytes;
  record.dtype = std::move(context->dtype);
  try {
    for (const c10::IValue& v : fn.outputs()) record.bytes += ValueBytes(v, &record.dtype);
  } catch (const std::exception&) {
  }
  std::lock_guard<std::mutex> lock(recorder->mutex);
  recorder->records[fn.handle()] = std::move(record);
}
// NVTX range around each profiled step when nsys/ncu wrap the trial.
constexpr const char* kNvtxStepRange = "frontier.profiled_step";

int64_t Elements(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// One operator call of the profiled steps.
struct OpEvent {
  std::string name;
  uint64_t thread = 0;
  uint64_t handle = 0;
  double start_us = 0, end_us = 0;
  double cuda_us = -1;  // CUDA time between the call's start and end events; -1 when not recorded
  double cpu_us = -1;   // CPU time of its thread between its start and end; -1 when not recorded
  int64_t bytes = -1;   // bytes of its tensor inputs and outputs; -1 when not recorded
  std::string dtype;
  std::vector<std::vector<int64_t>> shapes;
  int parent = -1;
  double self_us = 0, cuda_self_us = 0, cpu_self_us = 0;
  std::string op_class;
  bool classified_ancestor =
      false;  // an enclosing call is compute or memory class (its bytes cover this one)
  int outer = -1;      // the outermost compute- or memory-class call enclosing it (or itself); -1: none
  bool small = false;  // that call is a small call: this one's time is overhead
  std::string bound;   // compute | memory | overhead, small calls counted as overhead
  double duration_us() const { return end_us - start_us; }
  double cpu_duration_us() const { return cpu_us >= 0 ? cpu_us : duration_us(); }
};

// Bytes an operator call reads and writes when the recorder saw none of its
// tensors, estimated from its input shapes at kAssumedElementBytes (outputs:
// the largest input for elementwise-like ops, n x m for products; convolution
// outputs are not estimated).
int64_t EstimateBytes(const OpEvent& e) {
  int64_t inputs = 0, largest = 0;
  for (const auto& shape : e.shapes) {
    if (shape.empty()) continue;  // a scalar or a non-tensor argument
    const int64_t n = Elements(shape);
    inputs += n;
    largest = std::max(largest, n);
  }
  int64_t outputs = 0;
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
      outputs = Elements(x) / x.back() * y.back();
    } else if (e.name == "aten::linear" && e.shapes.size() >= 2 && !e.shapes[0].empty() &&
               e.shapes[1].size() == 2) {
      outputs = Elements(e.shapes[0]) / e.shapes[0].back() * e.shapes[1][0];  // (..., in) x (out, in)^T
    }
  }
  return (inputs + outputs) * kAssumedElementBytes;
}

// FLOPs of an aten::convolution_backward call, from the formula of
// flop_counter.h.
std::optional<int64_t> ConvBackwardCallFlops(const OpEvent& e) {
  if (e.name != "aten::convolution_backward" || e.shapes.size() < 3) return std::nullopt;
  return ConvBackwardFlops(e.shapes[0], e.shapes[2]);
}

json Round(double value, double scale = 1e3) { return std::round(value * scale) / scale; }

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

}  // namespace

struct StepProfiler::Impl {
  ProfileSpec spec;
  int first = 0;
  std::string artifact_dir, trial_id;
  bool cuda = false;

  bool recording = false;  // the legacy profiler is on (libtorch: CPU/CUDA; nsys/ncu: NVTX)
  bool failed = false;     // an error stopped the profiling; the trial goes on
  std::string error;
  std::vector<std::pair<double, double>> steps_us;  // profiler-clock start and end of each recorded step
  std::vector<double> steps_cpu_us;  // the training thread's CPU time in each recorded step
  std::vector<int> recorded_steps;
  double step_start_us = 0, step_cpu_start_us = 0;
  CallRecorder recorder;  // CPU times and bytes per call (tool libtorch)
  std::optional<at::CallbackHandle> recorder_handle;
  std::unique_ptr<FlopCounter> flops;  // counts the current profiled step
  std::map<std::string, int64_t> flops_by_op;
  std::unique_ptr<at::RecordFunction> nvtx_step;  // the NVTX range of the current step (nsys/ncu)
  legacy::thread_event_lists events;

  bool InWindow(int step) const { return spec.steps > 0 && step >= first && step < first + spec.steps; }
  bool InProcess() const {
    if (spec.tool == "libtorch") return true;
#ifdef FRONTIER_WITH_CUDA
    return cuda;  // NVTX ranges for nsys/ncu
#else
    return false;
#endif
  }

  static double NowUs() { return static_cast<double>(profiler_impl::getTime()) / 1000.0; }

  void Fail(const std::string& what) {
    if (!failed) error = what;
    failed = true;
  }

  void Start() {
    profiler_impl::ProfilerState state = profiler_impl::ProfilerState::CPU;
#ifdef FRONTIER_WITH_CUDA
    if (cuda) state = profiler_impl::ProfilerState::CUDA;
    if (spec.tool != "libtorch") state = profiler_impl::ProfilerState::NVTX;
#endif
    try {
      legacy::enableProfilerLegacy(
          profiler_impl::ProfilerConfig(state, /*report_input_shapes=*/spec.tool == "libtorch"));
      recording = true;
    } catch (const std::exception& e) {
      Fail(std::string("cannot start the LibTorch profiler: ") + e.what());
      return;
    }
    if (spec.tool != "libtorch") return;
    // Added after the legacy profiler's callback, so the handle it gives a call is set when ours ends.
    g_recorder.store(&recorder);
    recorder_handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&RecordStart, &RecordEnd).needsInputs(true).needsOutputs(true).needsIds(true));
  }

  void Stop() {
    if (!recording) return;
    recording = false;
    nvtx_step.reset();
    if (recorder_handle) {
      at::removeCallback(*recorder_handle);
      recorder_handle.reset();
      g_recorder.store(nullptr);
    }
    try {
      legacy::thread_event_lists lists = legacy::disableProfilerLegacy();
      for (auto& list : lists) events.push_back(std::move(list));
    } catch (const std::exception& e) {
      Fail(std::string("cannot stop the LibTorch profiler: ") + e.what());
    }
  }

  void Before(int step) {
    if (failed || !InWindow(step) || !InProcess()) return;
    if (!recording) Start();
    if (!recording) return;
    if (spec.tool != "libtorch") {
      nvtx_step = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
      if (nvtx_step->isActive()) nvtx_step->before(kNvtxStepRange);
      return;
    }
    try {
      flops = std::make_unique<FlopCounter>();
    } catch (const std::exception& e) {
      Fail(std::string("cannot count FLOPs: ") + e.what());
    }
    step_start_us = NowUs();
    step_cpu_start_us = ThreadCpuUs();
  }

  void After(int step) {
    if (!recording || !InWindow(step)) return;
    if (spec.tool != "libtorch") {
      nvtx_step.reset();
    } else {
      steps_us.emplace_back(step_start_us, NowUs());
      steps_cpu_us.push_back(ThreadCpuUs() - step_cpu_start_us);
      recorded_steps.push_back(step);
      if (flops) {
        for (const auto& [op, n] : flops->by_op()) flops_by_op[op] += n;
        flops.reset();
      }
    }
    if (step == first + spec.steps - 1) Stop();
  }

  // Pairs push/pop events into calls inside the recorded steps, links each
  // to its enclosing call on the same thread and computes self times.
  std::vector<OpEvent> Calls() const {
    std::vector<OpEvent> calls;
    for (const auto& list : events) {
      // handle -> index of the call in `calls` and its push event
      std::unordered_map<uint64_t, std::pair<size_t, const legacy::LegacyEvent*>> open;
      for (const auto& e : list) {
        if (e.kind() == legacy::EventKind::PushRange) {
          OpEvent call;
          call.name = e.name();
          call.thread = e.threadId();
          call.handle = e.handle();
          call.start_us = e.cpuUs();
          call.end_us = -1;
          call.shapes = e.shapes();
          open[e.handle()] = {calls.size(), &e};
          calls.push_back(std::move(call));
        } else if (e.kind() == legacy::EventKind::PopRange) {
          const auto it = open.find(e.handle());
          if (it == open.end()) continue;
          OpEvent& call = calls[it->second.first];
          call.end_us = e.cpuUs();
#ifdef FRONTIER_WITH_CUDA
          if (cuda && it->second.second->hasCuda() && e.hasCuda()) {
            try {
              call.cuda_us = it->second.second->cudaElapsedUs(e);
            } catch (const std::exception&) {
            }
          }
#endif
          open.erase(it);
        }
      }
    }
    // Unfinished calls, and calls outside the recorded steps (between two
    // profiled steps: logging, evaluation) are dropped.
    const auto inside = [&](const OpEvent& c) {
      if (c.end_us < c.start_us) return false;
      for (const auto& [begin, end] : steps_us)
        if (c.start_us >= begin && c.start_us <= end) return true;
      return false;
    };
    calls.erase(std::remove_if(calls.begin(), calls.end(), [&](const OpEvent& c) { return !inside(c); }),
                calls.end());
    std::sort(calls.begin(), calls.end(), [](const OpEvent& a, const OpEvent& b) {
      if (a.thread != b.thread) return a.thread < b.thread;
      if (a.start_us != b.start_us) return a.start_us < b.start_us;
      return a.end_us > b.end_us;
    });
    // The recorder's facts (written while recording; the recording has stopped).
    for (OpEvent& c : calls) {
      const auto it = recorder.records.find(c.handle);
      if (it == recorder.records.end()) continue;
      c.cpu_us = std::max(0.0, it->second.cpu_end_us - it->second.cpu_start_us);
      c.bytes = it->second.bytes;
      c.dtype = it->second.dtype;
    }
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
  // spends less than kSmallCallCpuUs of its thread's CPU time.
  bool IsSmall(const OpEvent& c) const {
    if (cuda) return c.cuda_us >= 0 && c.cuda_us < c.duration_us();
    return c.cpu_duration_us() < kSmallCallCpuUs;
  }

  json TraceJson(const std::vector<OpEvent>& calls, double origin_us) const {
    json events = json::array();
    const int pid = static_cast<int>(getpid());
    std::map<uint64_t, int> tids;
    for (const OpEvent& c : calls) tids.emplace(c.thread, static_cast<int>(tids.size()));
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"args", {{"name", "frontier-trial " + trial_id}}}});
    for (const auto& [thread, tid] : tids) {
      events.push_back(
          {{"name", "thread_name"},
           {"ph", "M"},
           {"pid", pid},
           {"tid", tid},
           {"args", {{"name", tid == 0 ? "training thread" : "thread " + std::to_string(thread)}}}});
    }
    for (size_t i = 0; i < steps_us.size(); ++i) {
      events.push_back({{"name", "ProfilerStep#" + std::to_string(recorded_steps[i])},
                        {"ph", "X"},
                        {"cat", "step"},
                        {"pid", pid},
                        {"tid", 0},
                        {"ts", Round(steps_us[i].first - origin_us)},
                        {"dur", Round(steps_us[i].second - steps_us[i].first)}});
    }
    for (const OpEvent& c : calls) {
      json args = {{"self_us", Round(c.self_us)}, {"class", c.op_class}, {"bound", c.bound}};
      if (c.cpu_us >= 0) args["cpu_us"] = Round(c.cpu_us);
      if (c.bytes >= 0) args["bytes"] = c.bytes;
      if (!c.dtype.empty()) args["dtype"] = c.dtype;
      if (!c.shapes.empty()) args["input_dims"] = c.shapes;
      if (c.cuda_us >= 0) args["cuda_us"] = Round(c.cuda_us);
      events.push_back({{"name", c.name},
                        {"ph", "X"},
                        {"cat", "cpu_op"},
                        {"pid", pid},
                        {"tid", tids.at(c.thread)},
                        {"ts", Round(c.start_us - origin_us)},
                        {"dur", Round(c.duration_us())},
                        {"args", args}});
    }
    return {{"traceEvents", events},
            {"displayTimeUnit", "ms"},
            {"otherData",
             {{"trial_id", trial_id},
              {"profiler", std::string("LibTorch ") + TORCH_VERSION + " legacy autograd profiler"},
              {"host", HostName()},
              {"steps", recorded_steps}}}};
  }

  json Summary() {
    const int n_steps = static_cast<int>(recorded_steps.size());
    json profile = {{"tool", spec.tool},
                    {"profiler", std::string("LibTorch ") + TORCH_VERSION + " legacy autograd profiler"},
                    {"host", HostName()},
                    {"steps", {{"first", first}, {"count", spec.steps}, {"recorded", n_steps}}},
                    {"cuda", cuda}};
    if (n_steps == 0) {
      profile["error"] = failed ? error : "no profiled step was recorded";
      return profile;
    }
    const std::vector<OpEvent> calls = Calls();
    double window_us = 0, window_cpu_us = 0;
    for (const auto& [begin, end] : steps_us) window_us += end - begin;
    for (double us : steps_cpu_us) window_cpu_us += us;
    // Shares are of the profile's basis: on CUDA the operators' CUDA time over
    // the steps' wall time; on the CPU the training thread's CPU time, which
    // time spent waiting for a core on a loaded machine does not inflate.
    const double basis_window_us = cuda ? window_us : window_cpu_us;
    const auto basis_self = [&](const OpEvent& c) { return cuda ? c.cuda_self_us : c.cpu_self_us; };
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
      if (const auto backward = ConvBackwardCallFlops(c)) {
        row.flops += *backward;
        row.flops_source = "estimated from shapes: input and weight gradients, 2 x forward";
      }
      bound_us[c.bound] += basis_self(c);
      self_sum_us += c.self_us;
      cpu_self_sum_us += c.cpu_self_us;
      if (c.parent < 0) top_level_cuda_us += std::max(0.0, c.cuda_us);
    }
    for (const auto& [op, n] : flops_by_op) {
      OpRow& row = rows[op];
      if (row.name.empty()) {  // counted, yet not recorded (cannot happen on one thread; kept for safety)
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
                {"self_thread_cpu_ms_per_step", Round(r.cpu_self_us / 1e3 / n_steps, 1e4)},
                {"share", share_of(r.basis_us)},
                {"small_share", share_of(r.small_basis_us)},
                {"bytes_per_step", r.bytes / n_steps}};
      if (!r.dtype.empty()) j["dtype"] = r.dtype;
      if (r.flops > 0) {
        j["flops_per_step"] = r.flops / n_steps;
        j["flops_source"] = r.flops_source;
        // FLOPs are charged to the outermost counted call (aten::conv2d, not its
        // aten::mkldnn_convolution): its inclusive time is the time they took.
        const double seconds = (cuda && r.cuda_total_us > 0 ? r.cuda_total_us : r.total_us) / 1e6;
        if (seconds > 0) j["achieved_flops_per_s"] = static_cast<double>(r.flops) / seconds;
      } else {
        j["flops_per_step"] = nullptr;
      }
      if (cuda) {
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
    for (size_t i = 0; i < ordered.size() && static_cast<int>(i) < kTopOperators; ++i)
      top.push_back(table[i]);

    struct ClassTotals {
      double basis_us = 0, small_basis_us = 0, cpu_self_us = 0, cuda_self_us = 0;
      int64_t flops = 0, bytes = 0, calls = 0;
    };
    std::map<std::string, ClassTotals> by_class;
    for (const auto& [name, r] : rows) {
      ClassTotals& t = by_class[r.op_class];
      t.basis_us += r.basis_us;
      t.small_basis_us += r.small_basis_us;
      t.cpu_self_us += r.cpu_self_us;
      t.cuda_self_us += r.cuda_self_us;
      t.flops += r.flops;
      t.bytes += r.bytes;
      t.calls += r.calls;
    }
    json classes = json::object();
    int64_t all_flops = 0, all_bytes = 0;
    for (const auto& [name, t] : by_class) {
      json c = {{"self_thread_cpu_ms_per_step", Round(t.cpu_self_us / 1e3 / n_steps, 1e4)},
                {"share", share_of(t.basis_us)},
                {"small_share", share_of(t.small_basis_us)},
                {"calls_per_step", Round(static_cast<double>(t.calls) / n_steps)},
                {"flops_per_step", t.flops / n_steps},
                {"bytes_per_step", t.bytes / n_steps},
                {"bytes_per_flop",
                 t.flops > 0 ? json(Round(static_cast<double>(t.bytes) / t.flops, 1e4)) : json(nullptr)}};
      if (cuda) c["self_cuda_ms_per_step"] = Round(t.cuda_self_us / 1e3 / n_steps, 1e4);
      const double seconds = (cuda ? t.cuda_self_us : t.cpu_self_us) / 1e6;
      if (t.flops > 0 && seconds > 0) c["achieved_flops_per_s"] = static_cast<double>(t.flops) / seconds;
      classes[name] = c;
      all_flops += t.flops;
      all_bytes += t.bytes;
    }
    json by_bound = json::object();
    for (const char* bound : {"compute", "memory", "overhead"}) by_bound[bound] = share_of(bound_us[bound]);
    if (cuda) {
      // The device idles between kernels while the CPU launches the next ones.
      by_bound["gpu_idle"] = share_of(std::max(0.0, window_us - top_level_cuda_us));
    } else {
      by_bound["outside_operators"] = share_of(std::max(0.0, window_cpu_us - cpu_self_sum_us));
    }

    profile["time_basis"] = cuda ? "the profiled steps' wall time, by the operators' CUDA time"
                                 : "the training thread's CPU time in the profiled steps";
    profile["window_ms"] = Round(window_us / 1e3, 1e4);
    profile["window_ms_per_step"] = Round(window_us / 1e3 / n_steps, 1e4);
    profile["window_thread_cpu_ms"] = Round(window_cpu_us / 1e3, 1e4);
    profile["op_self_cpu_ms"] = Round(self_sum_us / 1e3, 1e4);
    profile["self_time_coverage"] = Round(window_us > 0 ? self_sum_us / window_us : 0, 1e4);
    profile["op_self_thread_cpu_ms"] = Round(cpu_self_sum_us / 1e3, 1e4);
    // The check that the operators account for the profiled time: on the CPU
    // their CPU time over the thread's CPU time in the window (wall time would
    // count time the process spent waiting for a core).
    profile["coverage"] = cuda ? Round(window_us > 0 ? std::min(1.0, top_level_cuda_us / window_us) : 0, 1e4)
                               : share_of(cpu_self_sum_us);
    profile["calls"] = calls.size();
    profile["operators"] = rows.size();
    profile["small_calls"] = {{"threshold", cuda ? "CUDA time below the call's CPU (launch) time"
                                                 : "under " + std::to_string(static_cast<int>(kSmallCallCpuUs)) +
                                                       " us of thread CPU time"},
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
    if (failed) profile["error"] = error;

    WriteArtifacts(calls, table, &profile);
    return profile;
  }

  void WriteArtifacts(const std::vector<OpEvent>& calls, const json& table, json* profile) const {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path dir =
        fs::absolute(fs::path(artifact_dir.empty() ? "." : artifact_dir), ec) / TrialFolderName(trial_id);
    dir = dir.lexically_normal();
    (*profile)["artifact_dir"] = dir.string();
    fs::create_directories(dir, ec);
    if (ec) {
      (*profile)["error"] = "cannot write the trace: cannot create " + dir.string() + ": " + ec.message();
      return;
    }
    const double origin = steps_us.empty() ? 0 : steps_us.front().first;
    const auto write = [&](const fs::path& path, const json& document) -> std::string {
      std::ofstream file(path);
      file << document.dump() << "\n";
      file.close();
      return file ? "" : "cannot write " + path.string() + ": " + std::strerror(errno);
    };
    const fs::path trace = dir / "trace.json";
    if (std::string problem = write(trace, TraceJson(calls, origin)); !problem.empty()) {
      (*profile)["error"] = "cannot write the trace: " + problem;
      return;
    }
    (*profile)["trace"] = trace.string();
    const fs::path operators = dir / "operators.json";
    if (std::string problem =
            write(operators, {{"trial_id", trial_id}, {"steps", recorded_steps}, {"operators", table}});
        !problem.empty()) {
      (*profile)["error"] = "cannot write the operator table: " + problem;
      return;
    }
    (*profile)["operators_file"] = operators.string();
  }
};

StepProfiler::StepProfiler(const ProfileSpec& spec, int default_first, std::string artifact_dir,
                           std::string trial_id, bool cuda)
    : impl_(std::make_unique<Impl>()) {
  impl_->spec = spec;
  impl_->first = spec.start < 0 ? default_first : spec.start;
  impl_->artifact_dir = std::move(artifact_dir);
  impl_->trial_id = std::move(trial_id);
  impl_->cuda = cuda;
}

StepProfiler::~StepProfiler() {
  impl_->flops.reset();
  impl_->Stop();
}

bool StepProfiler::Covers(int step) const { return impl_->InWindow(step); }
void StepProfiler::BeforeStep(int step) { impl_->Before(step); }
void StepProfiler::AfterStep(int step) { impl_->After(step); }

json StepProfiler::Finish() {
  Impl& p = *impl_;
  if (p.spec.steps <= 0) return nullptr;
  p.flops.reset();
  p.Stop();
  if (p.spec.tool != "libtorch") {
    json profile = {{"tool", p.spec.tool},
                    {"host", HostName()},
                    {"steps", {{"first", p.first}, {"count", p.spec.steps}}},
                    {"nvtx_range", p.InProcess() ? json(kNvtxStepRange) : json(nullptr)}};
    if (p.failed) profile["error"] = p.error;
    return profile;
  }
  try {
    return p.Summary();
  } catch (const std::exception& e) {
    return {{"tool", p.spec.tool},
            {"host", HostName()},
            {"error", std::string("cannot summarize the profile: ") + e.what()}};
  }
}

}  // namespace frontier