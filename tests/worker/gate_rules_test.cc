// Each rule of the correctness gate (worker/trial/ops/correctness.h) with a
// variant that breaks that rule alone: the gate with every rule fails it,
// naming the rule, and the same gate without that one rule passes it.
#include <cmath>
#include <map>

#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include "worker/trial/ops/attention_kernel.h"
#include "worker/trial/ops/correctness.h"
#include "worker/trial/ops/op.h"

namespace frontier {
namespace {

using torch::Tensor;

Tensor Scaled(const Tensor& q, const Tensor& k, const Tensor& v) { return attention::NaiveAttention(q, k, v) * 1.001; }

// Softmax as exp(s) / sum exp(s): right until a logit passes ~88 in fp32.
Tensor NoMaxSubtracted(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Tensor e = (torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(3)))).exp();
  return torch::matmul(e / e.sum(-1, true), v);
}

// Wrong only with a single head of several tokens (the edge case "a single head").
Tensor WrongOneHead(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Tensor out = attention::NaiveAttention(q, k, v);
  return q.size(1) == 1 && q.size(2) > 1 ? out * 1.01 : out;
}

// Wrong only at an odd head_dim (written for the model's 8 channels).
Tensor WrongOddDim(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Tensor out = attention::NaiveAttention(q, k, v);
  return q.size(3) % 2 == 1 ? out * 1.01 : out;
}

// Keeps its result per input content and hands the same tensor back.
Tensor Memoized(const Tensor& q, const Tensor& k, const Tensor& v) {
  static std::map<double, Tensor> kept;
  double key = 0;  // a fingerprint of the three inputs' contents
  for (const Tensor& t : {q, k, v}) {
    const Tensor flat = t.detach().to(torch::kDouble).reshape(-1);
    key = key * 7 + (flat * torch::arange(flat.numel(), flat.options())).sum().item<double>();
  }
  if (auto it = kept.find(key); it != kept.end()) return it->second;
  return kept[key] = attention::NaiveAttention(q, k, v);
}

// Right output and gradients, computed from a copy; then halves q in place.
Tensor MutatesInput(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Tensor out = attention::NaiveAttention(q.clone(), k, v);
  q.detach().mul_(0.5);
  return out;
}

// With one query and one key the result is v itself: returned as is.
Tensor AliasesInput(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q.size(2) == 1 && k.size(2) == 1) return v;
  return attention::NaiveAttention(q, k, v);
}

// Right while gradients are recorded; zeros where they are not (a model's evaluation).
Tensor GradOnly(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Tensor out = attention::NaiveAttention(q, k, v);
  return torch::GradMode::is_enabled() ? out : torch::zeros_like(out);
}

// Zeros in InferenceMode only (a deployed network's forward).
Tensor NotInInference(const Tensor& q, const Tensor& k, const Tensor& v) {
  const Tensor out = attention::NaiveAttention(q, k, v);
  return c10::InferenceMode::is_enabled() ? torch::zeros_like(out) : out;
}

// The right numbers in float64, from float32 inputs.
Tensor Widened(const Tensor& q, const Tensor& k, const Tensor& v) {
  return attention::NaiveAttention(q, k, v).to(torch::kDouble);
}

void RegisterOnce() {
  static const bool done = [] {
    auto& r = attention::KernelRegistry();
    r.Add("gate_scaled", Scaled);
    r.Add("gate_no_max", NoMaxSubtracted);
    r.Add("gate_one_head", WrongOneHead);
    r.Add("gate_odd_dim", WrongOddDim);
    r.Add("gate_memoized", Memoized);
    r.Add("gate_mutates", MutatesInput);
    r.Add("gate_aliases", AliasesInput);
    r.Add("gate_grad_only", GradOnly);
    r.Add("gate_not_inference", NotInInference);
    r.Add("gate_widened", Widened);
    return true;
  }();
  (void)done;
}

// A recorded call: 2 samples, 3 heads, 10 tokens of 8 channels, fp32.
ops::OpCall Call(const std::string& variant) {
  RegisterOnce();
  torch::manual_seed(3);
  const Tensor q = torch::randn({2, 3, 10, 8}), k = torch::randn({2, 3, 10, 8}), v = torch::randn({2, 3, 10, 8});
  ops::CallRecorder recorder;
  attention::Attend("naive", q, k, v);
  ops::OpCall call = recorder.calls().at(0);
  call.variant = variant;
  return call;
}

// A seed of its own per check: gate_memoized keeps what it saw across checks.
ops::GateOptions Without(std::set<ops::GateRule> rules, uint64_t seed = 17) {
  ops::GateOptions options;
  options.seed = seed;
  options.left_out = std::move(rules);
  return options;
}

struct RuleCase {
  const char* variant;
  ops::GateRule rule;
  const char* where;  // the start of the failure's place
};

class GateRuleTest : public testing::TestWithParam<RuleCase> {};

TEST_P(GateRuleTest, CaughtByItsRuleAloneAndPassesWithoutIt) {
  const RuleCase& param = GetParam();
  const ops::VariantCheck caught = ops::CheckVariant(Call(param.variant), Without({}));
  EXPECT_FALSE(caught.passed) << param.variant;
  EXPECT_EQ(caught.rule, ops::RuleName(param.rule)) << caught.problem << " at " << caught.where;
  EXPECT_EQ(caught.where.rfind(param.where, 0), 0u) << caught.where;
  const ops::VariantCheck without = ops::CheckVariant(Call(param.variant), Without({param.rule}, 18));
  EXPECT_TRUE(without.passed) << param.variant << ": " << without.problem << " at " << without.where;
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, GateRuleTest,
    testing::Values(RuleCase{"gate_no_max", ops::GateRule::kStructured, "structured: logits near +100"},
                    RuleCase{"gate_one_head", ops::GateRule::kEdgeCases, "edge case a single head"},
                    RuleCase{"gate_odd_dim", ops::GateRule::kOtherShapes, "shape odd sizes"},
                    RuleCase{"gate_memoized", ops::GateRule::kRepeatedCall, "draw 1 repeated"},
                    RuleCase{"gate_mutates", ops::GateRule::kUnchangedInputs, "draw 1"},
                    RuleCase{"gate_aliases", ops::GateRule::kNoAliasing, "edge case sequence length 1"},
                    RuleCase{"gate_grad_only", ops::GateRule::kWithoutAutograd, "a draw without autograd"},
                    RuleCase{"gate_not_inference", ops::GateRule::kWithoutAutograd, "a draw in inference mode"}),
    [](const testing::TestParamInfo<RuleCase>& info) { return std::string(info.param.variant); });

// The model's next layer gets what the variant returns: another dtype than the reference's is wrong,
// however right its numbers.
TEST(GateRuleTest, AnOutputOfAnotherDtypeFails) {
  const ops::VariantCheck check = ops::CheckVariant(Call("gate_widened"), Without({}));
  EXPECT_FALSE(check.passed);
  EXPECT_EQ(check.problem, "returns Double, the reference Float");
  EXPECT_EQ(check.where, "draw 1, forward");
}

TEST(GateRuleTest, WrongNumbersFailTheFirstDraw) {
  const ops::VariantCheck c = ops::CheckVariant(Call("gate_scaled"), Without({}));
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.rule, ops::RuleName(ops::GateRule::kNumbers));
  EXPECT_EQ(c.where.rfind("draw 1, forward", 0), 0u) << c.where;
}

TEST(GateRuleTest, TheReferenceAndChunkedPassEveryRuleAndDeterminismIsStated) {
  for (const std::string variant : {"naive", "chunked"}) {
    const ops::VariantCheck c = ops::CheckVariant(Call(variant), Without({}));
    EXPECT_TRUE(c.passed) << variant << ": " << c.problem << " at " << c.where;
    EXPECT_EQ(c.rules.size(), 8u);
    EXPECT_TRUE(c.deterministic) << variant;
    // draws, structured, edge cases, shapes, the repeat, without autograd and in inference mode
    EXPECT_GE(c.checks, 3 + 6 + 4 + 2 + 1 + 2) << variant;
  }
}

TEST(GateRuleTest, TheCasesAreTheSameWhereverTheyAreBuilt) {
  const ops::OpCall call = Call("chunked");
  size_t edges_a = 0, edges_b = 0;
  const ops::GateOptions options = Without({});
  const std::vector<ops::OpCall> calls_a = ops::GateCalls(call, options, &edges_a);
  const std::vector<ops::OpCall> calls_b = ops::GateCalls(call, options, &edges_b);
  const std::vector<ops::GateCase> a = ops::GateCases(calls_a, edges_a, options);
  const std::vector<ops::GateCase> b = ops::GateCases(calls_b, edges_b, options);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].label, b[i].label);
    EXPECT_EQ(a[i].upstream_seed, b[i].upstream_seed);
    for (size_t j = 0; j < a[i].inputs.size(); ++j) EXPECT_TRUE(torch::equal(a[i].inputs[j], b[i].inputs[j]));
  }
}

}  // namespace
}  // namespace frontier
