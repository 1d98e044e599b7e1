#include "worker/trial/measure/flop_counter.h"

#include <ATen/record_function.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

namespace frontier {
namespace {

thread_local FlopCounter* g_counter = nullptr;
thread_local int g_depth = 0;  // counted ops currently open on this thread

// Marks a start callback that opened a counted op.
struct CountedOp : at::ObserverContext {};

int64_t Product(c10::IntArrayRef dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

// The convolution formula: one multiply-add per output element (per input
// element when transposed) and weight element of its group,
// 2 * outputs * (w[1] * kernel). Every convolution count of the project
// (forward here, backward for the profiler) goes through it.
int64_t ConvMacFlops(int64_t outputs, c10::IntArrayRef w) { return 2 * outputs * Product(w, 1, w.size()); }

// 2 * N * Cout * Hout * Wout * (Cin / groups) * kh * kw (any number of spatial dims).
int64_t ConvFlops(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                  c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed) {
  const auto in = input.sizes(), w = weight.sizes();
  const size_t spatial = w.size() - 2;
  const bool batched = in.size() == w.size();
  const int64_t batch = batched ? in[0] : 1;
  const size_t first = batched ? 2 : 1;
  int64_t positions = 1;  // output positions (input positions when transposed)
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t s = stride.size() == 1 ? stride[0] : stride[i];
    const int64_t p = padding.size() == 1 ? padding[0] : padding[i];
    const int64_t d = dilation.size() == 1 ? dilation[0] : dilation[i];
    const int64_t size = in[first + i];
    positions *= transposed ? size : (size + 2 * p - d * (w[2 + i] - 1) - 1) / s + 1;
  }
  // weight is (Cout, Cin/g, k...) for conv, (Cin, Cout/g, k...) when transposed:
  // either way w[0] * w[1] * kernel multiply-adds per position.
  return ConvMacFlops(batch * positions * w[0], w);
}

// torch.matmul semantics: 1-d operands are promoted, batch dims broadcast.
int64_t MatmulFlops(c10::IntArrayRef a, c10::IntArrayRef b) {
  const int64_t n = a.size() >= 2 ? a[a.size() - 2] : 1;
  const int64_t k = a.back();
  const int64_t m = b.size() >= 2 ? b.back() : 1;
  const size_t batch_a = a.size() > 2 ? a.size() - 2 : 0, batch_b = b.size() > 2 ? b.size() - 2 : 0;
  const size_t batch_dims = std::max(batch_a, batch_b);
  int64_t batch = 1;
  for (size_t i = 0; i < batch_dims; ++i) {
    const int64_t da = i < batch_dims - batch_a ? 1 : a[i - (batch_dims - batch_a)];
    const int64_t db = i < batch_dims - batch_b ? 1 : b[i - (batch_dims - batch_b)];
    batch *= std::max(da, db);
  }
  return 2 * batch * n * k * m;
}

const at::Tensor& TensorAt(c10::ArrayRef<const c10::IValue> inputs, size_t i) { return inputs[i].toTensor(); }

// FLOPs of a counted op, or -1 when the op is not one we count.
int64_t OpFlops(const char* name, c10::ArrayRef<const c10::IValue> in) {
  if (std::strcmp(name, "aten::conv2d") == 0 || std::strcmp(name, "aten::conv1d") == 0 ||
      std::strcmp(name, "aten::conv3d") == 0) {
    // (input, weight, bias, stride, padding, dilation, groups); padding may be a string in other overloads
    if (!in[4].isIntList()) return -2;  // 'same'/'valid' overload: counted by the nested aten::convolution
    return ConvFlops(TensorAt(in, 0), TensorAt(in, 1), in[3].toIntVector(), in[4].toIntVector(),
                     in[5].toIntVector(), false);
  }
  if (std::strcmp(name, "aten::convolution") == 0 || std::strcmp(name, "aten::_convolution") == 0) {
    // (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, ...)
    return ConvFlops(TensorAt(in, 0), TensorAt(in, 1), in[3].toIntVector(), in[4].toIntVector(),
                     in[5].toIntVector(), in[6].toBool());
  }
  if (std::strcmp(name, "aten::linear") == 0) {  // (input, weight (out, in), bias)
    const at::Tensor& x = TensorAt(in, 0);
    const at::Tensor& w = TensorAt(in, 1);
    return 2 * (x.numel() / x.size(-1)) * w.size(0) * w.size(1);
  }
  if (std::strcmp(name, "aten::matmul") == 0 || std::strcmp(name, "aten::mm") == 0 ||
      std::strcmp(name, "aten::bmm") == 0) {
    return MatmulFlops(TensorAt(in, 0).sizes(), TensorAt(in, 1).sizes());
  }
  if (std::strcmp(name, "frontier::moe_experts") == 0) {
    // The moe block's experts (worker/trial/model/moe.h): (kept assignments,
    // channels C, hidden H). Each kept token-expert assignment runs C->H and
    // H->C: 2 * kept * (C*H + H*C). The padded capacity slots the grouped
    // matmuls also compute are not the model's work and are not charged.
    return 2 * in[0].toInt() * (2 * in[1].toInt() * in[2].toInt());
  }
  if (std::strcmp(name, "frontier::op::bev_pool") == 0) {
    // BEV pooling, any variant (ops/bev_pool.h; the scope ops::Dispatch opens): 0, the convention of
    // docs/bev.md (the depth x feature product and the sums into cells are not matmul-class work), for
    // every variant alike: one that pools through a matmul (a one-hot scatter matrix, say) is not charged
    // that matmul, so a faster pooling shows up as a higher MFU at the same FLOPs.
    return 0;
  }
  if (std::strcmp(name, "frontier::op::attention_kernel") == 0 || std::strcmp(name, "frontier::attention_chunked") == 0) {
    // The attention kernel, any variant (ops/attention_kernel.cc; the scope ops::Dispatch opens, or the
    // chunked kernel's own), q (B, h, L, d), k (B, h, S, d), v (B, h, S, dv): the work of the reference's
    // two matmuls, q k^T and p v, whichever way a variant computes them.
    const at::Tensor &q = TensorAt(in, 0), &k = TensorAt(in, 1), &v = TensorAt(in, 2);
    const int64_t heads = q.size(0) * q.size(1), L = q.size(2), S = k.size(2);
    return 2 * heads * L * S * (q.size(3) + v.size(3));
  }
  if (std::strcmp(name, "aten::addmm") == 0 ||
      std::strcmp(name, "aten::baddbmm") == 0) {  // (self, a, b, ...)
    return MatmulFlops(TensorAt(in, 1).sizes(), TensorAt(in, 2).sizes());
  }
  return -1;
}

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  if (g_counter == nullptr) return nullptr;
  const int64_t flops = OpFlops(fn.name(), fn.inputs());
  if (flops == -1) return nullptr;
  if (g_depth == 0 && flops >= 0) g_counter->Add(fn.name(), flops);
  if (flops == -2) return nullptr;
  ++g_depth;
  return std::make_unique<CountedOp>();
}

void OnEnd(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (ctx != nullptr) --g_depth;
}

}  // namespace

std::optional<int64_t> ConvBackwardFlops(const std::vector<int64_t>& grad_output,
                                         const std::vector<int64_t>& weight) {
  if (grad_output.size() < 3 || weight.size() < 3) return std::nullopt;
  return 2 * ConvMacFlops(Product(grad_output, 0, grad_output.size()), weight);
}

FlopCounter::FlopCounter() {
  if (g_counter != nullptr) throw std::logic_error("FlopCounter: one counter per thread at a time");
  g_counter = this;
  g_depth = 0;
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&OnStart, &OnEnd).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

FlopCounter::~FlopCounter() {
  at::removeCallback(handle_);
  g_counter = nullptr;
  g_depth = 0;
}

int64_t FlopCounter::total() const {
  int64_t t = 0;
  for (const auto& [op, flops] : by_op_) t += flops;
  return t;
}

}  // namespace frontier
