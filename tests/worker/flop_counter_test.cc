// FlopCounter against FLOPs computed by hand (1 multiply-add = 2 FLOPs) for
// every layer, block family and attention kind, and a whole small network.
#include "worker/trial/measure/flop_counter.h"

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include "worker/trial/model/model.h"

namespace frontier {
namespace {

namespace nn = torch::nn;
using model::LayerStyle;

template <typename M>
int64_t Forward(M& module, std::vector<int64_t> shape) {
  return CountModelFlops(module, torch::randn(shape)).forward;
}

TEST(FlopCounterTest, Conv2d) {
  nn::Conv2d conv(nn::Conv2dOptions(3, 8, 3).padding(1));
  // out 10x10 per sample: 2 * N(2) * Cout(8) * positions(100) * Cin(3) * k*k(9)
  EXPECT_EQ(Forward(conv, {2, 3, 10, 10}), 2 * 2 * 8 * 100 * 3 * 9);
  nn::Conv2d strided(nn::Conv2dOptions(4, 6, 3).stride(2));  // no padding: (9-3)/2+1 = 4
  EXPECT_EQ(Forward(strided, {1, 4, 9, 9}), 2 * 6 * 16 * 4 * 9);
}

TEST(FlopCounterTest, DepthwiseAndGroupedConv) {
  nn::Conv2d dw(nn::Conv2dOptions(16, 16, 7).padding(3).groups(16));
  EXPECT_EQ(Forward(dw, {1, 16, 8, 8}), 2 * 16 * 64 * 1 * 49);  // one input channel per output channel
  nn::Conv2d grouped(nn::Conv2dOptions(8, 8, 3).padding(1).groups(2));
  EXPECT_EQ(Forward(grouped, {1, 8, 4, 4}), 2 * 8 * 16 * 4 * 9);
}

TEST(FlopCounterTest, LinearOn2dAnd3dInputs) {
  nn::Linear fc(20, 30);
  EXPECT_EQ(Forward(fc, {5, 20}), 2 * 5 * 20 * 30);
  EXPECT_EQ(Forward(fc, {2, 7, 20}), 2 * 14 * 20 * 30);  // tokens
}

TEST(FlopCounterTest, BatchedMatmulAndNoFlopsForElementwise) {
  FlopCounter counter;
  torch::NoGradGuard no_grad;
  torch::Tensor q = torch::randn({2, 4, 16, 8}), k = torch::randn({2, 4, 16, 8});
  torch::Tensor s = torch::matmul(q, k.transpose(-2, -1));  // 2*4 batches of (16x8)(8x16)
  torch::softmax(s, -1).relu_().add_(1.0);                    // not counted
  torch::max_pool2d(torch::randn({1, 3, 8, 8}), 2);           // not counted
  EXPECT_EQ(counter.total(), 2 * 8 * 16 * 8 * 16);
}

TEST(FlopCounterTest, ConvNormActCountsOnlyTheConv) {
  LayerStyle style;  // batch norm, relu
  model::ConvNormAct layer(style, 8, 16, 3, 2, 1, true);
  EXPECT_EQ(Forward(layer, {1, 8, 8, 8}), 2 * 16 * 16 * 8 * 9);
}

struct BlockCase {
  model::BlockConfig config;
  int64_t expected;  // by hand, input (1, in, 8, 8)
};

TEST(FlopCounterTest, EveryBlockFamily) {
  const std::vector<BlockCase> cases = {
      // basic 8->16 stride 2 (4x4 out): 3x3 8->16, 3x3 16->16, 1x1/2 projection
      {{"basic", 8, 16, 2, 3, 4, false, {}}, 2 * 16 * 16 * 8 * 9 + 2 * 16 * 16 * 16 * 9 + 2 * 16 * 16 * 8},
      // bottleneck 16->16, mid 4 (8x8): 1x1 16->4, 3x3 4->4, 1x1 4->16, identity shortcut
      {{"bottleneck", 16, 16, 1, 3, 4, false, {}}, 2 * 64 * 16 * 4 + 2 * 64 * 4 * 4 * 9 + 2 * 64 * 4 * 16},
      // convnext 16->16 k7 e4: depthwise 7x7, 1x1 16->64, 1x1 64->16
      {{"convnext", 16, 16, 1, 7, 4, false, {}}, 2 * 64 * 16 * 49 + 2 * 64 * 16 * 64 + 2 * 64 * 64 * 16},
      // convnext 8->16 stride 2: 2x2/2 downsample 8->16 on 4x4 out, then the block at 16 positions
      {{"convnext", 8, 16, 2, 7, 4, false, {}},
       2 * 16 * 16 * 8 * 4 + 2 * 16 * 16 * 49 + 2 * 16 * 16 * 64 + 2 * 16 * 64 * 16},
      // mbconv 16->16 e4 + SE (reduce to 16*0.25 = 4 at 1x1): 1x1 16->64, dw 3x3, SE 64->4->64, 1x1 64->16
      {{"mbconv", 16, 16, 1, 3, 4, true, {}},
       2 * 64 * 16 * 64 + 2 * 64 * 64 * 9 + 2 * 64 * 4 + 2 * 4 * 64 + 2 * 64 * 64 * 16},
      // fused_mbconv 16->32 stride 2 e4 (4x4 out): 3x3/2 16->64, 1x1 64->32
      {{"fused_mbconv", 16, 32, 2, 3, 4, false, {}}, 2 * 16 * 64 * 16 * 9 + 2 * 16 * 32 * 64},
      // fused_mbconv at expansion 1: a single 3x3 conv
      {{"fused_mbconv", 16, 16, 1, 3, 1, false, {}}, 2 * 64 * 16 * 16 * 9},
  };
  for (const BlockCase& c : cases) {
    model::ConvBlock block(LayerStyle{}, c.config);
    EXPECT_EQ(Forward(block, {1, c.config.in, 8, 8}), c.expected)
        << c.config.family << " " << c.config.in << "->" << c.config.out << " stride " << c.config.stride;
  }
}

TEST(FlopCounterTest, EveryAttentionKind) {
  // C = 16 channels on a 4x4 map: N = 16 tokens, batch 1.
  const int64_t n = 16, c = 16;
  auto attention = [](const std::string& kind, int heads, int head_dim, int kv_heads, int window) {
    AttentionSpec s;
    s.kind = kind;
    s.heads = heads;
    s.head_dim = head_dim;
    s.kv_heads = kv_heads;
    s.window = window;
    return model::Attention(s, 16, "batch");
  };
  // q (C -> h*d), kv (C -> 2*kvh*d), proj (h*d -> C) per token, plus the token-mixing matmuls.
  auto projections = [&](int h, int d, int kvh) { return 2 * n * c * h * d + 2 * n * c * 2 * kvh * d + 2 * n * h * d * c; };
  {
    auto a = attention("mhsa", 2, 8, 1, 7);  // QK^T and AV: 2 * h * N * N * d each
    EXPECT_EQ(Forward(a, {1, 16, 4, 4}), projections(2, 8, 2) + 2 * (2 * 2 * n * n * 8));
  }
  {
    auto a = attention("gqa", 4, 4, 1, 7);  // one shared k/v head
    EXPECT_EQ(Forward(a, {1, 16, 4, 4}), projections(4, 4, 1) + 2 * (2 * 4 * n * n * 4));
  }
  {
    auto a = attention("window", 2, 8, 1, 2);  // 4 windows of 4 tokens
    EXPECT_EQ(Forward(a, {1, 16, 4, 4}), projections(2, 8, 2) + 2 * (4 * 2 * 2 * 4 * 4 * 8));
  }
  {
    auto a = attention("linear", 2, 8, 1, 7);  // K^T V: 2*h*d*N*d; Q (K^T V): 2*h*N*d*d
    EXPECT_EQ(Forward(a, {1, 16, 4, 4}), projections(2, 8, 2) + 2 * (2 * 2 * n * 8 * 8));
  }
}

TEST(FlopCounterTest, WholeNetworkAndTrainStep) {
  TrialSpec spec;
  spec.task.dataset = "synthetic";
  spec.task.input = InputShape{3, 8, 8, 10};
  spec.arch.stem = StemSpec{"patchify", 8, 2, 1};
  spec.arch.stages = {StageSpec{}};
  spec.arch.stages[0].width = 8;
  spec.arch.stages[0].depth = 1;
  model::Classifier net(ResolveArch(spec.arch, InputShapeOf(spec.task)));
  // patchify 2x2/2 3->8 on 4x4 out, two 3x3 8->8 convs at 4x4, classifier 8->10; batch 2.
  const int64_t per_sample = 2 * 16 * 8 * 3 * 4 + 2 * (2 * 16 * 8 * 8 * 9) + 2 * 8 * 10;
  ModelFlops flops = CountModelFlops(net, torch::randn({2, 3, 8, 8}));
  EXPECT_EQ(flops.forward, 2 * per_sample);
  EXPECT_EQ(flops.train_step, 3 * 2 * per_sample);
  EXPECT_TRUE(net->is_training());  // restored after the eval-mode count
}

TEST(FlopCounterTest, AutocastDoesNotCountTwice) {
  nn::Conv2d conv(nn::Conv2dOptions(3, 8, 3).padding(1));
  nn::Linear fc(20, 30);
  const int64_t conv_fp32 = Forward(conv, {2, 3, 10, 10}), fc_fp32 = Forward(fc, {5, 20});
  at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  at::autocast::set_cpu_enabled(true);
  const int64_t conv_bf16 = Forward(conv, {2, 3, 10, 10}), fc_bf16 = Forward(fc, {5, 20});
  at::autocast::set_cpu_enabled(false);
  at::autocast::clear_cache();
  EXPECT_EQ(conv_bf16, conv_fp32);
  EXPECT_EQ(fc_bf16, fc_fp32);
}

TEST(FlopCounterTest, OneCounterPerThread) {
  FlopCounter first;
  EXPECT_THROW(FlopCounter second, std::logic_error);
}

}  // namespace
}  // namespace frontier
