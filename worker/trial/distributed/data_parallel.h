// Data parallelism for one trial over N rank processes (docs/distributed.md):
// a c10d process group (Gloo on CPU, NCCL on CUDA where built), identical
// initialization broadcast from rank 0, gradients all-reduced in buckets
// launched from autograd hooks while backward still runs, and the
// communication figures of every step.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/trial/distributed/rendezvous.h"

namespace frontier::distributed {

// Every failure of the rendezvous or of a collective (a rank that died, a
// timeout): the message names the rank, the operation and the step.
class DistributedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Backend { kGloo, kNccl };

// One process group; a rank calls every collective in the same order as the
// others. Not thread-safe: one thread issues the collectives.
class ProcessGroup {
 public:
  // Joins the rendezvous (rank 0 serves a TCPStore) and connects the group;
  // throws DistributedError when a rank does not join within the timeout.
  // kNccl throws unless this build has NCCL (FRONTIER_WITH_NCCL).
  static std::unique_ptr<ProcessGroup> Connect(const Rendezvous& rendezvous, Backend backend = Backend::kGloo);
  ~ProcessGroup();

  int rank() const;
  int world_size() const;
  double timeout_s() const;
  const char* backend_name() const;

  // In place on every rank: `tensors` (dense, contiguous) take rank `root`'s
  // values. Blocks until done.
  void Broadcast(std::vector<at::Tensor> tensors, int root, const std::string& what);
  // The max / sum over ranks of one number, e.g. the slowest rank's step time.
  double AllReduceMax(double value, const std::string& what);
  double AllReduceSum(double value, const std::string& what);
  // Every rank's `values` (the same length on every rank), rank by rank.
  std::vector<std::vector<double>> AllGather(const std::vector<double>& values, const std::string& what);
  // Every rank's copy of `tensor` (same shape and dtype everywhere), rank by rank.
  std::vector<at::Tensor> AllGather(const at::Tensor& tensor, const std::string& what);
  void Barrier(const std::string& what);

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct DataParallelOptions {
  // A bucket holds gradients of consecutive parameters (in reverse
  // registration order, about the order backward produces them) up to this
  // many MiB, one dtype and device per bucket; a larger parameter gets a
  // bucket of its own. PyTorch DDP's default is 25.
  double bucket_cap_mb = 25;
  // true: a bucket's all-reduce starts from the autograd hook of its last
  // gradient, while backward still computes the rest. false: every bucket
  // starts after backward (the baseline that shows what overlap hides).
  bool overlap = true;
  BatchPolicy batch_policy = BatchPolicy::kSplitGlobal;
};

// What one step's gradient synchronization cost.
struct CommFigures {
  // Wall time during which at least one bucket's all-reduce was in flight
  // (the union of the buckets' [launch, completion] intervals).
  double allreduce_s = 0;
  // Time from the end of backward (AfterBackward called) until every bucket
  // was reduced: communication the step waited for, not hidden by backward.
  double exposed_s = 0;
  // Copying the reduced buckets back into the parameters' .grad.
  double unpack_s = 0;
  // Bytes all-reduced (the sum of the buckets' sizes = every parameter's
  // gradient bytes), how many buckets, and how many of them started during
  // backward.
  int64_t bytes = 0;
  int buckets = 0;
  int buckets_launched_in_backward = 0;
};

// Averages the gradients of `parameters` over the ranks of `group` every
// step. The parameters' tensors must outlive this object; it does not own
// the model. Usage per step:
//   Shard shard = dp.LocalShard(batch);          // this rank's rows
//   ... forward on those rows, loss = mean over them ...
//   dp.BeforeBackward(shard.weight);
//   loss.backward();
//   CommFigures figures = dp.AfterBackward();    // .grad is now the global mean's gradient
//   optimizer.step();                            // identical on every rank
class DataParallel {
 public:
  // Broadcasts every parameter and buffer from rank 0 (identical
  // initialization) and installs one post-accumulation hook per parameter
  // that requires grad.
  DataParallel(ProcessGroup& group, std::vector<at::Tensor> parameters, std::vector<at::Tensor> buffers,
               DataParallelOptions options = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  Shard LocalShard(long long batch) const;

  // Arms the hooks for one backward: this rank's gradients are multiplied by
  // `weight` (Shard::weight) before the ranks' are summed. Gradients must be
  // zero or undefined (one backward per step; no accumulation).
  void BeforeBackward(double weight);
  // Starts the buckets not started yet (all of them without overlap; the
  // gradients of parameters that got none are zeros), waits for every bucket
  // and writes the sums into .grad. Throws DistributedError when a rank died
  // or a collective timed out.
  CommFigures AfterBackward();

  // The slowest rank's value (e.g. step time); a collective: every rank calls it.
  double SlowestRank(double seconds);

  int64_t gradient_bytes() const;  // bytes all-reduced per step
  int bucket_count() const;
  // Parameter indices of each bucket, in launch order.
  std::vector<std::vector<size_t>> bucket_layout() const;
  ProcessGroup& group() { return group_; }

  struct State;

 private:
  ProcessGroup& group_;
  std::unique_ptr<State> state_;
};

}  // namespace frontier::distributed
