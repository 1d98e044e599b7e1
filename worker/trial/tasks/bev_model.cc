#include "worker/trial/tasks/bev_model.h"

#include <cmath>
#include <map>
#include <mutex>
#include <vector>

namespace frontier::model {
namespace nn = torch::nn;
namespace F = torch::nn::functional;

namespace {

constexpr double kMinPointHeight = -1.0, kMaxPointHeight = 3.0;  // LSS height band, metres
constexpr double kHeadPriorLogit =
    -2.5;  // initial occupancy ~8%, about the data's rate (RetinaNet's prior init)

std::vector<double> SampleHeights(const BevArchSpec& spec) {
  if (spec.view_transform == "ipm") return {0.0};
  std::vector<double> z;
  for (int k = 0; k < spec.heights; ++k) z.push_back((k + 0.5) * spec.max_height / spec.heights);
  return z;
}

}  // namespace

torch::Tensor FrustumCells(const bev::Rig& rig, int fh, int fw, const BevArchSpec& spec) {
  const int n = static_cast<int>(rig.cameras.size()), d = spec.depth_bins;
  torch::Tensor cells = torch::empty({int64_t{n} * d * fh * fw}, torch::kLong);
  int64_t* out = cells.data_ptr<int64_t>();
  const double step = (spec.depth_max - spec.depth_min) / d;
  for (int c = 0; c < n; ++c) {
    const bev::Camera& cam = rig.cameras[c];
    for (int k = 0; k < d; ++k) {
      const double depth = spec.depth_min + (k + 0.5) * step;
      for (int i = 0; i < fh; ++i) {
        for (int j = 0; j < fw; ++j) {
          const bev::Vec3 ray = cam.Ray((j + 0.5) * cam.width / fw, (i + 0.5) * cam.height / fh);
          const double x = cam.position.x + depth * ray.x, y = cam.position.y + depth * ray.y,
                       z = cam.position.z + depth * ray.z;
          const bool in_band = z >= kMinPointHeight && z <= kMaxPointHeight;
          *out++ = in_band ? rig.CellOf(x, y) : -1;
        }
      }
    }
  }
  return cells;
}

std::shared_ptr<const bev::PoolPlan> LssPoolPlan(const bev::Rig& rig, int fh, int fw, const BevArchSpec& spec) {
  // The key is every number the plan depends on, compared exactly.
  std::vector<double> key = {double(rig.grid), rig.resolution,     double(fh),    double(fw),
                             double(spec.depth_bins), spec.depth_min, spec.depth_max};
  for (const bev::Camera& c : rig.cameras) {
    key.insert(key.end(), {c.fx, c.fy, c.cx, c.cy, double(c.width), double(c.height), c.position.x, c.position.y,
                           c.position.z, c.right.x, c.right.y, c.right.z, c.down.x, c.down.y, c.down.z,
                           c.forward.x, c.forward.y, c.forward.z});
  }
  static std::mutex mutex;
  static std::map<std::vector<double>, std::shared_ptr<const bev::PoolPlan>> plans;
  const std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<const bev::PoolPlan>& plan = plans[key];
  if (!plan) {
    const bev::FrustumShape shape{static_cast<int64_t>(rig.cameras.size()), spec.depth_bins, fh, fw};
    plan = std::make_shared<const bev::PoolPlan>(
        bev::MakePoolPlan(FrustumCells(rig, fh, fw, spec), int64_t{rig.grid} * rig.grid, shape));
  }
  return plan;
}

BevNetImpl::BevNetImpl(const ResolvedArch& arch, const bev::Rig& rig)
    : bev_(arch.bev), cameras_(static_cast<int>(rig.cameras.size())), grid_(rig.grid) {
  TORCH_CHECK(bev_.enabled, "BevNet needs an arch with a bev section");
  TORCH_CHECK(bev_.grid == rig.grid, "arch resolved for a ", bev_.grid, " grid, the rig has ", rig.grid);
  const BevArchSpec& spec = bev_.spec;
  const LayerStyle style{arch.norm, arch.norm_groups, arch.activation};
  backbone_ = register_module("backbone", Backbone(arch));
  if (spec.neck != "none") {
    std::vector<int> widths;
    for (size_t i = bev_.neck_from_stage; i < arch.stages.size(); ++i) widths.push_back(arch.stages[i].width);
    neck_ = register_module("neck", Neck(spec.neck, style, widths, bev_.lift_channels, spec.neck_repeats));
  }
  const int features = bev_.lift_channels, fh = bev_.lift_height, fw = bev_.lift_width;
  if (spec.view_transform == "lss") {
    depth_context_ = register_module(
        "depth_context", nn::Conv2d(nn::Conv2dOptions(features, spec.depth_bins + spec.channels, 1)));
    lss_norm_ = register_module("lss_norm", Norm2d(arch.norm, spec.channels, arch.norm_groups));
    bev::PoolRegistry().At(spec.pooling);  // throws naming a variant no one registered
    pooling_ = spec.pooling;
    plan_ = LssPoolPlan(rig, fh, fw, spec);
    device_plan_ = *plan_;
  } else {
    const std::vector<double> heights = SampleHeights(spec);
    const int64_t z = static_cast<int64_t>(heights.size()), g = grid_;
    std::vector<std::vector<bev::PointPixel>> pixels(z * g * g);
    for (int c = 0; c < cameras_; ++c) {
      const bev::Camera& cam = rig.cameras[c];
      TORCH_CHECK(cam.width == rig.cameras[0].width && cam.height == rig.cameras[0].height,
                  "ipm/mean_lift need cameras of one image size");
      for (int64_t k = 0; k < z; ++k) {
        for (int r = 0; r < g; ++r) {
          for (int col = 0; col < g; ++col) {
            double x, y, u, v, depth;
            rig.CellCentre(r, col, &x, &y);
            if (!cam.Project({x, y, heights[k]}, &u, &v, &depth)) continue;
            if (u < 0 || v < 0 || u >= cam.width || v >= cam.height || depth < 0.1) continue;
            pixels[(k * g + r) * g + col].push_back({c, u, v});
          }
        }
      }
    }
    sample_heights_ = static_cast<int>(z);
    const int64_t width = rig.cameras[0].width, height = rig.cameras[0].height;
    sample_plan_ = bev::MakeSamplePlan(z * g * g, int64_t{cameras_} * fh * fw,
                                       bev::MeanBilinearTaps(pixels, width, height, fh, fw));
    reduce_ = register_module(
        "reduce", ConvNormAct(style, static_cast<int>(features * z), spec.channels, 1, 1, 1, true));
  }
  for (const ResolvedStage& stage : bev_.encoder) AppendStage(stage, arch, encoder_);
  encoder_ = register_module("encoder", encoder_);
  const int e = bev_.encoder_features;
  head_conv_ = register_module("head_conv", ConvNormAct(style, e, e, 3, 1, 1, true));
  head_out_ = register_module("head_out", nn::Conv2d(nn::Conv2dOptions(e, 1, 1)));
  torch::NoGradGuard no_grad;
  head_out_->bias.fill_(kHeadPriorLogit);
}

torch::Tensor BevNetImpl::LiftSplat(const torch::Tensor& features, int64_t batch) {
  const int64_t d = bev_.spec.depth_bins, c = bev_.spec.channels;
  torch::Tensor dc = depth_context_(features);  // (B*N, D+C, h, w)
  const int64_t h = dc.size(2), w = dc.size(3);
  if (is_training() && depth_supervised()) depth_logits_ = dc.narrow(1, 0, d);
  const torch::Tensor depth = torch::softmax(dc.narrow(1, 0, d), 1).reshape({batch, cameras_, d, h, w});
  const torch::Tensor context = dc.narrow(1, d, c).permute({0, 2, 3, 1}).reshape({batch, cameras_, h, w, c});
  if (device_plan_.ranks.device() != dc.device()) device_plan_ = plan_->To(dc.device());
  torch::Tensor pooled = bev::Pool(pooling_, depth, context, device_plan_);  // (B, grid*grid, C)
  pooled = pooled.view({batch, grid_, grid_, c}).permute({0, 3, 1, 2}).contiguous();
  return lss_norm_(pooled);
}

torch::Tensor DepthBins(const torch::Tensor& depth, const BevArchSpec& spec) {
  const double step = (spec.depth_max - spec.depth_min) / spec.depth_bins;
  torch::Tensor d = depth.to(torch::kDouble);
  torch::Tensor bins = ((d - spec.depth_min) / step).floor().clamp(-1, spec.depth_bins).to(torch::kLong);
  const torch::Tensor valid = torch::isfinite(d) & d.ge(spec.depth_min) & d.lt(spec.depth_max) & bins.ge(0) &
                              bins.lt(spec.depth_bins);
  return torch::where(valid, bins, torch::full_like(bins, -100));
}

torch::Tensor BevNetImpl::DepthLoss(const torch::Tensor& depth) {
  if (!depth_supervised() || !depth_logits_.defined()) return {};
  torch::Tensor logits = depth_logits_.to(torch::kFloat);  // (B*N, D, h, w)
  depth_logits_ = torch::Tensor();
  TORCH_CHECK(depth.dim() == 4 && depth.size(0) * depth.size(1) == logits.size(0) &&
                  depth.size(2) == logits.size(2) && depth.size(3) == logits.size(3),
              "depth targets ", depth.sizes(), " do not match the depth logits ", logits.sizes());
  torch::Tensor target =
      DepthBins(depth, bev_.spec).reshape({logits.size(0), logits.size(2), logits.size(3)});
  target = target.to(logits.device());
  if (!target.ne(-100).any().item<bool>()) return logits.sum() * 0;  // nothing to supervise in this batch
  return bev_.spec.depth_loss_weight *
         F::cross_entropy(logits, target, F::CrossEntropyFuncOptions().ignore_index(-100));
}

torch::Tensor BevNetImpl::Sample(const torch::Tensor& features, int64_t batch) {
  const int64_t z = sample_heights_, g = grid_, f = features.size(1), h = features.size(2),
                w = features.size(3);
  if (sample_plan_.device() != features.device()) sample_plan_ = sample_plan_.To(features.device());
  // (B*N, F, h, w) -> (B, N*h*w, F): a feature row per (camera, row, column).
  const torch::Tensor rows = features.view({batch, cameras_, f, h, w})
                                 .permute({0, 1, 3, 4, 2})
                                 .reshape({batch, cameras_ * h * w, f});
  torch::Tensor mean = bev::SampleRows(rows, sample_plan_);        // (B, Z*g*g, F)
  mean = mean.view({batch, z, g, g, f}).permute({0, 4, 1, 2, 3});  // (B, F, Z, g, g)
  return reduce_(mean.reshape({batch, f * z, g, g}));
}

torch::Tensor BevNetImpl::Lift(const torch::Tensor& x) {
  const int64_t batch = x.size(0);
  TORCH_CHECK(x.size(1) == 3 * cameras_, "BevNet expects ", 3 * cameras_, " input channels (", cameras_,
              " RGB cameras), got ", x.size(1));
  torch::Tensor features = ImageFeatures(x);
  return bev_.spec.view_transform == "lss" ? LiftSplat(features, batch) : Sample(features, batch);
}

torch::Tensor BevNetImpl::ImageFeatures(const torch::Tensor& x) {
  const int64_t batch = x.size(0), h = x.size(2), w = x.size(3);
  const torch::Tensor images = x.reshape({batch * cameras_, 3, h, w});
  if (!neck_) return backbone_(images);
  std::vector<torch::Tensor> maps = backbone_->Stages(images);
  maps.erase(maps.begin(), maps.begin() + bev_.neck_from_stage);
  return neck_(maps);
}

torch::Tensor BevNetImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = encoder_->forward(Lift(x));
  y = head_out_(head_conv_(y));
  if (y.size(2) != grid_ || y.size(3) != grid_) {
    y = F::interpolate(y, F::InterpolateFuncOptions()
                              .size(std::vector<int64_t>{grid_, grid_})
                              .mode(torch::kBilinear)
                              .align_corners(false));
  }
  return y.squeeze(1);
}

}  // namespace frontier::model
