// bev_pool candidate "lab_crashes" (CRASHES inside the kernel call, not at registration): its
// per-cell scratch pointer is never allocated, so the first call writes through a null pointer
// (SIGSEGV). The lab must run it in a sandbox and report the signal, not die with it.
#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;

float* volatile cell_scratch = nullptr;  // volatile: the compiler cannot prove it null and drop the store

Tensor Crashes(const Tensor& depth, const Tensor& features, const frontier::bev::PoolPlan& plan) {
  frontier::bev::CheckFactors(depth, features, plan);
  cell_scratch[plan.cells - 1] = 0.0f;  // the bug: SIGSEGV
  return frontier::bev::NaivePool(frontier::bev::LiftFrustum(depth, features), plan);
}

void Register() { frontier::plugin::RegisterBevPoolVariant("lab_crashes", Crashes); }

}  // namespace

FRONTIER_PLUGIN(Register)
