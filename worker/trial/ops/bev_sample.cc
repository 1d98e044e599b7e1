// Fixed bilinear sampling of image features at BEV points (bev_sample.h).
#include "worker/trial/ops/bev_sample.h"

#include <cmath>

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include "worker/trial/ops/bev_pool_internal.h"

namespace frontier::bev {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Compressed rows of the taps by `key` (row or source): starts (keys + 1) and
// the taps' positions in key order, stable.
std::vector<int64_t> Compress(const std::vector<SampleTap>& taps, int64_t keys, bool by_row,
                              std::vector<int64_t>* order) {
  std::vector<int64_t> starts(keys + 1, 0);
  for (const SampleTap& t : taps) ++starts[(by_row ? t.row : t.source) + 1];
  for (int64_t k = 0; k < keys; ++k) starts[k + 1] += starts[k];
  std::vector<int64_t> next(starts.begin(), starts.end() - 1);
  order->assign(taps.size(), 0);
  for (size_t i = 0; i < taps.size(); ++i)
    (*order)[next[by_row ? taps[i].row : taps[i].source]++] = int64_t(i);
  return starts;
}

torch::Tensor LongTensor(const std::vector<int64_t>& v) {
  return torch::tensor(torch::ArrayRef<int64_t>(v), torch::kLong);
}

// out (B, out_rows, C): out[b, r] = sum over k in [starts[r], starts[r + 1]) of weights[k] * x[b, index[k]].
template <typename scalar_t>
void GatherRowsCpu(const scalar_t* x, int64_t in_rows, const int64_t* starts, const int64_t* index,
                   const double* weights, int64_t batch, int64_t out_rows, int64_t channels, scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  at::parallel_for(0, batch * out_rows, kGrainIntervals, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(channels);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / out_rows, r = task % out_rows;
      const scalar_t* xb = x + b * in_rows * channels;
      std::fill(acc.begin(), acc.end(), acc_t(0));
      for (int64_t k = starts[r]; k < starts[r + 1]; ++k) {
        AddScaledRow(acc.data(), xb + index[k] * channels, static_cast<acc_t>(weights[k]), channels);
      }
      StoreRow(acc.data(), out + task * channels, channels);
    }
  });
}

torch::Tensor GatherRows(const torch::Tensor& x, const torch::Tensor& starts, const torch::Tensor& index,
                         const torch::Tensor& weights, int64_t out_rows) {
  const torch::Tensor in = x.contiguous();
  const int64_t batch = in.size(0), in_rows = in.size(1), channels = in.size(2);
  torch::Tensor out = torch::empty({batch, out_rows, channels}, in.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, in.scalar_type(), "bev_sample", [&] {
    GatherRowsCpu(in.data_ptr<scalar_t>(), in_rows, starts.data_ptr<int64_t>(), index.data_ptr<int64_t>(),
                  weights.data_ptr<double>(), batch, out_rows, channels, out.data_ptr<scalar_t>());
  });
  return out;
}

class SampleFunction : public torch::autograd::Function<SampleFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const SamplePlan& plan) {
    RECORD_FUNCTION("frontier::bev_sample", std::vector<c10::IValue>({x}));
    SavePlan(ctx, plan);
    return GatherRows(x, plan.row_starts, plan.row_sources, plan.row_weights, plan.rows);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const SamplePlan& plan = SavedPlanOf<SamplePlan>(ctx);
    RECORD_FUNCTION("frontier::bev_sample_backward", std::vector<c10::IValue>({grads[0]}));
    // Backward is not recorded: double backward is not supported (not needed for training).
    return {GatherRows(grads[0], plan.source_starts, plan.source_rows, plan.source_weights, plan.sources),
            torch::Tensor()};
  }
};

}  // namespace

SamplePlan SamplePlan::To(const torch::Device& device) const {
  SamplePlan p = *this;
  for (torch::Tensor* t : {&p.row_starts, &p.row_sources, &p.row_weights, &p.row_of_tap, &p.source_starts,
                           &p.source_rows, &p.source_weights}) {
    if (t->defined()) *t = t->to(device);
  }
  return p;
}

SamplePlan MakeSamplePlan(int64_t rows, int64_t sources, const std::vector<SampleTap>& taps) {
  TORCH_CHECK(rows >= 0 && sources >= 0, "BEV sampling plan: negative size");
  for (const SampleTap& t : taps) {
    TORCH_CHECK(t.row >= 0 && t.row < rows && t.source >= 0 && t.source < sources,
                "BEV sampling plan: tap (row ", t.row, ", source ", t.source, ") outside ", rows, " x ",
                sources);
  }
  SamplePlan plan;
  plan.rows = rows;
  plan.sources = sources;
  std::vector<int64_t> order;
  plan.row_starts = LongTensor(Compress(taps, rows, true, &order));
  std::vector<int64_t> index(taps.size()), of_tap(taps.size());
  std::vector<double> weight(taps.size());
  for (size_t k = 0; k < order.size(); ++k) {
    index[k] = taps[order[k]].source;
    of_tap[k] = taps[order[k]].row;
    weight[k] = taps[order[k]].weight;
  }
  plan.row_sources = LongTensor(index);
  plan.row_of_tap = LongTensor(of_tap);
  plan.row_weights = torch::tensor(torch::ArrayRef<double>(weight), torch::kDouble);
  plan.source_starts = LongTensor(Compress(taps, sources, false, &order));
  for (size_t k = 0; k < order.size(); ++k) {
    index[k] = taps[order[k]].row;
    weight[k] = taps[order[k]].weight;
  }
  plan.source_rows = LongTensor(index);
  plan.source_weights = torch::tensor(torch::ArrayRef<double>(weight), torch::kDouble);
  return plan;
}

std::vector<SampleTap> MeanBilinearTaps(const std::vector<std::vector<PointPixel>>& pixels_of_point,
                                        int64_t image_width, int64_t image_height, int64_t feature_height,
                                        int64_t feature_width) {
  std::vector<SampleTap> taps;
  for (size_t point = 0; point < pixels_of_point.size(); ++point) {
    const std::vector<PointPixel>& pixels = pixels_of_point[point];
    const double share = 1.0 / static_cast<double>(std::max<size_t>(pixels.size(), 1));
    for (const PointPixel& p : pixels) {
      // grid_sample's unnormalization (align_corners false) of the normalized
      // coordinate 2u/W - 1 on a map w wide: ((g + 1) w - 1) / 2 = u w / W - 0.5.
      const double ix = p.u * static_cast<double>(feature_width) / static_cast<double>(image_width) - 0.5;
      const double iy = p.v * static_cast<double>(feature_height) / static_cast<double>(image_height) - 0.5;
      const double x0 = std::floor(ix), y0 = std::floor(iy), fx = ix - x0, fy = iy - y0;
      for (int dy = 0; dy < 2; ++dy) {
        for (int dx = 0; dx < 2; ++dx) {
          const int64_t x = static_cast<int64_t>(x0) + dx, y = static_cast<int64_t>(y0) + dy;
          if (x < 0 || y < 0 || x >= feature_width || y >= feature_height) continue;  // zero padding
          const double w = (dx ? fx : 1 - fx) * (dy ? fy : 1 - fy);
          taps.push_back(
              {static_cast<int64_t>(point), (p.camera * feature_height + y) * feature_width + x, w * share});
        }
      }
    }
  }
  return taps;
}

torch::Tensor SampleRows(const torch::Tensor& x, const SamplePlan& plan) {
  TORCH_CHECK(x.dim() == 3 && x.size(1) == plan.sources, "BEV sampling: expected (B, ", plan.sources,
              ", C) features, got ", x.sizes());
  TORCH_CHECK(plan.device() == x.device(), "BEV sampling: the plan is on ", plan.device(),
              ", the features on ", x.device(), " (SamplePlan::To moves it)");
  if (!x.device().is_cpu()) return SampleRowsGeneric(x, plan);
  return SampleFunction::apply(x, plan);
}

torch::Tensor SampleRowsGeneric(const torch::Tensor& x, const SamplePlan& plan) {
  const torch::Tensor taps =
      x.index_select(1, plan.row_sources) * plan.row_weights.to(x.dtype()).view({1, -1, 1});
  return torch::zeros({x.size(0), plan.rows, x.size(2)}, x.options()).index_add(1, plan.row_of_tap, taps);
}

}  // namespace frontier::bev
