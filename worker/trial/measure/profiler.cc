#include "worker/trial/measure/profiler.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
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
#include "worker/profile/profile_summary.h"
#include "worker/trial/measure/cpu_allocator.h"
#include "worker/trial/measure/flop_counter.h"

namespace frontier {
namespace {

using json = nlohmann::json;
namespace legacy = torch::autograd::profiler;
namespace profiler_impl = torch::profiler::impl;

double ThreadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

}  // namespace

// Named, not anonymous: StepProfiler::Impl holds a CallRecorder.
namespace profiled_calls {

// What the legacy profiler does not record about a call: the CPU time of the
// thread running it at its start and end, the bytes of its tensor inputs and
// outputs by their real element size, and its input shapes.
//
// Kept flat, in storage reserved before the profiled steps: the profiled
// steps allocate their tensors from the same heap, and a small allocation
// kept per call (a map node, a vector per input shape) scatters the freed
// tensors' memory so that each profiled step's tensors took fresh pages
// (page faults in the kernels). With the legacy profiler's own input shapes
// (report_input_shapes) and a map of records, a 60-step trial's profiled
// steps took 3.7x to 4.8x its measured steps; as here, 2x (docs/profiling.md).
struct CallRecord {
  uint64_t handle = 0;  // the RecordFunction's, which the legacy profiler's events carry
  double cpu_start_us = 0, cpu_end_us = 0;
  int64_t bytes = 0;
  const char* dtype = nullptr;  // the first floating-point tensor's (c10::toString's static name), or none
  size_t dims_begin = 0;        // its input shapes in CallRecorder::dims: per input its rank, then its sizes
  size_t dims_end = 0;
};

// Filled by a thread-local RecordFunction callback while the profiler records.
struct CallRecorder {
  std::mutex mutex;
  std::vector<CallRecord> records;  // in the order the calls ended
  std::vector<int64_t> dims;

  void Reserve() {
    records.reserve(size_t{1} << 16);
    dims.reserve(size_t{1} << 18);
  }
  // Input shapes of `record` ([] for a non-tensor or undefined input).
  std::vector<std::vector<int64_t>> Shapes(const CallRecord& record) const {
    std::vector<std::vector<int64_t>> shapes;
    for (size_t i = record.dims_begin; i < record.dims_end;) {
      const auto rank = static_cast<size_t>(dims[i++]);
      shapes.emplace_back(dims.begin() + i, dims.begin() + i + rank);
      i += rank;
    }
    return shapes;
  }
};

}  // namespace profiled_calls

namespace {

using profiled_calls::CallRecord;
using profiled_calls::CallRecorder;

std::atomic<CallRecorder*> g_recorder{nullptr};

// One call in progress: lives from its start to its end only. Its input
// shapes in place (no allocation of their own) up to kInlineDims numbers.
struct RecorderContext : at::ObserverContext {
  static constexpr size_t kInlineDims = 96;
  double cpu_start_us = 0;
  int64_t input_bytes = 0;
  const char* dtype = nullptr;
  std::array<int64_t, kInlineDims> inline_dims;
  size_t n_dims = 0;
  std::vector<int64_t> more_dims;  // the numbers after the first kInlineDims, if any

  void AddDim(int64_t d) {
    if (n_dims < kInlineDims) {
      inline_dims[n_dims] = d;
    } else {
      more_dims.push_back(d);
    }
    ++n_dims;
  }
  void AppendDimsTo(std::vector<int64_t>* out) const {
    out->insert(out->end(), inline_dims.begin(), inline_dims.begin() + std::min(n_dims, kInlineDims));
    out->insert(out->end(), more_dims.begin(), more_dims.end());
  }
};

int64_t TensorBytes(const at::Tensor& t, const char** dtype) {
  if (!t.defined()) return 0;
  if (*dtype == nullptr && t.is_floating_point()) *dtype = c10::toString(t.scalar_type());
  return t.numel() * static_cast<int64_t>(t.element_size());
}

int64_t ValueBytes(const c10::IValue& v, const char** dtype) {
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
  for (const c10::IValue& v : fn.inputs()) {
    // The shape the legacy profiler gives an input: a defined tensor's sizes, else [].
    const bool sized = v.isTensor() && v.toTensor().defined();
    const c10::IntArrayRef sizes = sized ? v.toTensor().sizes() : c10::IntArrayRef();
    context->AddDim(static_cast<int64_t>(sizes.size()));
    for (const int64_t d : sizes) context->AddDim(d);
    try {
      context->input_bytes += ValueBytes(v, &context->dtype);
    } catch (const std::exception&) {  // an opaque tensor without a size: its bytes stay uncounted
    }
  }
  return context;
}

void RecordEnd(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  CallRecorder* recorder = g_recorder.load();
  if (recorder == nullptr || ctx == nullptr) return;
  auto* context = static_cast<RecorderContext*>(ctx);
  CallRecord record;
  record.handle = fn.handle();
  record.cpu_end_us = ThreadCpuUs();
  record.cpu_start_us = context->cpu_start_us;
  record.bytes = context->input_bytes;
  record.dtype = context->dtype;
  try {
    for (const c10::IValue& v : fn.outputs()) record.bytes += ValueBytes(v, &record.dtype);
  } catch (const std::exception&) {
  }
  std::lock_guard<std::mutex> lock(recorder->mutex);
  record.dims_begin = recorder->dims.size();
  context->AppendDimsTo(&recorder->dims);
  record.dims_end = recorder->dims.size();
  recorder->records.push_back(record);
}
// NVTX range around each profiled step when nsys/ncu wrap the trial.
constexpr const char* kNvtxStepRange = "frontier.profiled_step";

// FLOPs of an aten::convolution_backward call, from the formula of
// flop_counter.h.
std::optional<int64_t> ConvBackwardCallFlops(const ProfiledCall& c) {
  if (c.name != "aten::convolution_backward" || c.shapes.size() < 3) return std::nullopt;
  return ConvBackwardFlops(c.shapes[0], c.shapes[2]);
}

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
  std::optional<CpuBlockReuse> block_reuse;  // while recording (cpu_allocator.h)
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
      // Input shapes come from the recorder (CallRecord), not the legacy profiler.
      legacy::enableProfilerLegacy(profiler_impl::ProfilerConfig(state, /*report_input_shapes=*/false));
      recording = true;
    } catch (const std::exception& e) {
      Fail(std::string("cannot start the LibTorch profiler: ") + e.what());
      return;
    }
    if (spec.tool != "libtorch") return;
    block_reuse.emplace();
    // Added after the legacy profiler's callback, so the handle it gives a call is set when ours ends.
    recorder.Reserve();
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
    block_reuse.reset();
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

  // The legacy profiler's push/pop events paired into calls, with what the
  // recorder saw of each (thread CPU time, bytes, dtype, input shapes).
  std::vector<ProfiledCall> Calls() const {
    std::vector<ProfiledCall> calls;
    std::unordered_map<uint64_t, const CallRecord*> records;  // by handle
    records.reserve(recorder.records.size());
    for (const CallRecord& r : recorder.records) records[r.handle] = &r;
    for (const auto& list : events) {
      // handle -> index of the call in `calls` and its push event
      std::unordered_map<uint64_t, std::pair<size_t, const legacy::LegacyEvent*>> open;
      for (const auto& e : list) {
        if (e.kind() == legacy::EventKind::PushRange) {
          ProfiledCall call;
          call.name = e.name();
          call.thread = e.threadId();
          call.start_us = e.cpuUs();
          call.end_us = -1;
          open[e.handle()] = {calls.size(), &e};
          calls.push_back(std::move(call));
        } else if (e.kind() == legacy::EventKind::PopRange) {
          const auto it = open.find(e.handle());
          if (it == open.end()) continue;
          ProfiledCall& call = calls[it->second.first];
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
          // The recorder's facts (written while recording; the recording has stopped).
          if (const auto found = records.find(e.handle()); found != records.end()) {
            const CallRecord& record = *found->second;
            call.cpu_us = std::max(0.0, record.cpu_end_us - record.cpu_start_us);
            call.bytes = record.bytes;
            call.dtype = record.dtype != nullptr ? record.dtype : "";
            call.shapes = recorder.Shapes(record);
          }
          if (const auto backward = ConvBackwardCallFlops(call)) {
            call.estimated_flops = *backward;
            call.estimated_flops_source = "estimated from shapes: input and weight gradients, 2 x forward";
          }
        }
      }
    }
    return calls;
  }

  json Summary() {
    ProfileRecording recording;
    recording.tool = spec.tool;
    recording.profiler = std::string("LibTorch ") + TORCH_VERSION + " legacy autograd profiler";
    recording.host = HostName();
    recording.trial_id = trial_id;
    recording.pid = static_cast<int>(getpid());
    recording.first = first;
    recording.count = spec.steps;
    recording.basis = cuda ? TimeBasis::kCuda : TimeBasis::kThreadCpu;
    for (size_t i = 0; i < recorded_steps.size(); ++i) {
      recording.steps.push_back({recorded_steps[i], steps_us[i].first, steps_us[i].second, steps_cpu_us[i]});
    }
    if (!recorded_steps.empty()) recording.calls = Calls();
    recording.flops_by_op = flops_by_op;
    if (failed) recording.error = error;
    ProfileSummary summary = SummarizeProfile(recording);
    namespace fs = std::filesystem;
    WriteProfileArtifacts(fs::path(artifact_dir.empty() ? "." : artifact_dir) / TrialFolderName(trial_id), &summary);
    return summary.profile;
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