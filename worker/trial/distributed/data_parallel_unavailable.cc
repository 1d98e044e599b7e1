// The process group of a build without the gloo headers (docs/distributed.md,
// "Building it"): a one-rank trial never reaches it; a trial with
// runtime.ranks > 1 fails at Connect with the reason and the fix.
#include "worker/trial/distributed/data_parallel.h"

namespace frontier::distributed {

struct ProcessGroup::Impl {};
struct DataParallel::State {};

std::unique_ptr<ProcessGroup> ProcessGroup::Connect(const Rendezvous&, Backend) {
  throw DistributedError(
      "distributed: this frontier-trial was built without the gloo headers (Debian: libgloo-dev; "
      "deploy/install-deps.sh installs it), so it runs one rank only: rebuild it to run runtime.ranks > 1");
}

// Unreachable: no ProcessGroup exists in this build.
ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;
int ProcessGroup::rank() const { return 0; }
int ProcessGroup::world_size() const { return 1; }
double ProcessGroup::timeout_s() const { return 0; }
const char* ProcessGroup::backend_name() const { return "none"; }
void ProcessGroup::Broadcast(std::vector<at::Tensor>, int, const std::string&) {}
double ProcessGroup::AllReduceMax(double value, const std::string&) { return value; }
double ProcessGroup::AllReduceSum(double value, const std::string&) { return value; }
std::vector<std::vector<double>> ProcessGroup::AllGather(const std::vector<double>& values, const std::string&) {
  return {values};
}
std::vector<at::Tensor> ProcessGroup::AllGather(const at::Tensor& tensor, const std::string&) { return {tensor}; }
void ProcessGroup::Barrier(const std::string&) {}

DataParallel::DataParallel(ProcessGroup& group, std::vector<at::Tensor>, std::vector<at::Tensor>,
                           DataParallelOptions)
    : group_(group) {}
DataParallel::~DataParallel() = default;
Shard DataParallel::LocalShard(long long batch) const { return ShardOf(batch, 0, 1, BatchPolicy::kSplitGlobal); }
void DataParallel::BeforeBackward(double) {}
CommFigures DataParallel::AfterBackward() { return {}; }
double DataParallel::SlowestRank(double seconds) { return seconds; }
int64_t DataParallel::gradient_bytes() const { return 0; }
int DataParallel::bucket_count() const { return 0; }
std::vector<std::vector<size_t>> DataParallel::bucket_layout() const { return {}; }

}  // namespace frontier::distributed
