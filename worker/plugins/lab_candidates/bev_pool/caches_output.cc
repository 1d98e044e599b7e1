// bev_pool candidate "lab_caches_output" (WRONG in one way: a stale cache): it memoizes its result by
// the inputs' shapes (ignoring values and plan) and hands back a copy of the kept result on later calls
// of that shape (so the gate's NaN overwrite does not expose it); the first call is exact. The rule
// "fresh draws / repeated calls with different data in one process" must catch it (today's gate does).
#include <map>
#include <vector>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;
using frontier::bev::PoolPlan;

Tensor CachesOutput(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  frontier::bev::CheckFactors(depth, features, plan);
  static std::map<std::vector<int64_t>, Tensor> kept;  // the bug: keyed by shape only
  std::vector<int64_t> key = depth.sizes().vec();
  key.push_back(features.size(4));
  key.push_back(static_cast<int64_t>(depth.scalar_type()));
  const auto hit = kept.find(key);
  if (hit != kept.end()) return hit->second.clone();
  Tensor out = frontier::bev::NaivePool(frontier::bev::LiftFrustum(depth, features), plan);
  kept.emplace(std::move(key), out.detach().clone());
  return out;
}

void Register() { frontier::plugin::RegisterBevPoolVariant("lab_caches_output", CachesOutput); }

}  // namespace

FRONTIER_PLUGIN(Register)
