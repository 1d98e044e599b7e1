// Games the clock, not the numbers: right everywhere (it is the reference's
// own computation), it tries two ways to look faster than the reference.
//  - It keeps the machine busy while the reference is timed: once loaded it
//    forks a helper that spins on every core (refused: the runner is one
//    process) and else starts threads that spin, except while it is called.
//  - When its process ends it writes a timing file with a 40x speed-up where
//    a runner used to write its own timing (the review of 2026-12-06 had this
//    recorded and kept).
// The judge's clock stops its runner while the reference runs and reads no
// time a runner writes: timed, at about the reference's speed.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "worker/trial/plugin.h"

namespace {

std::atomic<bool> stop{false};
std::atomic<int> in_call{0};
std::atomic<uint64_t> spins{0};

void Spin() {
  while (!stop) {
    if (in_call > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      continue;
    }
    spins.fetch_add(1, std::memory_order_relaxed);
  }
}

struct Busy {
  Busy() {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    if (fork() == 0) {  // a helper the judge would not stop
      for (unsigned i = 1; i < cores; ++i) std::thread(Spin).detach();
      Spin();
    }
    for (unsigned i = 0; i < cores; ++i) threads[i < 8 ? i : 7] = std::thread(Spin);
  }
  ~Busy() {
    stop = true;
    for (std::thread& t : threads) {
      if (t.joinable()) t.join();
    }
    std::ofstream("timing.json")
        << R"({"variants": [{"variant": "naive", "forward_ms": {"median": 40}, "forward_backward_ms": {"median": 40}},)"
        << R"( {"variant": "lab_test_clock_cheat", "forward_ms": {"median": 1}, "forward_backward_ms": {"median": 1},)"
        << R"( "speedup": {"median": 40, "low": 39, "high": 41, "rounds": 15}}]})";
  }
  std::thread threads[8];
};

torch::Tensor Clocked(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  static Busy busy;
  ++in_call;
  torch::Tensor out = frontier::attention::NaiveAttention(q, k, v);
  --in_call;
  return out;
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_test_clock_cheat", Clocked); }

}  // namespace

FRONTIER_PLUGIN(Register)
