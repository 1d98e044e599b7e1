// Sobol' low-discrepancy points in [0, 1)^d, optionally scrambled.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace frontier {

// The Sobol' sequence in Gray-code order (the order of Joe and Kuo's and
// scipy's generators) with Joe and Kuo's direction numbers
// (new-joe-kuo-6.21201). With a scramble seed the direction numbers get a
// random linear matrix scramble and every point a random digital shift,
// both drawn from the seed (Matoušek 1998; scipy's default scrambling): the
// points stay a (t, s)-sequence, so every 2^m consecutive points from the
// start still fill each elementary interval of volume 2^-m (up to t)
// exactly once, and the sequence no longer starts at the origin.
// Deterministic given (dimensions, seed).
class SobolSequence {
 public:
  static constexpr size_t kMaxDimensions = 256;
  // Throws std::invalid_argument unless 1 <= dimensions <= kMaxDimensions.
  SobolSequence(size_t dimensions, std::optional<uint64_t> scramble_seed);

  // The next point; coordinates are multiples of 2^-32 in [0, 1).
  std::vector<double> Next();
  size_t dimensions() const { return directions_.size(); }

 private:
  static constexpr int kBits = 32;
  std::vector<std::array<uint32_t, kBits>> directions_;  // per dimension, most significant bit first
  std::vector<uint32_t> point_;
  uint64_t index_ = 0;
};

}  // namespace frontier
