// bev_pool candidate "lab_hangs" (HANGS inside the kernel call, not at registration): its
// interval loop never advances (a `volatile` step that is 0), so the call spins forever. The lab
// must run it in a sandbox with a time limit and report the timeout.
#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;

volatile int64_t step = 0;  // the bug: should be 1; volatile, so the compiler keeps the loop

Tensor Hangs(const Tensor& depth, const Tensor& features, const frontier::bev::PoolPlan& plan) {
  frontier::bev::CheckFactors(depth, features, plan);
  for (int64_t i = 0; i <= plan.interval_starts.numel(); i += step) {
  }
  return frontier::bev::NaivePool(frontier::bev::LiftFrustum(depth, features), plan);
}

void Register() { frontier::plugin::RegisterBevPoolVariant("lab_hangs", Hangs); }

}  // namespace

FRONTIER_PLUGIN(Register)
