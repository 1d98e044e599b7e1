// Fixed bilinear sampling of image features at BEV points: the lift of the
// ipm and mean_lift view transforms (tasks/bev_model.h). Every BEV point (a
// cell centre at one height) is projected once per rig into the cameras that
// see it; its value is the mean over those cameras of the bilinear
// interpolation of their feature maps. That is a fixed sparse matrix of at
// most 4 taps per (point, camera that sees it), applied to the features:
//
//   out[b, row, :] = sum over the row's taps k of weight[k] * x[b, source[k], :]
//
// Only the points a camera sees are sampled (a camera sees about a sixth of
// the grid), where grid_sample sampled every camera at every point and masked
// the rest away. CPU kernel: parallel over (sample, row), each task owning its
// output row, channels innermost (vectorized), float accumulation for
// bf16/fp16; the backward is the same kernel over the transposed taps, so it
// too owns its rows: no atomics, deterministic. Other devices run the same
// taps as index_select + index_add (autograd derives the backward).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace frontier::bev {

struct SampleTap {
  int64_t row = 0;     // output row (the BEV point)
  int64_t source = 0;  // input row (camera, feature row, feature column)
  double weight = 0;   // bilinear weight / cameras that see the point
};

// The taps twice, compressed by output row (forward) and by input row
// (backward). int64 index tensors, float64 weights; CPU or the features' device.
struct SamplePlan {
  int64_t rows = 0, sources = 0;
  torch::Tensor row_starts;      // (rows + 1): taps of row r at [row_starts[r], row_starts[r + 1])
  torch::Tensor row_sources;     // (E)
  torch::Tensor row_weights;     // (E)
  torch::Tensor row_of_tap;      // (E): the row of each tap, in the same order (other devices)
  torch::Tensor source_starts;   // (sources + 1)
  torch::Tensor source_rows;     // (E)
  torch::Tensor source_weights;  // (E)

  int64_t taps() const { return row_sources.defined() ? row_sources.numel() : 0; }
  torch::Device device() const { return row_starts.device(); }
  SamplePlan To(const torch::Device& device) const;
};

// Taps with a row outside [0, rows) or a source outside [0, sources) throw.
SamplePlan MakeSamplePlan(int64_t rows, int64_t sources, const std::vector<SampleTap>& taps);

// The taps of a mean over cameras of bilinear samples, as grid_sample(mode
// bilinear, padding zeros, align_corners false) takes them: for each point,
// `pixels` holds (camera, u, v) in the camera's pixel coordinates (image
// size image_width x image_height) for every camera that sees it; the feature
// maps are feature_height x feature_width, source = (camera * feature_height
// + y) * feature_width + x. Taps outside the feature map (zero padding) are
// left out.
struct PointPixel {
  int64_t camera = 0;
  double u = 0, v = 0;
};
std::vector<SampleTap> MeanBilinearTaps(const std::vector<std::vector<PointPixel>>& pixels_of_point,
                                        int64_t image_width, int64_t image_height, int64_t feature_height,
                                        int64_t feature_width);

// x (B, plan.sources, C) -> (B, plan.rows, C), in x's dtype. Differentiable in x.
torch::Tensor SampleRows(const torch::Tensor& x, const SamplePlan& plan);

// The same with plain LibTorch ops (index_select, index_add; autograd's
// backward): what other devices run, and the reference of the tests.
torch::Tensor SampleRowsGeneric(const torch::Tensor& x, const SamplePlan& plan);

}  // namespace frontier::bev
