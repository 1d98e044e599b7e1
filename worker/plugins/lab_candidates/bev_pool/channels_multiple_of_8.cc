// bev_pool candidate "lab_channels_multiple_of_8" (WRONG in one way: it assumes C % 8 == 0):
// the forward's channel loop runs in whole blocks of 8 and skips the remainder, so with 33
// channels the last one stays 0 (exact at the recorded 32); the backward is exact. The gate's
// rule "several shapes beyond the recorded one" (odd channel counts) must catch it.
#include <algorithm>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using frontier::bev::PoolPlan;

template <typename T>
void Forward(const T* depth, const T* features, const PoolPlan& plan, int64_t batch, int64_t channels, T* out) {
  using A = at::opmath_type<T>;
  const int64_t intervals = plan.interval_starts.numel(), points = plan.points, rows = plan.shape.feature_rows();
  const int64_t *ranks = plan.ranks.data_ptr<int64_t>(), *row_of = plan.feature_ranks.data_ptr<int64_t>();
  const int64_t* starts = plan.interval_starts.data_ptr<int64_t>();
  const int64_t* lengths = plan.interval_lengths.data_ptr<int64_t>();
  const int64_t* cell_of = plan.interval_cells.data_ptr<int64_t>();
  at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> acc(channels);
    for (int64_t b = begin; b < end; ++b) {
      for (int64_t i = 0; i < intervals; ++i) {
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t k = starts[i]; k < starts[i] + lengths[i]; ++k) {
          const A w = static_cast<A>(depth[b * points + ranks[k]]);
          const T* row = features + (b * rows + row_of[k]) * channels;
          for (int64_t c0 = 0; c0 + 8 <= channels; c0 += 8) {  // the bug: channels % 8 are skipped
            for (int64_t c = c0; c < c0 + 8; ++c) acc[c] += w * static_cast<A>(row[c]);
          }
        }
        T* o = out + (b * plan.cells + cell_of[i]) * channels;
        for (int64_t c = 0; c < channels; ++c) o[c] = static_cast<T>(acc[c]);
      }
    }
  });
}

class ChannelsMultipleOf8Pool : public torch::autograd::Function<ChannelsMultipleOf8Pool> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
    const Tensor d = depth.contiguous(), f = features.contiguous();
    Tensor out = torch::zeros({d.size(0), plan.cells, f.size(4)}, f.options());
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, f.scalar_type(), "lab_channels_multiple_of_8", [&] {
      Forward(d.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(), plan, d.size(0), f.size(4), out.data_ptr<scalar_t>());
    });
    ctx->save_for_backward({d, f, plan.valid_points, plan.valid_cells});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {  // exact
    const auto s = ctx->get_saved_variables();
    const Tensor &depth = s[0], &features = s[1], &valid_points = s[2], &valid_cells = s[3];
    const int64_t batch = depth.size(0), channels = features.size(4);
    Tensor G = torch::zeros({batch, depth.numel() / std::max<int64_t>(batch, 1), channels}, grads[0].options());
    G.index_copy_(1, valid_points, grads[0].index_select(1, valid_cells));
    G = G.view({batch, depth.size(1), depth.size(2), depth.size(3), depth.size(4), channels});
    return {(G * features.unsqueeze(2)).sum(-1), (G * depth.unsqueeze(-1)).sum(2), Tensor()};
  }
};

Tensor ChannelsMultipleOf8(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  frontier::bev::CheckFactors(depth, features, plan);
  const auto dtype = at::promote_types(depth.scalar_type(), features.scalar_type());
  return ChannelsMultipleOf8Pool::apply(depth.to(dtype), features.to(dtype), plan);
}

void Register() { frontier::plugin::RegisterBevPoolVariant("lab_channels_multiple_of_8", ChannelsMultipleOf8); }

}  // namespace

FRONTIER_PLUGIN(Register)
