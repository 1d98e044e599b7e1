// The bev-synthetic task: scene generator geometry and determinism, fused vs
// naive BEV pooling, the BEV network, and a short training run that learns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"
#include "worker/trial/data/bev_scene.h"
#include "worker/trial/data/dataset.h"
#include "worker/trial/measure/flop_counter.h"
#include "worker/trial/ops/bev_pool.h"
#include "worker/trial/ops/bev_sample.h"
#include "worker/trial/tasks/bev_model.h"
#include "worker/trial/trainer.h"

namespace frontier {
namespace {

BevTaskSpec SmallTask() {
  BevTaskSpec t;
  t.cameras = 6;
  t.height = 32;
  t.width = 88;
  t.grid = 48;
  t.resolution = 1.0;
  t.noise = 0;
  return t;
}

std::vector<uint8_t> RenderCamera(const bev::Scene& scene, const bev::Rig& rig, int camera, double noise,
                                  std::vector<float>* depth = nullptr) {
  const bev::Camera& cam = rig.cameras[camera];
  std::vector<uint8_t> rgb(3 * cam.height * cam.width);
  if (depth) depth->assign(cam.height * cam.width, 0);
  bev::Render(scene, rig, camera, noise, rgb.data(), depth ? depth->data() : nullptr);
  return rgb;
}

TEST(BevSceneTest, SameSeedSameSceneImagesAndLabel) {
  const BevTaskSpec task = SmallTask();
  const bev::Rig rig = bev::MakeRig(task);
  const bev::Scene a = bev::MakeScene(task, 42), b = bev::MakeScene(task, 42), c = bev::MakeScene(task, 43);
  ASSERT_EQ(a.boxes.size(), b.boxes.size());
  for (size_t i = 0; i < a.boxes.size(); ++i) {
    EXPECT_EQ(a.boxes[i].x, b.boxes[i].x);
    EXPECT_EQ(a.boxes[i].yaw, b.boxes[i].yaw);
  }
  for (int cam = 0; cam < task.cameras; ++cam) {
    EXPECT_EQ(RenderCamera(a, rig, cam, 0.05), RenderCamera(b, rig, cam, 0.05)) << "camera " << cam;
  }
  bool differs = a.boxes.size() != c.boxes.size();
  for (size_t i = 0; !differs && i < a.boxes.size(); ++i) differs = a.boxes[i].x != c.boxes[i].x;
  EXPECT_TRUE(differs) << "seeds 42 and 43 gave the same scene";
}

TEST(BevSceneTest, DatasetIsDeterministicAcrossThreadCounts) {
  BevTaskSpec task = SmallTask();
  task.train_samples = 6;
  task.val_samples = 2;
  task.test_samples = 2;
  task.noise = 0.02;
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const Dataset one = MakeBevSynthetic(task);
  at::set_num_threads(2);
  const Dataset two = MakeBevSynthetic(task);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one.train.images, two.train.images));
  EXPECT_TRUE(torch::equal(one.train.labels, two.train.labels));
  EXPECT_TRUE(torch::equal(one.test.images, two.test.images));
  EXPECT_FALSE(torch::equal(one.train.images.slice(0, 0, 2), one.val.images)) << "splits must be independent";
  EXPECT_EQ(one.train.images.sizes(), (std::vector<int64_t>{6, 18, 32, 88}));
  EXPECT_EQ(one.train.labels.sizes(), (std::vector<int64_t>{6, 48, 48}));
}

// Depth targets (BEVDepth-style supervision of lss): the nearest ray-cast
// depth of each image patch at the feature resolution, +inf for sky only.
TEST(BevSceneTest, DepthTargetsAreTheNearestDepthOfEachPatch) {
  BevTaskSpec task = SmallTask();
  task.train_samples = 3;
  task.val_samples = 1;
  task.test_samples = 1;
  const Dataset data = MakeBevSynthetic(task, 8, 22);
  EXPECT_FALSE(MakeBevSynthetic(task).train.depth.defined()) << "depth targets only when asked for";
  ASSERT_EQ(data.train.depth.sizes(), (std::vector<int64_t>{3, 6, 8, 22}));
  ASSERT_EQ(data.val.depth.sizes(), (std::vector<int64_t>{1, 6, 8, 22}));
  const bev::Rig rig = bev::MakeRig(task);
  for (int i = 0; i < 3; ++i) {
    const bev::Scene scene = bev::MakeScene(task, bev::SampleSeed(task.data_seed, 0, i));
    for (int cam : {0, 3}) {
      std::vector<float> depth;
      RenderCamera(scene, rig, cam, 0, &depth);
      const torch::Tensor patch_depth = data.train.depth[i][cam].contiguous();
      auto target = patch_depth.accessor<float, 2>();
      for (int a = 0; a < 8; ++a) {
        for (int b = 0; b < 22; ++b) {
          float nearest = std::numeric_limits<float>::infinity();
          for (int r = 4 * a; r < 4 * a + 4; ++r) {
            for (int q = 4 * b; q < 4 * b + 4; ++q) nearest = std::min(nearest, depth[r * 88 + q]);
          }
          ASSERT_EQ(target[a][b], nearest)
              << "sample " << i << " camera " << cam << " patch " << a << "," << b;
        }
      }
      // Pitched 8 degrees down with a 17 degree half field of view: the top
      // rows see sky (unless a box is there), the bottom row sees the ground
      // a few metres away.
      for (int b = 0; b < 22; ++b) EXPECT_LT(target[7][b], 8.0f);
    }
  }
}

TEST(BevSceneTest, RigProjectsItsOwnRaysAndCellsRoundTrip) {
  const bev::Rig rig = bev::MakeRig(SmallTask());
  ASSERT_EQ(rig.cameras.size(), 6u);
  for (const bev::Camera& cam : rig.cameras) {
    const bev::Vec3 r = cam.Ray(10.5, 20.5);
    const bev::Vec3 p{cam.position.x + 7 * r.x, cam.position.y + 7 * r.y, cam.position.z + 7 * r.z};
    double u, v, depth;
    ASSERT_TRUE(cam.Project(p, &u, &v, &depth));
    EXPECT_NEAR(u, 10.5, 1e-9);
    EXPECT_NEAR(v, 20.5, 1e-9);
    EXPECT_NEAR(depth, 7, 1e-9);
  }
  // Camera 0 looks along +x, camera 3 (of 6) along -x.
  EXPECT_NEAR(rig.cameras[0].forward.x, std::cos(8 * M_PI / 180), 1e-12);
  EXPECT_NEAR(rig.cameras[3].forward.x, -std::cos(8 * M_PI / 180), 1e-12);
  // Row 0 is the far front, column 0 the far left.
  EXPECT_EQ(rig.CellOf(23.5, 23.5), 0);
  EXPECT_EQ(rig.CellOf(-23.5, -23.5), 48 * 48 - 1);
  EXPECT_EQ(rig.CellOf(24.5, 0), -1);
  double x, y;
  rig.CellCentre(14, 24, &x, &y);
  EXPECT_DOUBLE_EQ(x, 9.5);
  EXPECT_DOUBLE_EQ(y, -0.5);
  EXPECT_EQ(rig.CellOf(x, y), 14 * 48 + 24);
}

// A red 4 x 2 x 1.5 m box 10 m ahead: worked out by hand.
//  - Label: cell centres x = 24 - (r + 0.5), y = 24 - (c + 0.5); the footprint
//    x in [8, 12], y in [-1, 1] holds exactly rows 12..15 and columns 23..24.
//  - Camera 0 (at x = 1 m, 1.6 m high, looking +x, pitched 8 degrees down)
//    sees the box centre (10, 0, 0.75) at u = cx = 44, v = cy + fy tan(angle)
//    where the angle below the axis is 8 - atan(0.85 / 9) = 2.6 degrees; the
//    front face is ~7 m away along the axis.
//  - Camera 3 looks backwards and sees nothing of it.
TEST(BevSceneTest, BoxAheadAppearsInFrontCameraAndLabel) {
  const BevTaskSpec task = SmallTask();
  const bev::Rig rig = bev::MakeRig(task);
  bev::Scene empty;
  empty.seed = 5;
  bev::Scene scene = empty;
  bev::Box box;
  box.x = 10;
  box.y = 0;
  box.yaw = 0;
  box.length = 4;
  box.width = 2;
  box.height = 1.5;
  box.color[0] = 220;
  box.color[1] = 20;
  box.color[2] = 20;
  scene.boxes.push_back(box);

  std::vector<uint8_t> label(48 * 48);
  bev::Rasterize(scene, rig, label.data());
  int occupied = 0;
  for (int r = 0; r < 48; ++r) {
    for (int c = 0; c < 48; ++c) {
      const bool expected = r >= 12 && r <= 15 && c >= 23 && c <= 24;
      EXPECT_EQ(label[r * 48 + c], expected ? 1 : 0) << "cell " << r << "," << c;
      occupied += label[r * 48 + c];
    }
  }
  EXPECT_EQ(occupied, 8);

  const bev::Camera& cam = rig.cameras[0];
  const double angle = (8 - std::atan(0.85 / 9) * 180 / M_PI) * M_PI / 180;
  const int v = static_cast<int>(std::floor(cam.cy + cam.fy * std::tan(angle)));
  const int u = 44;
  std::vector<float> depth;
  const std::vector<uint8_t> with = RenderCamera(scene, rig, 0, 0, &depth);
  const std::vector<uint8_t> without = RenderCamera(empty, rig, 0, 0);
  const int h = cam.height, w = cam.width;
  const uint8_t red = with[(0 * h + v) * w + u], green = with[(1 * h + v) * w + u],
                blue = with[(2 * h + v) * w + u];
  EXPECT_GT(red, 2 * green) << "pixel (" << v << ", " << u << ") should show the red box";
  EXPECT_GT(red, 2 * blue);
  EXPECT_NE(with, without);
  EXPECT_GT(depth[v * w + u], 6.5);
  EXPECT_LT(depth[v * w + u], 7.5);
  // The box covers about 2 m / 7 m * fx = 15 columns around the centre, not the image edges.
  EXPECT_EQ(with[(0 * h + v) * w + 2], without[(0 * h + v) * w + 2]);
  EXPECT_EQ(RenderCamera(scene, rig, 3, 0), RenderCamera(empty, rig, 3, 0));
}

TEST(BevSceneTest, BoxBehindAnotherIsOccludedButLabelled) {
  const BevTaskSpec task = SmallTask();
  const bev::Rig rig = bev::MakeRig(task);
  bev::Scene near_only, both;
  bev::Box near_box;
  near_box.x = 8, near_box.length = 2, near_box.width = 4, near_box.height = 3;
  near_box.color[2] = 220;  // blue, tall, wide
  bev::Box far_box;
  far_box.x = 16, far_box.length = 2, far_box.width = 1, far_box.height = 1;
  far_box.color[0] = 220;  // red, small, hidden behind
  near_only.boxes = {near_box};
  both.boxes = {near_box, far_box};
  EXPECT_EQ(RenderCamera(near_only, rig, 0, 0), RenderCamera(both, rig, 0, 0));
  std::vector<uint8_t> label(48 * 48);
  bev::Rasterize(both, rig, label.data());
  EXPECT_EQ(label[rig.CellOf(16, 0.2)], 1);
}

// ---- pooling ----

struct PoolCase {
  const char* name;
  int64_t batch, points, channels, cells;
  int64_t cell_lo, cell_hi;  // point cells uniform in [lo, hi]; outside [0, cells) means off the grid
};

class BevPoolTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(BevPoolTest, FusedMatchesNaiveForwardAndGradient) {
  const PoolCase& p = GetParam();
  torch::manual_seed(7);
  const torch::Tensor cells = torch::randint(p.cell_lo, p.cell_hi + 1, {p.points}, torch::kLong);
  const bev::PoolPlan plan = bev::MakePoolPlan(cells, p.cells);
  const torch::Tensor x0 = torch::randn({p.batch, p.points, p.channels}, torch::kDouble);
  const torch::Tensor upstream = torch::randn({p.batch, p.cells, p.channels}, torch::kDouble);

  torch::Tensor xn = x0.clone().requires_grad_(true), xf = x0.clone().requires_grad_(true);
  const torch::Tensor yn = bev::NaivePool(xn, plan), yf = bev::FusedPool(xf, plan);
  ASSERT_EQ(yf.sizes(), yn.sizes());
  EXPECT_TRUE(torch::allclose(yf, yn, 1e-12, 1e-12)) << (yf - yn).abs().max().item<double>();
  (yn * upstream).sum().backward();
  (yf * upstream).sum().backward();
  EXPECT_TRUE(torch::allclose(xf.grad(), xn.grad(), 1e-12, 1e-12));

  // Independent reference: a plain loop.
  torch::Tensor ref = torch::zeros_like(yn);
  auto c = cells.accessor<int64_t, 1>();
  for (int64_t i = 0; i < p.points; ++i) {
    if (c[i] >= 0 && c[i] < p.cells) ref.select(1, c[i]).add_(x0.select(1, i));
  }
  EXPECT_TRUE(torch::allclose(yf, ref, 1e-10, 1e-10));

  // Finite differences of L = sum(pool(x) * upstream) at a few entries.
  for (int trial = 0; trial < 5; ++trial) {
    const int64_t b = trial % p.batch, i = (trial * 7919) % p.points, ch = trial % p.channels;
    auto loss = [&](double delta) {
      torch::Tensor x = x0.clone();
      x[b][i][ch] += delta;
      return (bev::FusedPool(x, plan) * upstream).sum().item<double>();
    };
    const double numeric = (loss(1e-6) - loss(-1e-6)) / 2e-6;
    EXPECT_NEAR(xf.grad()[b][i][ch].item<double>(), numeric, 1e-6) << "entry " << b << "," << i << "," << ch;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BevPoolTest,
    ::testing::Values(PoolCase{"random_some_outside", 3, 2000, 5, 64, -10, 70},
                      PoolCase{"empty_cells", 2, 300, 4, 1000, 0, 9},
                      PoolCase{"all_in_one_cell", 2, 500, 3, 16, 7, 7},
                      PoolCase{"all_outside", 2, 100, 3, 16, 16, 40},
                      PoolCase{"mostly_one_point_per_cell", 1, 4096, 8, 1 << 16, 0, (1 << 16) - 1}),
    [](const ::testing::TestParamInfo<PoolCase>& info) { return std::string(info.param.name); });

// Random lift factors of a frustum shape: depth a softmax over the bins (as
// the network's), features and the upstream gradient standard normal, all
// rounded to `dtype`.
struct Factors {
  torch::Tensor depth, features, upstream;
};

Factors RandomFactors(const bev::FrustumShape& s, int64_t batch, int64_t channels, int64_t cells,
                      torch::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  Factors f;
  f.depth = torch::softmax(torch::randn({batch, s.cameras, s.depth_bins, s.height, s.width}, torch::kDouble), 2)
                .to(dtype);
  f.features = torch::randn({batch, s.cameras, s.height, s.width, channels}, torch::kDouble).to(dtype);
  f.upstream = torch::randn({batch, cells, channels}, torch::kDouble).to(dtype);
  return f;
}

// A pooling's output and its two input gradients for sum(y * upstream).
struct Pooled {
  torch::Tensor out, grad_depth, grad_features;
};

Pooled RunPool(const std::string& variant, const Factors& f, const bev::PoolPlan& plan) {
  torch::Tensor d = f.depth.clone().requires_grad_(true), x = f.features.clone().requires_grad_(true);
  torch::Tensor y = bev::Pool(variant, d, x, plan);
  (y * f.upstream).sum().backward();
  return {y.detach(), d.grad(), x.grad()};
}

// The reference: naive pooling in double of the same (rounded) inputs. With
// abs() of every input it gives each result's scale S = sum |terms|, which
// bounds the rounding error of any summation order.
Pooled Reference(const Factors& f, const bev::PoolPlan& plan, bool scale) {
  auto prep = [&](const torch::Tensor& t) { return scale ? t.to(torch::kDouble).abs() : t.to(torch::kDouble); };
  return RunPool("naive", Factors{prep(f.depth), prep(f.features), prep(f.upstream)}, plan);
}

// Error bound of an implementation in `dtype` relative to S (stated in
// docs/bev.md): accumulation in double / float over at most n terms per sum
// gives n * u (u = 2^-53 / 2^-24); bf16 and fp16 accumulate in float and
// round the result once, so 2^-8 (bf16) / 2^-10 (fp16), twice that rounding.
double RelativeBound(torch::ScalarType dtype, int64_t n) {
  switch (dtype) {
    case torch::kDouble: return (n + 2) * std::ldexp(1.0, -53);
    case torch::kFloat: return (n + 2) * std::ldexp(1.0, -24);
    case torch::kBFloat16: return std::ldexp(1.0, -8);
    default: return std::ldexp(1.0, -10);
  }
}

// Every element within relative * S of the reference (exact zeros where S is
// 0, e.g. empty cells); a failure names the worst element.
void ExpectWithin(const torch::Tensor& actual, const torch::Tensor& expected, const torch::Tensor& scale,
                  double relative, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const torch::Tensor excess = (actual.to(torch::kDouble) - expected).abs() - relative * scale;
  const int64_t worst = excess.flatten().nan_to_num(1e300).argmax().item<int64_t>();
  EXPECT_LE(excess.flatten()[worst].item<double>(), 0)
      << what << ": worst at flat index " << worst << ": " << actual.flatten()[worst].item<double>() << " vs "
      << expected.flatten()[worst].item<double>() << ", bound " << relative * scale.flatten()[worst].item<double>();
}

// The longest sum any variant computes: a cell's points, a feature row's
// depth bins, or the channels of a depth gradient.
int64_t LongestSum(const bev::PoolPlan& plan, int64_t channels) {
  int64_t n = channels;
  if (plan.interval_lengths.numel() > 0) n = std::max(n, plan.interval_lengths.max().item<int64_t>());
  return std::max(n, plan.shape.depth_bins);
}

void ExpectMatchesReference(const std::string& variant, const Factors& f, const bev::PoolPlan& plan,
                            const std::string& what) {
  const Pooled ref = Reference(f, plan, false), scale = Reference(f, plan, true);
  const Pooled got = RunPool(variant, f, plan);
  EXPECT_EQ(got.out.scalar_type(), f.features.scalar_type()) << what;
  EXPECT_EQ(got.grad_depth.scalar_type(), f.depth.scalar_type()) << what;
  const double bound = RelativeBound(f.features.scalar_type(), LongestSum(plan, f.features.size(-1)));
  ExpectWithin(got.out, ref.out, scale.out, bound, what + " forward");
  ExpectWithin(got.grad_depth, ref.grad_depth, scale.grad_depth, bound, what + " depth gradient");
  ExpectWithin(got.grad_features, ref.grad_features, scale.grad_features, bound, what + " feature gradient");
}

bev::PoolPlan RandomPlan(const bev::FrustumShape& shape, int64_t cells, int64_t lo, int64_t hi, uint64_t seed) {
  torch::manual_seed(seed);
  return bev::MakePoolPlan(torch::randint(lo, hi + 1, {shape.points()}, torch::kLong), cells, shape);
}

// Every registered pooling variant against the reference (naive), forward
// and both input gradients, on cells with points outside the grid and empty
// cells.
TEST(BevPoolRegistryTest, EveryVariantMatchesTheReference) {
  EXPECT_EQ(bev::PoolRegistry().Names(), (std::vector<std::string>{"depth_fused", "fused", "naive"}));
  const bev::FrustumShape shape{3, 5, 4, 6};
  const bev::PoolPlan plan = RandomPlan(shape, 36, -5, 40, 11);
  const Factors f = RandomFactors(shape, 2, 3, 36, torch::kDouble, 12);
  for (const std::string& name : bev::PoolRegistry().Names()) ExpectMatchesReference(name, f, plan, name);
  EXPECT_THROW(bev::Pool("scatter", f.depth, f.features, plan), std::invalid_argument);
}

// depth_fused against the reference: random draws per case and dtype.
struct DepthCase {
  const char* name;
  bev::FrustumShape shape;
  int64_t batch, channels, cells;
  int64_t cell_lo, cell_hi;  // point cells uniform in [lo, hi]; outside [0, cells) means off the grid
  int64_t only_point;        // >= 0: every other point off the grid, this one in cell 3
};

class BevDepthPoolTest : public ::testing::TestWithParam<std::tuple<DepthCase, torch::ScalarType>> {};

TEST_P(BevDepthPoolTest, MatchesTheReferenceForwardAndBothGradients) {
  const auto& [c, dtype] = GetParam();
  for (uint64_t draw = 0; draw < 4; ++draw) {
    bev::PoolPlan plan = RandomPlan(c.shape, c.cells, c.cell_lo, c.cell_hi, 100 + draw);
    if (c.only_point >= 0) {
      torch::Tensor cells = torch::full({c.shape.points()}, -1, torch::kLong);
      cells[c.only_point] = 3;
      plan = bev::MakePoolPlan(cells, c.cells, c.shape);
      ASSERT_EQ(plan.interval_cells.numel(), 1);
    }
    const Factors f = RandomFactors(c.shape, c.batch, c.channels, c.cells, dtype, 200 + draw);
    ExpectMatchesReference("depth_fused", f, plan, std::string(c.name) + " draw " + std::to_string(draw));
    if (dtype == torch::kFloat) {  // the naive variant itself, in float, within both bounds
      const Pooled naive = RunPool("naive", f, plan), fused = RunPool("depth_fused", f, plan);
      const Pooled scale = Reference(f, plan, true);
      ExpectWithin(fused.out, naive.out.to(torch::kDouble), scale.out,
                   2 * RelativeBound(dtype, LongestSum(plan, c.channels)), "vs naive in float");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BevDepthPoolTest,
    ::testing::Combine(
        ::testing::Values(DepthCase{"random_some_outside", {2, 5, 3, 4}, 3, 5, 64, -10, 70, -1},
                          DepthCase{"wide_channels", {1, 4, 2, 3}, 2, 67, 16, 0, 15, -1},
                          DepthCase{"empty_cells", {2, 3, 2, 5}, 2, 4, 1000, 0, 9, -1},
                          DepthCase{"all_in_one_cell", {3, 6, 2, 2}, 2, 3, 16, 7, 7, -1},
                          DepthCase{"all_outside", {2, 2, 2, 2}, 2, 3, 16, 16, 40, -1},
                          DepthCase{"single_point", {2, 3, 2, 2}, 2, 9, 16, 0, 0, 17},
                          DepthCase{"one_point_per_cell", {2, 8, 8, 8}, 1, 8, 1 << 16, 0, (1 << 16) - 1, -1}),
        ::testing::Values(torch::kDouble, torch::kFloat, torch::kBFloat16)),
    [](const ::testing::TestParamInfo<std::tuple<DepthCase, torch::ScalarType>>& info) {
      return std::string(std::get<0>(info.param).name) + "_" +
             std::string(c10::toString(std::get<1>(info.param)));
    });

// Independent of naive: central finite differences of sum(y * upstream) in
// double, for entries of both inputs.
TEST(BevDepthPoolTest, GradientsMatchFiniteDifferences) {
  const bev::FrustumShape shape{2, 5, 3, 4};
  const bev::PoolPlan plan = RandomPlan(shape, 64, -10, 70, 5);
  const Factors f = RandomFactors(shape, 2, 5, 64, torch::kDouble, 6);
  const Pooled got = RunPool("depth_fused", f, plan);
  auto loss = [&](const torch::Tensor& d, const torch::Tensor& x) {
    return (bev::DepthFusedPool(d, x, plan) * f.upstream).sum().item<double>();
  };
  int checked_nonzero = 0;
  for (int64_t flat = 0; flat < f.depth.numel(); flat += 7) {
    torch::Tensor up = f.depth.clone(), down = f.depth.clone();
    up.view(-1)[flat] += 1e-6;
    down.view(-1)[flat] -= 1e-6;
    const double numeric = (loss(up, f.features) - loss(down, f.features)) / 2e-6;
    EXPECT_NEAR(got.grad_depth.view(-1)[flat].item<double>(), numeric, 1e-6) << "depth entry " << flat;
    checked_nonzero += std::abs(numeric) > 1e-3;
  }
  for (int64_t flat = 0; flat < f.features.numel(); flat += 5) {
    torch::Tensor up = f.features.clone(), down = f.features.clone();
    up.view(-1)[flat] += 1e-6;
    down.view(-1)[flat] -= 1e-6;
    const double numeric = (loss(f.depth, up) - loss(f.depth, down)) / 2e-6;
    EXPECT_NEAR(got.grad_features.view(-1)[flat].item<double>(), numeric, 1e-6) << "feature entry " << flat;
    checked_nonzero += std::abs(numeric) > 1e-3;
  }
  EXPECT_GT(checked_nonzero, 10) << "the check must see non-zero gradients";
}

// On the frustum of a real rig (the shapes a network gives it), in float and
// bf16, from non-contiguous features as the network passes them.
TEST(BevDepthPoolTest, MatchesTheReferenceOnARigFrustum) {
  BevTaskSpec task = SmallTask();
  task.cameras = 4;
  BevArchSpec spec;
  spec.depth_bins = 8;
  const auto plan = model::LssPoolPlan(bev::MakeRig(task), 8, 22, spec);
  ASSERT_GT(plan->ranks.numel(), 100);
  for (torch::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
    Factors f = RandomFactors(plan->shape, 2, 16, plan->cells, dtype, 9);
    f.features = f.features.permute({0, 1, 4, 2, 3}).contiguous().permute({0, 1, 3, 4, 2});
    ASSERT_FALSE(f.features.is_contiguous());
    ExpectMatchesReference("depth_fused", f, *plan, c10::toString(dtype));
  }
}

// The kernels' mixed precision: bf16 depth with float features is pooled in
// float (the promoted type), as naive's product would be.
TEST(BevDepthPoolTest, MixedDtypesPoolInThePromotedType) {
  const bev::FrustumShape shape{2, 3, 2, 2};
  const bev::PoolPlan plan = RandomPlan(shape, 16, 0, 15, 1);
  Factors f = RandomFactors(shape, 2, 4, 16, torch::kFloat, 2);
  f.depth = f.depth.to(torch::kBFloat16);
  const Pooled naive = RunPool("naive", f, plan), fused = RunPool("depth_fused", f, plan);
  EXPECT_EQ(fused.out.scalar_type(), torch::kFloat);
  EXPECT_EQ(fused.grad_depth.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::allclose(fused.out, naive.out, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(fused.grad_features, naive.grad_features, 1e-5, 1e-6));
}

TEST(BevDepthPoolTest, RejectsInputsThatDoNotFitThePlan) {
  const bev::FrustumShape shape{2, 3, 2, 2};
  const bev::PoolPlan plan = RandomPlan(shape, 16, 0, 15, 1);
  const Factors f = RandomFactors(shape, 2, 4, 16, torch::kFloat, 2);
  auto expect_error = [](const torch::Tensor& d, const torch::Tensor& x, const bev::PoolPlan& p,
                         const std::string& expected) {
    std::string message = "no error";
    try {
      bev::DepthFusedPool(d, x, p);
    } catch (const c10::Error& e) {
      message = e.what_without_backtrace();
    }
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  expect_error(f.depth.narrow(2, 0, 2), f.features, plan, "depth must be (B, 2, 3, 2, 2)");
  expect_error(f.depth, f.features.narrow(0, 0, 1), plan, "features must be (2, 2, 2, 2, C)");
  expect_error(f.depth, f.features, bev::MakePoolPlan(plan.point_cells, 16),
               "needs a plan built with the frustum's shape");
  expect_error(f.depth.to(torch::kLong), f.features, plan, "must be floating");
  EXPECT_THROW(bev::MakePoolPlan(plan.point_cells, 16, bev::FrustumShape{2, 3, 2, 3}), c10::Error);
}

// The plan's depth_fused half for a hand-made case: 2 cameras x 2 bins x 1 x 2
// pixels, so point p = (camera, bin, column) = 4 * camera + 2 * bin + column
// and its feature row is 2 * camera + column.
TEST(BevPoolPlanTest, FeatureIntervalsGroupThePointsOfEachPixel) {
  //                                 p: 0  1   2  3  4  5   6  7
  const torch::Tensor cells = torch::tensor({5, 2, 5, -1, 2, 0, 9, 5}, torch::kLong);
  const bev::PoolPlan plan = bev::MakePoolPlan(cells, 8, bev::FrustumShape{2, 2, 1, 2});
  EXPECT_TRUE(torch::equal(plan.ranks, torch::tensor({5, 1, 4, 0, 2, 7}, torch::kLong)));
  EXPECT_TRUE(torch::equal(plan.feature_ranks, torch::tensor({3, 1, 2, 0, 0, 3}, torch::kLong)));
  // Rows: 0 <- points 0, 2; 1 <- 1; 2 <- 4; 3 <- 5, 7 (6 is off the grid).
  EXPECT_TRUE(torch::equal(plan.feature_points, torch::tensor({0, 2, 1, 4, 5, 7}, torch::kLong)));
  EXPECT_TRUE(torch::equal(plan.feature_point_cells, torch::tensor({5, 5, 2, 2, 0, 5}, torch::kLong)));
  EXPECT_TRUE(torch::equal(plan.feature_interval_rows, torch::tensor({0, 1, 2, 3}, torch::kLong)));
  EXPECT_TRUE(torch::equal(plan.feature_interval_starts, torch::tensor({0, 2, 3, 4}, torch::kLong)));
  EXPECT_TRUE(torch::equal(plan.feature_interval_lengths, torch::tensor({2, 1, 1, 2}, torch::kLong)));
}

TEST(BevPoolPlanTest, OnePlanPerGeometryIsShared) {
  const bev::Rig rig = bev::MakeRig(SmallTask());
  BevArchSpec spec;
  const auto a = model::LssPoolPlan(rig, 8, 22, spec), b = model::LssPoolPlan(rig, 8, 22, spec);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_TRUE(torch::equal(a->point_cells, model::FrustumCells(rig, 8, 22, spec)));
  EXPECT_EQ(a->shape.depth_bins, spec.depth_bins);
  spec.depth_bins = 12;
  EXPECT_NE(model::LssPoolPlan(rig, 8, 22, spec).get(), a.get());
  BevTaskSpec wider = SmallTask();
  wider.fov_deg = 90;
  EXPECT_NE(model::LssPoolPlan(bev::MakeRig(wider), 8, 22, BevArchSpec{}).get(), a.get());
}

TEST(BevPoolPlanTest, IntervalsCoverEachCellOnceInOrder) {
  const torch::Tensor cells = torch::tensor({3, -1, 3, 0, 7, 3, 99, 0}, torch::kLong);
  const bev::PoolPlan plan = bev::MakePoolPlan(cells, 8);
  EXPECT_EQ(plan.ranks.numel(), 6);  // -1 and 99 are off the grid
  EXPECT_TRUE(torch::equal(plan.ranks, torch::tensor({3, 7, 0, 2, 5, 4}, torch::kLong)));
  EXPECT_TRUE(torch::equal(plan.interval_cells, torch::tensor({0, 3, 7}, torch::kLong)));
  EXPECT_TRUE(torch::equal(plan.interval_starts, torch::tensor({0, 2, 5}, torch::kLong)));
  EXPECT_TRUE(torch::equal(plan.interval_lengths, torch::tensor({2, 3, 1}, torch::kLong)));
}

TEST(BevPoolPlanTest, Bf16FusedAccumulatesInFloat) {
  torch::manual_seed(3);
  const torch::Tensor cells = torch::randint(0, 4, {4000}, torch::kLong);
  const bev::PoolPlan plan = bev::MakePoolPlan(cells, 4);
  const torch::Tensor x = torch::rand({1, 4000, 2});
  const torch::Tensor exact = bev::NaivePool(x.to(torch::kDouble), plan);
  const torch::Tensor fused = bev::FusedPool(x.to(torch::kBFloat16), plan).to(torch::kDouble);
  // ~1000 points of ~0.5 per cell: a bf16 running sum would stall near 256; float accumulation ends within
  // the rounding of the inputs and the final bf16 cast (relative 2^-8).
  EXPECT_TRUE(torch::allclose(fused, exact, 1e-2, 0)) << (fused - exact).abs().max().item<double>();
}

// ---- network ----

// ipm/mean_lift sampling (ops/bev_sample.h): random points seen by random
// cameras at random pixels, the edges of the image included.
struct SampleCase {
  int64_t cameras = 3, image_width = 40, image_height = 20, feature_height = 5, feature_width = 10;
  std::vector<std::vector<bev::PointPixel>> pixels;
};

SampleCase RandomSampleCase(int64_t points, uint64_t seed) {
  SampleCase c;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  c.pixels.resize(points);
  for (auto& seen : c.pixels) {
    for (int64_t cam = 0; cam < c.cameras; ++cam) {
      if (unit(rng) < 0.5) continue;
      double u = unit(rng) * c.image_width, v = unit(rng) * c.image_height;
      if (unit(rng) < 0.2) u = unit(rng) < 0.5 ? 0.0 : std::nextafter(double(c.image_width), 0.0);
      if (unit(rng) < 0.2) v = unit(rng) < 0.5 ? 0.0 : std::nextafter(double(c.image_height), 0.0);
      seen.push_back({cam, u, v});
    }
  }
  return c;
}

// What ipm/mean_lift computed before the sparse taps: every camera samples
// every point with grid_sample, masked to the cameras that see it, averaged.
// features (N, C, h, w) -> (P, C).
torch::Tensor GridSampleMean(const torch::Tensor& features, const SampleCase& c) {
  const int64_t points = static_cast<int64_t>(c.pixels.size());
  torch::Tensor grid = torch::full({c.cameras, points, 1, 2}, -2.0, torch::kDouble);
  torch::Tensor mask = torch::zeros({c.cameras, 1, points, 1}, torch::kDouble);
  for (int64_t p = 0; p < points; ++p) {
    for (const bev::PointPixel& px : c.pixels[p]) {
      grid[px.camera][p][0][0] = 2 * px.u / c.image_width - 1;
      grid[px.camera][p][0][1] = 2 * px.v / c.image_height - 1;
      mask[px.camera][0][p][0] = 1;
    }
  }
  namespace F = torch::nn::functional;
  const torch::Tensor sampled = F::grid_sample(
      features, grid.to(features.scalar_type()),
      F::GridSampleFuncOptions().mode(torch::kBilinear).padding_mode(torch::kZeros).align_corners(false));
  const torch::Tensor m = mask.to(features.scalar_type());
  return ((sampled * m).sum(0) / m.sum(0).clamp_min(1)).squeeze(-1).t();  // (P, C)
}

bev::SamplePlan PlanOf(const SampleCase& c) {
  return bev::MakeSamplePlan(
      static_cast<int64_t>(c.pixels.size()), c.cameras * c.feature_height * c.feature_width,
      bev::MeanBilinearTaps(c.pixels, c.image_width, c.image_height, c.feature_height, c.feature_width));
}

// (N, C, h, w) -> (1, N*h*w, C), as BevNet feeds the sampling.
torch::Tensor FeatureRows(const torch::Tensor& features) {
  return features.permute({0, 2, 3, 1}).reshape({1, -1, features.size(1)});
}

TEST(BevSampleTest, MatchesTheGridSampleMeanForwardAndGradient) {
  for (uint64_t seed : {1, 2, 3}) {
    const SampleCase c = RandomSampleCase(200, seed);
    torch::manual_seed(seed);
    const torch::Tensor features =
        torch::randn({c.cameras, 7, c.feature_height, c.feature_width}, torch::kDouble).requires_grad_();
    const torch::Tensor expected = GridSampleMean(features, c);
    const torch::Tensor weights = torch::randn_like(expected);
    const torch::Tensor expected_grad = torch::autograd::grad({(expected * weights).sum()}, {features})[0];

    const torch::Tensor got = bev::SampleRows(FeatureRows(features), PlanOf(c)).squeeze(0);
    ASSERT_EQ(got.sizes(), expected.sizes());
    EXPECT_TRUE(torch::allclose(got, expected, 1e-9, 1e-12)) << (got - expected).abs().max().item<double>();
    const torch::Tensor grad = torch::autograd::grad({(got * weights).sum()}, {features})[0];
    EXPECT_TRUE(torch::allclose(grad, expected_grad, 1e-9, 1e-12))
        << (grad - expected_grad).abs().max().item<double>();
    EXPECT_GT(expected.abs().sum().item<double>(), 0);
  }
}

TEST(BevSampleTest, KernelMatchesTheGenericOpsInEveryDtypeAndRepeatsExactly) {
  const SampleCase c = RandomSampleCase(300, 7);
  const bev::SamplePlan plan = PlanOf(c);
  torch::manual_seed(7);
  const torch::Tensor x = torch::randn({2, plan.sources, 16});
  const torch::Tensor reference = bev::SampleRowsGeneric(x.to(torch::kDouble), plan);
  at::set_num_threads(2);
  for (const auto& [dtype, tolerance] : std::vector<std::pair<torch::ScalarType, double>>{
           {torch::kDouble, 1e-12}, {torch::kFloat, 1e-5}, {torch::kBFloat16, 2e-2}}) {
    const torch::Tensor in = x.to(dtype).requires_grad_();
    const torch::Tensor got = bev::SampleRows(in, plan);
    EXPECT_EQ(got.scalar_type(), dtype);
    EXPECT_TRUE(torch::allclose(got.to(torch::kDouble), reference, tolerance, tolerance)) << dtype;
    EXPECT_TRUE(torch::equal(bev::SampleRows(in, plan), got)) << dtype << ": the same twice";
    const torch::Tensor g = torch::randn_like(got);
    const torch::Tensor grad = torch::autograd::grad({(got * g).sum()}, {in})[0];
    const torch::Tensor in_ref = x.to(torch::kDouble).requires_grad_();
    const torch::Tensor ref_grad = torch::autograd::grad(
        {(bev::SampleRowsGeneric(in_ref, plan) * g.to(torch::kDouble)).sum()}, {in_ref})[0];
    EXPECT_TRUE(torch::allclose(grad.to(torch::kDouble), ref_grad, tolerance, tolerance)) << dtype;
  }
}

TEST(BevSampleTest, RejectsTapsAndFeaturesThatDoNotFit) {
  EXPECT_THROW(bev::MakeSamplePlan(4, 10, {{4, 0, 1.0}}), c10::Error);
  EXPECT_THROW(bev::MakeSamplePlan(4, 10, {{0, 10, 1.0}}), c10::Error);
  const bev::SamplePlan plan = bev::MakeSamplePlan(4, 10, {{0, 9, 0.5}, {3, 0, 1.0}});
  EXPECT_THROW(bev::SampleRows(torch::zeros({1, 9, 2}), plan), c10::Error);
  const torch::Tensor y = bev::SampleRows(torch::arange(20.0).view({1, 10, 2}), plan);
  EXPECT_TRUE(torch::equal(y, torch::tensor({9.f, 9.5f, 0.f, 0.f, 0.f, 0.f, 0.f, 1.f}).view({1, 4, 2})));
}

TrialSpec BevSpec(const std::string& view_transform, const std::string& pooling) {
  nlohmann::json j = {{"schema", 1},
                      {"seed", 1},
                      {"task",
                       {{"dataset", "bev-synthetic"},
                        {"bev",
                         {{"cameras", 4},
                          {"height", 24},
                          {"width", 64},
                          {"grid", 32},
                          {"max_boxes", 8},
                          {"train_samples", 32},
                          {"val_samples", 8},
                          {"test_samples", 8}}},
                        {"batch_size", 2},
                        {"steps", 12},
                        {"eval_every", 0},
                        {"warmup_steps", 2}}},
                      {"arch",
                       {{"stem", {{"kind", "conv3x3"}, {"width", 8}, {"stride", 2}, {"depth", 1}}},
                        {"stages", {{{"block", "basic"}, {"width", 16}, {"depth", 1}, {"stride", 2}}}},
                        {"bev",
                         {{"view_transform", view_transform},
                          {"pooling", pooling},
                          {"depth_bins", 8},
                          {"channels", 8},
                          {"encoder", {{{"block", "basic"}, {"width", 16}, {"depth", 1}, {"stride", 2}}}}}}}},
                      {"runtime", {{"threads", 2}}}};
  return ParseTrialSpec(j);
}

// The bev task's network for a resolved arch.
std::shared_ptr<model::BevNetImpl> BuildBevNet(const ResolvedArch& arch, const TaskSpec& task) {
  return std::make_shared<model::BevNetImpl>(arch, bev::MakeRig(task.bev));
}

TEST(BevNetTest, EveryViewTransformGivesGridLogits) {
  for (const auto& [vt, pooling] : std::vector<std::pair<std::string, std::string>>{
           {"lss", "naive"}, {"lss", "fused"}, {"lss", "depth_fused"}, {"ipm", "naive"}, {"mean_lift", "naive"}}) {
    const TrialSpec spec = BevSpec(vt, pooling);
    auto net = BuildBevNet(ResolveArch(spec.arch, spec.task), spec.task);
    const torch::Tensor x = torch::randn({2, 12, 24, 64});
    const torch::Tensor y = net->forward(x);
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 32, 32})) << vt;
    y.sum().backward();
    int with_grad = 0;
    for (const auto& p : net->parameters())
      with_grad += p.grad().defined() && p.grad().abs().sum().item<double>() > 0;
    EXPECT_GT(with_grad, 0) << vt;
    // FLOPs: the backbone, the view transform's convs and the encoder are counted.
    const ModelFlops flops = CountModelFlops(net, x);
    EXPECT_GT(flops.forward, 0) << vt;
  }
}

// The same weights give the same network with every pooling variant: output
// and parameter gradients of a training step.
TEST(BevNetTest, EveryPoolingGivesTheSameNetwork) {
  const TrialSpec ns = BevSpec("lss", "naive");
  torch::manual_seed(1);
  auto naive = BuildBevNet(ResolveArch(ns.arch, ns.task), ns.task);
  const torch::Tensor x = torch::randn({2, 12, 24, 64});
  const torch::Tensor y = naive->forward(x);
  y.square().sum().backward();
  for (const std::string pooling : {"fused", "depth_fused"}) {
    const TrialSpec spec = BevSpec("lss", pooling);
    auto net = BuildBevNet(ResolveArch(spec.arch, spec.task), spec.task);
    EXPECT_EQ(&net->pool_plan(), &naive->pool_plan()) << "one plan per geometry";
    {
      torch::NoGradGuard no_grad;
      auto src = naive->named_parameters(), dst = net->named_parameters();
      for (const auto& item : src) dst[item.key()].copy_(item.value());
    }
    const torch::Tensor yp = net->forward(x);
    EXPECT_TRUE(torch::allclose(yp, y, 1e-4, 1e-5)) << pooling << ": " << (yp - y).abs().max().item<double>();
    yp.square().sum().backward();
    auto expected = naive->named_parameters();
    for (const auto& item : net->named_parameters()) {
      const torch::Tensor& g = expected[item.key()].grad();
      EXPECT_TRUE(torch::allclose(item.value().grad(), g, 1e-3, 1e-5 * g.abs().max().item<double>()))
          << pooling << " " << item.key();
    }
  }
}

TEST(BevNetTest, DepthBinsFollowTheFrustumBins) {
  BevArchSpec spec;  // 24 bins over [2, 38) m: 1.5 m each
  const float inf = std::numeric_limits<float>::infinity();
  const torch::Tensor depth = torch::tensor({2.0f, 3.49f, 3.5f, 20.0f, 37.9f, 38.0f, 1.9f, inf, -inf});
  const torch::Tensor bins = model::DepthBins(depth, spec);
  const std::vector<int64_t> expected = {0, 0, 1, 12, 23, -100, -100, -100, -100};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(bins[i].item<int64_t>(), expected[i]) << i;
}

TEST(BevNetTest, DepthLossOnlyForDepthSupervisedLssInTraining) {
  TrialSpec spec = BevSpec("lss", "fused");
  spec.arch.bev.depth_loss_weight = 0.5;
  const ResolvedArch arch = ResolveArch(spec.arch, spec.task);
  ASSERT_EQ(arch.feature_height, 6);
  ASSERT_EQ(arch.feature_width, 16);
  auto net = BuildBevNet(arch, spec.task);
  ASSERT_TRUE(net);
  const torch::Tensor x = torch::randn({2, 12, 24, 64});
  // Depth 10 m everywhere but one sky patch per camera.
  torch::Tensor depth = torch::full({2, 4, 6, 16}, 10.0f);
  depth.select(2, 0).select(2, 0).fill_(std::numeric_limits<float>::infinity());
  net->train();
  torch::Tensor y = net->forward(x);
  torch::Tensor loss = net->DepthLoss(depth);
  ASSERT_TRUE(loss.defined());
  // Initial logits are near-uniform over 8 bins: cross-entropy ~ log 8, times the weight.
  EXPECT_NEAR(loss.item<double>(), 0.5 * std::log(8.0), 0.5);
  (y.sum() * 0 + loss).backward();
  auto params = net->named_parameters();
  EXPECT_GT(params["depth_context.weight"].grad().abs().sum().item<double>(), 0);
  EXPECT_FALSE(net->DepthLoss(depth).defined()) << "the stored logits are used once";
  net->eval();
  {
    torch::NoGradGuard no_grad;
    net->forward(x);
  }
  EXPECT_FALSE(net->DepthLoss(depth).defined()) << "no depth loss from an evaluation forward";
  // ipm predicts no depth: the weight is accepted (spaces vary the view transform) and ignored.
  TrialSpec ipm = BevSpec("ipm", "naive");
  ipm.arch.bev.depth_loss_weight = 0.5;
  auto ipm_net = BuildBevNet(ResolveArch(ipm.arch, ipm.task), ipm.task);
  ipm_net->train();
  ipm_net->forward(x);
  EXPECT_FALSE(ipm_net->DepthLoss(depth).defined());
}

TEST(BevNetTest, DepthSupervisedTrialRuns) {
  TrialSpec spec = BevSpec("lss", "naive");
  spec.arch.bev.depth_loss_weight = 1.0;
  const nlohmann::json result = RunTrial(spec, TrialOptions{});
  ASSERT_EQ(result["status"], "completed") << result.dump();
  EXPECT_EQ(result["bev"]["depth_loss_weight"], 1.0);
  // The training loss includes the depth term: at least a good part of log 8 early on.
  EXPECT_TRUE(std::isfinite(result["final_train_loss"].get<double>()));
  EXPECT_GT(result["final_train_loss"].get<double>(), 0.3);
}

TEST(BevNetTest, FrustumPointsAheadOfTheFrontCameraLandAhead) {
  const BevTaskSpec task = SmallTask();
  const bev::Rig rig = bev::MakeRig(task);
  BevArchSpec spec;
  spec.depth_bins = 4;
  spec.depth_min = 2;
  spec.depth_max = 10;  // bins centred at 3, 5, 7, 9 m
  const torch::Tensor cells = model::FrustumCells(rig, 8, 22, spec);
  ASSERT_EQ(cells.numel(), 6 * 4 * 8 * 22);
  // Camera 0, lowest feature row (v = 30 of 32, 14 px below the centre: 14.9 deg
  // + 8 deg pitch = 22.9 deg below the horizon), column 11 (u = 46, near cx = 44).
  // The ray drops 0.403 m per metre of depth and hits the ground at depth ~4 m.
  // Bin 1 (depth 5 m): x = 1 + 5 * 0.953 = 5.77 m, z = -0.41 m (in the band):
  // cell row 18 (centre x 5.5), column 24 (y = -0.19 m, centre -0.5).
  // Bin 2 (7 m): z = -1.22 m, under the ground and below the band: dropped.
  auto index = [](int bin) { return ((0 * 4 + bin) * 8 + 7) * 22 + 11; };
  const int64_t cell = cells[index(1)].item<int64_t>();
  ASSERT_GE(cell, 0);
  EXPECT_EQ(cell, 18 * 48 + 24);
  const int64_t row = cell / 48, col = cell % 48;
  double x, y;
  rig.CellCentre(static_cast<int>(row), static_cast<int>(col), &x, &y);
  EXPECT_GT(x, 5);
  EXPECT_LT(x, 6.5);
  EXPECT_EQ(cells[index(2)].item<int64_t>(), -1);
  EXPECT_LE(std::abs(y), 1.0);
}

// ---- spec ----

TEST(BevSpecTest, ValidatesTheBevSections) {
  EXPECT_NO_THROW(BevSpec("lss", "fused"));
  EXPECT_THROW(BevSpec("ipm", "fused"), SpecError);  // pooling applies to lss only
  EXPECT_THROW(BevSpec("mean_lift", "depth_fused"), SpecError);
  EXPECT_EQ(ToJson(BevSpec("lss", "depth_fused"))["arch"]["bev"]["pooling"], "depth_fused");
  nlohmann::json j = ToJson(BevSpec("lss", "fused"));
  EXPECT_EQ(j["arch"]["bev"]["pooling"], "fused");
  EXPECT_EQ(j["arch"]["bev"]["depth_loss_weight"], 0.0);  // depth supervision is off by default
  j["arch"]["bev"]["depth_loss_weight"] = 0.1;
  EXPECT_EQ(ToJson(ParseTrialSpec(j)), j) << "ToJson must round-trip";
  nlohmann::json negative = j;
  negative["arch"]["bev"]["depth_loss_weight"] = -1;
  EXPECT_THROW(ParseTrialSpec(negative), SpecError);
  j["task"]["dataset"] = "fashion-mnist";
  j["task"].erase("bev");
  EXPECT_THROW(ParseTrialSpec(j), SpecError);  // arch.bev without the bev task
  nlohmann::json t = ToJson(BevSpec("lss", "naive"));
  t["task"]["target"] = {{"metric", "val_accuracy"}, {"value", 0.5}};
  EXPECT_THROW(ParseTrialSpec(t), SpecError);  // bev reports IoU
  t["task"]["target"]["metric"] = "val_iou";
  EXPECT_NO_THROW(ParseTrialSpec(t));
}

// ---- learning ----

// Prior baseline: the best IoU any fixed map (per-cell training frequency above
// a threshold, the threshold chosen on the evaluated split itself, which
// flatters the baseline) reaches. The all-empty map has IoU 0 by definition.
double PriorIou(const Dataset& data, const torch::Tensor& labels) {
  const torch::Tensor freq = data.train.labels.to(torch::kFloat).mean(0);
  const torch::Tensor occupied = labels.gt(0);
  double best = 0;
  for (double t = 0.0; t < 1.0; t += 0.02) {
    const torch::Tensor pred = freq.gt(t).unsqueeze(0).expand_as(occupied);
    const double inter = pred.logical_and(occupied).sum().item<double>();
    const double uni = pred.logical_or(occupied).sum().item<double>();
    if (uni > 0) best = std::max(best, inter / uni);
  }
  return best;
}

TEST(BevTrainingTest, ShortLssRunBeatsAllEmptyAndPriorBaselines) {
  nlohmann::json j = ToJson(BevSpec("lss", "fused"));
  j["task"]["bev"]["train_samples"] = 600;
  j["task"]["bev"]["val_samples"] = 128;
  j["task"]["bev"]["test_samples"] = 128;
  j["task"]["batch_size"] = 8;
  j["task"]["steps"] = 150;
  j["task"]["eval_every"] = 75;
  j["task"]["warmup_steps"] = 5;
  j["task"]["optimizer"] = {{"name", "adamw"}, {"lr", 3e-3}, {"weight_decay", 0.01}};
  j["task"]["schedule"] = {{"name", "cosine"}, {"warmup", 10}};
  j["arch"]["bev"]["depth_bins"] = 16;
  j["arch"]["bev"]["channels"] = 16;
  const TrialSpec spec = ParseTrialSpec(j);
  const nlohmann::json result = RunTrial(spec, TrialOptions{});
  ASSERT_EQ(result["status"], "completed") << result.dump();
  ASSERT_TRUE(result.contains("val_iou")) << result.dump();
  EXPECT_FALSE(result.contains("val_accuracy")) << "IoU must not be reported under an accuracy name";

  const Dataset data = MakeBevSynthetic(spec.task.bev);
  const double prior_val = PriorIou(data, data.val.labels), prior_test = PriorIou(data, data.test.labels);
  const double val = result["val_iou"], test = result["test_iou"];
  std::cout << "val_iou " << val << " test_iou " << test << " prior val " << prior_val << " prior test "
            << prior_test << " wall " << result["wall_time_s"] << " s\n";
  // Thresholds. The all-empty map scores IoU 0. The prior baseline (the best
  // thresholded per-cell frequency map, threshold picked on the evaluated
  // split itself) scored 0.040 (val) / 0.038 (test) here: boxes are spread
  // over the whole grid, so no fixed map localises them. A model that reads
  // the images must localise boxes; we require at least twice the flattered
  // prior and 0.05 above it (IoU is pooled over every cell of 128 scenes,
  // so a gap of 0.05 is not sampling noise). The
  // first version of this run (before the positive weight in the loss)
  // reached 0.118 / 0.100 and the current one 0.284 / 0.269 (1 run each), so
  // the bar holds with a margin and was not tuned to the result.
  EXPECT_GT(val, 2 * prior_val);
  EXPECT_GT(test, 2 * prior_test);
  EXPECT_GT(val, prior_val + 0.05);
  EXPECT_GT(test, prior_test + 0.05);
}

}  // namespace
}  // namespace frontier
