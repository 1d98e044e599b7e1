// bev_pool candidate "lab_does_not_compile" (DOES NOT COMPILE): it passes the dtype and the
// device to torch::zeros as separate arguments, as Python's keywords would; LibTorch takes one
// TensorOptions (features.options()), so no overload matches. The lab must report the error.
#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;

Tensor DoesNotCompile(const Tensor& depth, const Tensor& features, const frontier::bev::PoolPlan& plan) {
  frontier::bev::CheckFactors(depth, features, plan);
  const Tensor frustum = frontier::bev::LiftFrustum(depth, features);
  Tensor out = torch::zeros({depth.size(0), plan.cells, features.size(4)}, frustum.scalar_type(), frustum.device());
  return out.index_add(1, plan.valid_cells, frustum.index_select(1, plan.valid_points));
}

void Register() { frontier::plugin::RegisterBevPoolVariant("lab_does_not_compile", DoesNotCompile); }

}  // namespace

FRONTIER_PLUGIN(Register)
