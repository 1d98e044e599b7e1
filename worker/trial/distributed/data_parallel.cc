// The c10d process group and the bucketed, hook-driven gradient all-reduce.
// One translation unit on purpose: the c10d headers pull most of ATen in.
#include "worker/trial/distributed/data_parallel.h"
#include "os/monotonic.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef FRONTIER_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

namespace frontier::distributed {


namespace {

double Seconds(Monotonic::duration d) { return std::chrono::duration<double>(d).count(); }

std::string FirstLine(const std::string& text) {
  // c10::Error's what() carries a C++ backtrace after the first lines: keep the message.
  std::string out = text.substr(0, text.find("\nException raised from"));
  if (out.size() > 600) out = out.substr(0, 600) + "...";
  return out;
}

}  // namespace

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  int rank = 0, world = 1;
  double timeout_s = 300;
  const char* backend = "gloo";

  std::chrono::milliseconds Timeout() const {
    return std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  }
  std::string Prefix() const {
    return "distributed: rank " + std::to_string(rank) + " of " + std::to_string(world) + " (" + backend + "): ";
  }
  std::string Hint() const {
    std::ostringstream out;
    out << " (a peer rank died, was stopped, or did not answer within " << timeout_s << " s)";
    return out.str();
  }
  [[noreturn]] void Fail(const std::string& what, const std::exception& e) const {
    throw DistributedError(Prefix() + what + " failed: " + FirstLine(e.what()) + Hint());
  }
  void Wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) const {
    try {
      work->wait(Timeout());
    } catch (const std::exception& e) {
      Fail(what, e);
    }
  }
};

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;
int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::world_size() const { return impl_->world; }
double ProcessGroup::timeout_s() const { return impl_->timeout_s; }
const char* ProcessGroup::backend_name() const { return impl_->backend; }

std::unique_ptr<ProcessGroup> ProcessGroup::Connect(const Rendezvous& r, Backend backend) {
  std::string problem = CheckRendezvous(r);
  if (!problem.empty()) throw DistributedError(problem);
  auto impl = std::make_unique<Impl>();
  impl->rank = r.rank;
  impl->world = r.world_size;
  impl->timeout_s = r.timeout_s;
  impl->backend = backend == Backend::kGloo ? "gloo" : "nccl";
  auto timeout = impl->Timeout();
  try {
    if (r.store.rfind("file://", 0) == 0) {
      impl->store = c10::make_intrusive<c10d::FileStore>(r.store.substr(7), r.world_size);
      impl->store->setTimeout(timeout);
    } else {
      std::string rest = r.store.substr(6);
      size_t colon = rest.rfind(':');
      c10d::TCPStoreOptions options;
      options.port = static_cast<std::uint16_t>(std::stoi(rest.substr(colon + 1)));
      options.isServer = r.rank == 0;
      options.numWorkers = static_cast<size_t>(r.world_size);
      options.waitWorkers = true;
      options.timeout = timeout;
      impl->store = c10::make_intrusive<c10d::TCPStore>(rest.substr(0, colon), options);
    }
  } catch (const std::exception& e) {
    throw DistributedError(impl->Prefix() + "rendezvous at " + r.store + " failed: " + FirstLine(e.what()) +
                           " (every rank must join within " + std::to_string(r.timeout_s) + " s)");
  }
  try {
    if (backend == Backend::kGloo) {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      if (!r.interface.empty()) {
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(r.interface));
      } else if (!r.hostname.empty()) {
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(r.hostname));
      } else {
        options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      impl->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, r.rank, r.world_size, options);
    } else {
#ifdef FRONTIER_WITH_NCCL
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      impl->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl->store, r.rank, r.world_size, options);
#else
      throw DistributedError(impl->Prefix() + "this frontier-trial was built without NCCL (FRONTIER_WITH_NCCL)");
#endif
    }
  } catch (const DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    throw DistributedError(impl->Prefix() + "connecting the process group over " + r.store + " failed: " +
                           FirstLine(e.what()) + impl->Hint());
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
}

void ProcessGroup::Broadcast(std::vector<at::Tensor> tensors, int root, const std::string& what) {
  c10d::BroadcastOptions options;
  options.rootRank = root;
  options.timeout = impl_->Timeout();
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<at::Tensor> one{tensors[i]};
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = impl_->pg->broadcast(one, options);
    } catch (const std::exception& e) {
      impl_->Fail("broadcast of " + what, e);
    }
    impl_->Wait(work, "broadcast of " + what);
  }
}

namespace {
double ReduceOne(ProcessGroup::Impl& impl, double value, c10d::ReduceOp op, const std::string& what) {
  std::vector<at::Tensor> one{at::full({1}, value, at::kDouble)};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  options.timeout = impl.Timeout();
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = impl.pg->allreduce(one, options);
  } catch (const std::exception& e) {
    impl.Fail("all-reduce of " + what, e);
  }
  impl.Wait(work, "all-reduce of " + what);
  return one[0].item<double>();
}
}  // namespace

double ProcessGroup::AllReduceMax(double value, const std::string& what) {
  return ReduceOne(*impl_, value, c10d::ReduceOp::MAX, what);
}
double ProcessGroup::AllReduceSum(double value, const std::string& what) {
  return ReduceOne(*impl_, value, c10d::ReduceOp::SUM, what);
}

std::vector<at::Tensor> ProcessGroup::AllGather(const at::Tensor& tensor, const std::string& what) {
  std::vector<at::Tensor> input{tensor.contiguous()};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int i = 0; i < impl_->world; ++i) output[0].push_back(at::empty_like(input[0]));
  c10d::AllgatherOptions options;
  options.timeout = impl_->Timeout();
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = impl_->pg->allgather(output, input, options);
  } catch (const std::exception& e) {
    impl_->Fail("all-gather of " + what, e);
  }
  impl_->Wait(work, "all-gather of " + what);
  return output[0];
}

std::vector<std::vector<double>> ProcessGroup::AllGather(const std::vector<double>& values, const std::string& what) {
  at::Tensor local = at::empty({static_cast<int64_t>(values.size())}, at::kDouble);
  std::copy(values.begin(), values.end(), local.data_ptr<double>());
  std::vector<std::vector<double>> out;
  for (const at::Tensor& t : AllGather(local, what)) {
    out.emplace_back(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  }
  return out;
}

void ProcessGroup::Barrier(const std::string& what) {
  c10d::BarrierOptions options;
  options.timeout = impl_->Timeout();
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = impl_->pg->barrier(options);
  } catch (const std::exception& e) {
    impl_->Fail("barrier " + what, e);
  }
  impl_->Wait(work, "barrier " + what);
}

// ---------------------------------------------------------------------------
// DataParallel

namespace {

// Completion times written by the process group's threads (future callbacks);
// shared so a callback that fires after the DataParallel is gone is harmless.
struct Completions {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Monotonic::time_point> done;
  std::vector<bool> finished;
};

}  // namespace

struct DataParallel::State {
  struct Slot {
    at::Tensor param;
    size_t bucket = 0;
    int64_t offset = 0, numel = 0;
    bool ready = false;
    std::shared_ptr<torch::autograd::Node> accumulator;  // kept alive: the param holds it weakly
    uintptr_t hook = 0;
  };
  struct Bucket {
    std::vector<size_t> slots;
    at::Tensor flat;
    int pending = 0;
    bool launched = false, in_backward = false;
    Monotonic::time_point launch;
    c10::intrusive_ptr<c10::ivalue::Future> future;
    c10::intrusive_ptr<c10d::Work> work;
  };

  ProcessGroup::Impl* group = nullptr;
  DataParallelOptions options;
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  std::shared_ptr<Completions> completions = std::make_shared<Completions>();
  bool armed = false, in_backward = false;
  double weight = 1;
  size_t next_launch = 0;
  int64_t step = 0;

  std::string Where() const { return group->Prefix() + "step " + std::to_string(step) + ": "; }

  void Launch(size_t b) {
    Bucket& bucket = buckets[b];
    bucket.launched = true;
    bucket.in_backward = in_backward;
    {
      std::lock_guard<std::mutex> lock(completions->mu);
      completions->finished[b] = false;
    }
    bucket.launch = Monotonic::now();
    std::vector<at::Tensor> one{bucket.flat};
    c10d::AllreduceOptions allreduce;
    allreduce.reduceOp = c10d::ReduceOp::SUM;
    allreduce.timeout = group->Timeout();
    try {
      bucket.work = group->pg->allreduce(one, allreduce);
      bucket.future = bucket.work->getFuture();
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> lock(completions->mu);
        completions->finished[b] = true;  // nothing in flight: the destructor need not wait for it
      }
      group->Fail("step " + std::to_string(step) + ": starting the all-reduce of gradient bucket " +
                      std::to_string(b),
                  e);
    }
    std::shared_ptr<Completions> shared = completions;
    bucket.future->addCallback([shared, b](c10::ivalue::Future&) {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->done[b] = Monotonic::now();
      shared->finished[b] = true;
      shared->cv.notify_all();
    });
  }

  // Buckets start strictly in index order, so every rank issues the same
  // sequence of collectives whatever order the hooks fire in.
  void LaunchReady() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) Launch(next_launch++);
  }

  void Fill(size_t index, const at::Tensor& grad) {
    Slot& slot = slots[index];
    at::Tensor view = buckets[slot.bucket].flat.narrow(0, slot.offset, slot.numel);
    if (!grad.defined()) {
      view.zero_();
    } else {
      if (grad.is_sparse()) {
        throw DistributedError(Where() + "parameter " + std::to_string(index) +
                               " has a sparse gradient; DataParallel all-reduces dense gradients only");
      }
      view.copy_(grad.reshape({-1}));
      if (weight != 1) view.mul_(weight);
    }
    slot.ready = true;
    --buckets[slot.bucket].pending;
  }

  void OnGradReady(size_t index) {
    if (!armed) return;
    if (slots[index].ready) {
      throw DistributedError(Where() + "parameter " + std::to_string(index) +
                             " got a second gradient in one step: call BeforeBackward before each backward "
                             "(gradient accumulation over several backward passes is not supported)");
    }
    Fill(index, slots[index].param.grad());
    if (options.overlap) LaunchReady();
  }
};

namespace {
struct ReadyHook : torch::autograd::FunctionPostHook {
  ReadyHook(DataParallel::State* state, size_t index) : state(state), index(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    state->OnGradReady(index);
    return outputs;
  }
  DataParallel::State* state;
  size_t index;
};
}  // namespace

DataParallel::DataParallel(ProcessGroup& group, std::vector<at::Tensor> parameters, std::vector<at::Tensor> buffers,
                           DataParallelOptions options)
    : group_(group), state_(std::make_unique<State>()) {
  State& s = *state_;
  s.group = &group.impl();
  s.options = options;
  if (!(options.bucket_cap_mb > 0)) {
    throw std::invalid_argument("DataParallel: bucket_cap_mb must be > 0 (got " +
                                std::to_string(options.bucket_cap_mb) + ")");
  }

  // Identical initialization: every parameter and buffer takes rank 0's
  // values, one broadcast per dtype and device of the tensors flattened.
  {
    c10::NoGradGuard no_grad;
    std::vector<at::Tensor> all;
    for (auto& p : parameters) all.push_back(p.detach());
    for (auto& b : buffers) all.push_back(b.detach());
    std::map<std::pair<int, std::string>, std::vector<size_t>> groups;
    for (size_t i = 0; i < all.size(); ++i) {
      if (!all[i].defined() || all[i].numel() == 0) continue;
      groups[{static_cast<int>(all[i].scalar_type()), all[i].device().str()}].push_back(i);
    }
    for (auto& [key, members] : groups) {
      std::vector<at::Tensor> flat_parts;
      for (size_t i : members) flat_parts.push_back(all[i].reshape({-1}));
      at::Tensor flat = at::cat(flat_parts);
      group.Broadcast({flat}, 0, "the initial parameters and buffers");
      int64_t offset = 0;
      for (size_t i : members) {
        all[i].copy_(flat.narrow(0, offset, all[i].numel()).view_as(all[i]));
        offset += all[i].numel();
      }
    }
  }

  // Buckets over the parameters that train, in reverse order.
  const int64_t cap = static_cast<int64_t>(options.bucket_cap_mb * 1024 * 1024);
  for (auto& p : parameters) {
    if (!p.defined() || !p.requires_grad()) continue;
    if (!p.is_leaf()) throw std::invalid_argument("DataParallel: every parameter must be a leaf tensor");
    State::Slot slot;
    slot.param = p;
    slot.numel = p.numel();
    s.slots.push_back(std::move(slot));
  }
  int64_t bucket_bytes = 0;
  for (size_t k = s.slots.size(); k-- > 0;) {
    State::Slot& slot = s.slots[k];
    const int64_t bytes = slot.numel * static_cast<int64_t>(slot.param.element_size());
    bool fresh = s.buckets.empty() || bucket_bytes + bytes > cap ||
                 s.slots[s.buckets.back().slots.front()].param.scalar_type() != slot.param.scalar_type() ||
                 s.slots[s.buckets.back().slots.front()].param.device() != slot.param.device();
    if (fresh) {
      s.buckets.emplace_back();
      bucket_bytes = 0;
    }
    s.buckets.back().slots.push_back(k);
    bucket_bytes += bytes;
  }
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    State::Bucket& bucket = s.buckets[b];
    int64_t numel = 0;
    for (size_t k : bucket.slots) {
      s.slots[k].bucket = b;
      s.slots[k].offset = numel;
      numel += s.slots[k].numel;
    }
    const at::Tensor& first = s.slots[bucket.slots.front()].param;
    bucket.flat = at::zeros({numel}, first.options().requires_grad(false));
  }
  s.completions->done.resize(s.buckets.size());
  s.completions->finished.assign(s.buckets.size(), true);
  for (size_t k = 0; k < s.slots.size(); ++k) {
    s.slots[k].accumulator = torch::autograd::impl::grad_accumulator(s.slots[k].param);
    s.slots[k].hook = s.slots[k].accumulator->add_post_hook(std::make_unique<ReadyHook>(&s, k));
  }
}

DataParallel::~DataParallel() {
  State& s = *state_;
  for (auto& slot : s.slots) {
    if (slot.accumulator) slot.accumulator->del_post_hook(slot.hook);
  }
  // Let in-flight all-reduces finish (bounded) before their buffers go.
  std::unique_lock<std::mutex> lock(s.completions->mu);
  auto deadline = Monotonic::now() + std::chrono::milliseconds(static_cast<int64_t>(s.group->timeout_s * 1000) + 5000);
  s.completions->cv.wait_until(lock, deadline, [&] {
    return std::all_of(s.completions->finished.begin(), s.completions->finished.end(), [](bool f) { return f; });
  });
}

Shard DataParallel::LocalShard(long long batch) const {
  return ShardOf(batch, group_.rank(), group_.world_size(), state_->options.batch_policy);
}

void DataParallel::BeforeBackward(double weight) {
  State& s = *state_;
  if (s.armed) throw std::logic_error(s.Where() + "BeforeBackward twice without AfterBackward");
  s.armed = true;
  s.in_backward = true;
  s.weight = weight;
  s.next_launch = 0;
  for (auto& slot : s.slots) slot.ready = false;
  for (auto& bucket : s.buckets) {
    bucket.pending = static_cast<int>(bucket.slots.size());
    bucket.launched = false;
    bucket.in_backward = false;
  }
}

CommFigures DataParallel::AfterBackward() {
  State& s = *state_;
  if (!s.armed) throw std::logic_error(s.Where() + "AfterBackward without BeforeBackward");
  const Monotonic::time_point backward_end = Monotonic::now();
  s.in_backward = false;
  // Parameters that got no gradient this step contribute zeros.
  for (size_t k = 0; k < s.slots.size(); ++k) {
    if (!s.slots[k].ready) s.Fill(k, at::Tensor());
  }
  s.LaunchReady();
  s.armed = false;

  CommFigures figures;
  const auto limit = std::chrono::milliseconds(static_cast<int64_t>(s.group->timeout_s * 1000) + 5000);
  std::vector<std::pair<Monotonic::time_point, Monotonic::time_point>> intervals;
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    State::Bucket& bucket = s.buckets[b];
    Monotonic::time_point done;
    {
      std::unique_lock<std::mutex> lock(s.completions->mu);
      if (!s.completions->cv.wait_for(lock, limit, [&] { return bool(s.completions->finished[b]); })) {
        throw DistributedError(s.Where() + "the all-reduce of gradient bucket " + std::to_string(b) + " (" +
                               std::to_string(bucket.flat.nbytes()) + " bytes) did not finish within " +
                               std::to_string(Seconds(limit)) + " s" + s.group->Hint());
      }
      done = s.completions->done[b];
    }
    if (bucket.future->hasError()) {
      throw DistributedError(s.Where() + "all-reduce of gradient bucket " + std::to_string(b) + " (" +
                             std::to_string(bucket.flat.nbytes()) + " bytes) failed: " +
                             FirstLine(bucket.future->tryRetrieveErrorMessage()) + s.group->Hint());
    }
    intervals.emplace_back(bucket.launch, done);
    figures.bytes += static_cast<int64_t>(bucket.flat.nbytes());
    figures.buckets_launched_in_backward += bucket.in_backward ? 1 : 0;
  }
  const Monotonic::time_point reduced = Monotonic::now();
  figures.exposed_s = Seconds(reduced - backward_end);
  figures.buckets = static_cast<int>(s.buckets.size());

  std::sort(intervals.begin(), intervals.end());
  Monotonic::time_point start{}, end{};
  bool open = false;
  for (auto& [a, z] : intervals) {
    if (!open || a > end) {
      if (open) figures.allreduce_s += Seconds(end - start);
      start = a;
      end = z;
      open = true;
    } else {
      end = std::max(end, z);
    }
  }
  if (open) figures.allreduce_s += Seconds(end - start);

  {
    c10::NoGradGuard no_grad;
    for (auto& slot : s.slots) {
      at::Tensor sum = s.buckets[slot.bucket].flat.narrow(0, slot.offset, slot.numel).view(slot.param.sizes());
      at::Tensor& grad = slot.param.mutable_grad();
      if (grad.defined()) {
        grad.copy_(sum);
      } else {
        grad = sum.clone();
      }
    }
  }
  figures.unpack_s = Seconds(Monotonic::now() - reduced);
  ++s.step;
  return figures;
}

double DataParallel::SlowestRank(double seconds) {
  return group_.AllReduceMax(seconds, "the step time (slowest rank)");
}

int64_t DataParallel::gradient_bytes() const {
  int64_t bytes = 0;
  for (auto& bucket : state_->buckets) bytes += static_cast<int64_t>(bucket.flat.nbytes());
  return bytes;
}

int DataParallel::bucket_count() const { return static_cast<int>(state_->buckets.size()); }

std::vector<std::vector<size_t>> DataParallel::bucket_layout() const {
  std::vector<std::vector<size_t>> out;
  for (auto& bucket : state_->buckets) out.push_back(bucket.slots);
  return out;
}

}  // namespace frontier::distributed
