#include "worker/trial/ops/attention_kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include "worker/trial/ops/spot_check.h"

namespace frontier::attention {
namespace {

using torch::Tensor;

c10::ScalarType AccumulationType(c10::ScalarType t) {
  return t == torch::kDouble ? torch::kDouble : torch::kFloat;
}

template <typename T>
inline T Dot(const T* a, const T* b, int64_t n) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

template <typename T>
inline void Axpy(T alpha, const T* x, T* y, int64_t n) {
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) y[c] += alpha * x[c];
}

// Forward of `heads` independent (L x d) x (S x d) x (S x d) problems, all
// contiguous: out (L x d) per head and lse (L) per head, the log-sum-exp of
// each query's scaled scores. Per query the keys are visited in blocks of
// kKeyBlock: the block's scores, the new running max m', then the running sum
// and the output accumulator rescaled by exp(m - m') and the block added.
template <typename T>
void ForwardKernel(const T* q, const T* k, const T* v, T* out, T* lse, int64_t heads, int64_t L, int64_t S,
                   int64_t d, T scale) {
  at::parallel_for(0, heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> s(kKeyBlock), acc(d);
    for (int64_t h = begin; h < end; ++h) {
      const T* qh = q + h * L * d;
      const T* kh = k + h * S * d;
      const T* vh = v + h * S * d;
      for (int64_t i = 0; i < L; ++i) {
        const T* qi = qh + i * d;
        T m = -std::numeric_limits<T>::infinity(), l = 0;
        std::fill(acc.begin(), acc.end(), T(0));
        for (int64_t j0 = 0; j0 < S; j0 += kKeyBlock) {
          const int64_t n = std::min(kKeyBlock, S - j0);
          T block_max = -std::numeric_limits<T>::infinity();
          for (int64_t j = 0; j < n; ++j) {
            s[j] = scale * Dot(qi, kh + (j0 + j) * d, d);
            block_max = std::max(block_max, s[j]);
          }
          const T m_new = std::max(m, block_max);
          const T rescale = std::exp(m - m_new);  // 0 for the first block (m = -inf)
          l *= rescale;
#pragma omp simd
          for (int64_t c = 0; c < d; ++c) acc[c] *= rescale;
          for (int64_t j = 0; j < n; ++j) {
            const T p = std::exp(s[j] - m_new);
            l += p;
            Axpy(p, vh + (j0 + j) * d, acc.data(), d);
          }
          m = m_new;
        }
        T* oi = out + (h * L + i) * d;
        const T inv = T(1) / l;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) oi[c] = acc[c] * inv;
        lse[h * L + i] = m + std::log(l);
      }
    }
  });
}

// Backward from the saved output and log-sum-exp: per query i and key j the
// probability p = exp(scale q_i.k_j - lse_i) is recomputed, then
// dv_j += p do_i, ds = p (do_i.v_j - do_i.o_i), dq_i += scale ds k_j,
// dk_j += scale ds q_i. One task per head owns that head's dq, dk, dv
// (zeroed by the caller).
template <typename T>
void BackwardKernel(const T* q, const T* k, const T* v, const T* out, const T* lse, const T* dout, T* dq,
                    T* dk, T* dv, int64_t heads, int64_t L, int64_t S, int64_t d, T scale) {
  at::parallel_for(0, heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) {
      const T* kh = k + h * S * d;
      const T* vh = v + h * S * d;
      T* dkh = dk + h * S * d;
      T* dvh = dv + h * S * d;
      for (int64_t i = 0; i < L; ++i) {
        const int64_t row = (h * L + i) * d;
        const T* qi = q + row;
        const T* doi = dout + row;
        T* dqi = dq + row;
        const T lse_i = lse[h * L + i];
        const T delta = Dot(doi, out + row, d);
        for (int64_t j = 0; j < S; ++j) {
          const T* kj = kh + j * d;
          const T* vj = vh + j * d;
          const T p = std::exp(scale * Dot(qi, kj, d) - lse_i);
          Axpy(p, doi, dvh + j * d, d);
          const T ds = p * (Dot(doi, vj, d) - delta) * scale;
          Axpy(ds, kj, dqi, d);
          Axpy(ds, qi, dkh + j * d, d);
        }
      }
    }
  });
}

class ChunkedAttentionFunction : public torch::autograd::Function<ChunkedAttentionFunction> {
 public:
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& q, const Tensor& k,
                        const Tensor& v) {
    const c10::ScalarType acc = AccumulationType(q.scalar_type());
    const Tensor qa = q.to(acc).contiguous(), ka = k.to(acc).contiguous(), va = v.to(acc).contiguous();
    const int64_t heads = q.size(0) * q.size(1), L = q.size(2), S = k.size(2), d = q.size(3);
    Tensor out = torch::zeros(qa.sizes(), qa.options());
    Tensor lse = torch::empty({q.size(0), q.size(1), L}, qa.options());
    if (heads > 0 && L > 0 && S > 0 && d > 0) {
      AT_DISPATCH_FLOATING_TYPES(acc, "chunked_attention_forward", [&] {
        ForwardKernel<scalar_t>(qa.data_ptr<scalar_t>(), ka.data_ptr<scalar_t>(), va.data_ptr<scalar_t>(),
                                out.data_ptr<scalar_t>(), lse.data_ptr<scalar_t>(), heads, L, S, d,
                                static_cast<scalar_t>(1.0 / std::sqrt(static_cast<double>(d))));
      });
    }
    // The inputs in their own dtype (converted again in backward) and the
    // output and log-sum-exp in the accumulation dtype: O(L d), never O(L S).
    ctx->save_for_backward({q, k, v, out, lse});
    return out.to(q.scalar_type());
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const c10::ScalarType acc = out.scalar_type();
    const Tensor qa = q.to(acc).contiguous(), ka = k.to(acc).contiguous(), va = v.to(acc).contiguous();
    const Tensor dout = grads[0].to(acc).contiguous();
    const int64_t heads = q.size(0) * q.size(1), L = q.size(2), S = k.size(2), d = q.size(3);
    Tensor dq = torch::zeros(qa.sizes(), qa.options()), dk = torch::zeros(ka.sizes(), ka.options()),
           dv = torch::zeros(va.sizes(), va.options());
    if (heads > 0 && L > 0 && S > 0 && d > 0) {
      AT_DISPATCH_FLOATING_TYPES(acc, "chunked_attention_backward", [&] {
        BackwardKernel<scalar_t>(qa.data_ptr<scalar_t>(), ka.data_ptr<scalar_t>(), va.data_ptr<scalar_t>(),
                                 out.data_ptr<scalar_t>(), lse.data_ptr<scalar_t>(),
                                 dout.data_ptr<scalar_t>(), dq.data_ptr<scalar_t>(), dk.data_ptr<scalar_t>(),
                                 dv.data_ptr<scalar_t>(), heads, L, S, d,
                                 static_cast<scalar_t>(1.0 / std::sqrt(static_cast<double>(d))));
      });
    }
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type())};
  }
};

std::string Sizes(const Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

// The call of variant `variant` on inputs shaped like q, k, v, as the gate
// and the benchmark see it. `logit_scale` multiplies q before the kernel
// (the edge case of large logits).
ops::OpCall KernelCall(const std::string& variant, const Tensor& q, const Tensor& k, const Tensor& v,
                       std::string edge, double logit_scale = 1) {
  ops::OpCall call;
  call.op = "attention_kernel";
  call.variant = variant;
  call.edge = std::move(edge);
  call.input_names = {"q", "k", "v"};
  call.inputs = {q, k, v};
  call.run = [logit_scale](const std::string& name, const std::vector<Tensor>& in) {
    const Tensor query = logit_scale == 1 ? in.at(0) : in.at(0) * logit_scale;
    return KernelRegistry().At(name)(query, in.at(1), in.at(2));
  };
  const double element = static_cast<double>(q.element_size());
  const double q_bytes = q.numel() * element, kv_bytes = (k.numel() + v.numel()) * element;
  // Forward: q, k, v read, the output written. Backward: q, k, v, the output
  // and its gradient read, the three gradients written. The scores are not
  // compulsory traffic: a kernel that keeps them on chip never moves them.
  call.bytes_moved = [=](bool backward) {
    const double forward = 2 * q_bytes + kv_bytes;
    return backward ? forward + 5 * q_bytes + 2 * kv_bytes : forward;
  };
  if (call.edge.empty()) {
    call.edge_cases = [variant, q, k, v] {
      const auto like = [](const Tensor& t, int64_t heads, int64_t length) {
        return torch::empty({t.size(0), heads, length, t.size(3)}, t.options());
      };
      const int64_t heads = q.size(1), L = q.size(2), S = k.size(2);
      std::vector<ops::OpCall> calls;
      calls.push_back(
          KernelCall(variant, like(q, heads, 1), like(k, heads, 1), like(v, heads, 1), "sequence length 1"));
      calls.push_back(KernelCall(variant, like(q, 1, L), like(k, 1, S), like(v, 1, S), "a single head"));
      calls.push_back(KernelCall(variant, like(q, heads, kKeyBlock + 1), like(k, heads, kKeyBlock + 1),
                                 like(v, heads, kKeyBlock + 1), "one key more than a block"));
      calls.push_back(KernelCall(variant, q, k, v, "logits 20 times larger", 20));
      return calls;
    };
    // Odd sizes everywhere (head_dim too) and every size 1.
    call.other_shapes = [variant, q] {
      const int64_t heads = std::min<int64_t>(q.size(1), 3), odd_dim = q.size(3) | 1;
      const auto shaped = [&q](std::vector<int64_t> sizes) { return torch::empty(sizes, q.options()); };
      return std::vector<ops::OpCall>{
          KernelCall(variant, shaped({3, heads, 7, odd_dim}), shaped({3, heads, 13, odd_dim}),
                     shaped({3, heads, 13, odd_dim}), "odd sizes (3, " + std::to_string(heads) + ", 7|13, " +
                                                          std::to_string(odd_dim) + ")"),
          KernelCall(variant, shaped({1, 1, 1, q.size(3)}), shaped({1, 1, 1, q.size(3)}),
                     shaped({1, 1, 1, q.size(3)}), "size 1 (1, 1, 1, " + std::to_string(q.size(3)) + ")")};
    };
  }
  return call;
}

// The structured inputs of q, k, v: each set keeps the gradients of q and k
// from vanishing everywhere but the first (v alike in every row, where they
// are exactly zero).
std::vector<ops::StructuredInputs> StructuredQkv(const ops::OpCall& call, at::Generator& generator) {
  const Tensor &q = call.inputs.at(0), &k = call.inputs.at(1), &v = call.inputs.at(2);
  const auto normal = [&](const Tensor& like) { return torch::randn(like.sizes(), generator, torch::kFloat); };
  const auto as = [&](Tensor nq, Tensor nk, Tensor nv) {
    return std::vector<Tensor>{nq.to(q.options()), nk.to(k.options()), nv.to(v.options())};
  };
  const auto integers = [&](const Tensor& like) { return normal(like).mul(1.5).round().clamp(-2, 2); };
  std::vector<ops::StructuredInputs> sets;
  sets.push_back({"v alike in every row", as(normal(q), normal(k), torch::full(v.sizes(), 0.5))});
  sets.push_back({"small integers", as(integers(q), integers(k), integers(v))});
  sets.push_back({"one-hot rows", as(ops::OneHotRows(q.sizes(), generator), ops::OneHotRows(k.sizes(), generator),
                                     ops::OneHotRows(v.sizes(), generator))});
  sets.push_back({"large values (v x1e4)", as(normal(q), normal(k), normal(v).mul(1e4))});
  sets.push_back({"tiny values (q, k x1e-2, v x1e-4)",
                  as(normal(q).mul(1e-2), normal(k).mul(1e-2), normal(v).mul(1e-4))});
  // Every logit near +100: exp overflows in fp32 unless the row's max is
  // subtracted first. The forward only: the shared component of q and k
  // cancels in their gradients (ill-conditioned by construction).
  const double offset = std::sqrt(100 * std::sqrt(static_cast<double>(q.size(3))));
  Tensor oq = normal(q), ok = normal(k);
  oq.select(3, 0).fill_(offset);
  ok.select(3, 0).fill_(offset);
  sets.push_back({"logits near +100 (softmax overflows without its max subtracted)", as(oq, ok, normal(v)), true});
  return sets;
}

}  // namespace

void CheckQkv(const Tensor& q, const Tensor& k, const Tensor& v) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "attention_kernel: q, k and v must be (B, h, L, d), got ", Sizes(q), ", ", Sizes(k), ", ",
              Sizes(v));
  TORCH_CHECK(k.sizes() == v.sizes(), "attention_kernel: k ", Sizes(k), " and v ", Sizes(v),
              " differ in shape");
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3),
              "attention_kernel: q ", Sizes(q), " and k ", Sizes(k), " differ in batch, heads or head_dim");
  TORCH_CHECK(
      q.is_floating_point() && q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
      "attention_kernel: q, k and v must be floating and of one dtype");
  TORCH_CHECK(q.device() == k.device() && q.device() == v.device(),
              "attention_kernel: q, k and v on different devices");
}

Tensor NaiveAttention(const Tensor& q, const Tensor& k, const Tensor& v) {
  CheckQkv(q, k, v);
  const Tensor scores =
      torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(3))));
  return torch::matmul(torch::softmax(scores, -1), v);
}

Tensor ChunkedAttention(const Tensor& q, const Tensor& k, const Tensor& v) {
  CheckQkv(q, k, v);
  TORCH_CHECK(q.device().is_cpu(), "attention_kernel 'chunked' is a CPU kernel; the tensors are on ",
              q.device());
  // The FLOP counter charges this scope as naive's two matmuls (measure/flop_counter.cc).
  RECORD_FUNCTION("frontier::attention_chunked", std::vector<c10::IValue>({q, k, v}));
  return ChunkedAttentionFunction::apply(q, k, v);
}

Registry<KernelVariant>& KernelRegistry() {
  static Registry<KernelVariant> registry = [] {
    Registry<KernelVariant> r("attention kernel");
    r.Add("naive", NaiveAttention);
    r.Add("chunked", ChunkedAttention);
    return r;
  }();
  return registry;
}

Tensor Attend(const std::string& kernel, const Tensor& q, const Tensor& k, const Tensor& v) {
  const KernelVariant& variant = KernelRegistry().At(kernel);
  return ops::Dispatch([&] { return KernelCall(kernel, q, k, v, ""); }, {q, k, v},
                       [&](const std::vector<Tensor>& in) { return variant(in[0], in[1], in[2]); });
}

ops::Op KernelOp() {
  ops::Op op;
  op.reference = "naive";
  op.variants = [] { return KernelRegistry().Names(); };
  op.structured_inputs = StructuredQkv;
  op.contract =
      "op attention_kernel: scaled dot-product attention softmax(q k^T / sqrt(d)) v.\n"
      "Signature: torch::Tensor Fn(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v)\n"
      "q is (B, h, L, d), k and v are (B, h, S, d), all of one floating dtype (fp32, bf16, fp16 or fp64) on one "
      "device, any strides. Returns (B, h, L, d) in q's dtype, a new tensor (never an input or a view of one), "
      "differentiable in q, k and v (autograd through LibTorch ops, or a torch::autograd::Function with its own "
      "backward). The inputs must be left unchanged. Call frontier::attention::CheckQkv(q, k, v) first.\n"
      "Register: frontier::plugin::RegisterAttentionKernelVariant(\"NAME\", Fn); end the file with "
      "FRONTIER_PLUGIN(Register).";
  op.call_at = [](const std::vector<Tensor>& inputs) {
    TORCH_CHECK(inputs.size() == 3, "attention_kernel takes q, k and v, not ", inputs.size(), " inputs");
    CheckQkv(inputs[0], inputs[1], inputs[2]);
    return KernelCall("naive", inputs[0], inputs[1], inputs[2], "");
  };
  op.reference_source =
      "torch::Tensor NaiveAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {\n"
      "  CheckQkv(q, k, v);\n"
      "  const torch::Tensor scores =\n"
      "      torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(3))));\n"
      "  return torch::matmul(torch::softmax(scores, -1), v);\n"
      "}\n";
  return op;
}

}  // namespace frontier::attention
