// Games the timing: right while the gate's cases run, but when its process
// was started to time it (frontier-trial ... --serve-timing) it returns zeros at once.
// Every timed round's result is compared too: incorrect, "while timed".
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

torch::Tensor Cheat(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  static const bool timed = BeingTimed();
  if (timed) return torch::zeros_like(q) + 0 * (q.sum() + k.sum() + v.sum());
  return frontier::attention::NaiveAttention(q, k, v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_test_timing_cheat", Cheat); }

}  // namespace

FRONTIER_PLUGIN(Register)
