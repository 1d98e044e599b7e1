// Games the forward speed-up: right in the gate (its calls without autograd
// included) and in every timed forward+backward, but when its process was
// started to time it (frontier-trial ... --serve-timing), a call without autograd
// (the timed forward-only calls) returns zeros at once. The forward-only
// calls are compared too: incorrect, "while timed", "forward only".
#include <fstream>
#include <iterator>
#include <string>

#include "worker/trial/plugin.h"

namespace {

bool BeingTimed() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string argv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return argv.find(std::string("--serve-timing\0", 15)) != std::string::npos;
}

torch::Tensor ForwardCheat(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  static const bool timed = BeingTimed();
  if (timed && !torch::GradMode::is_enabled()) return torch::zeros_like(q);
  return frontier::attention::NaiveAttention(q, k, v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_test_forward_cheat", ForwardCheat); }

}  // namespace

FRONTIER_PLUGIN(Register)
