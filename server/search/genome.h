// Configurations of a discrete search space as genomes (one choice index per
// dimension), portable random draws, and a stream of distinct genomes that
// covers the space. Pure, no SearchSpace: test problems drive these directly.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "server/search/sobol.h"

namespace frontier {

// One dimension: how many choices, and whether they are ordered (numbers
// listed in increasing order, where neighbours are similar) or categorical.
struct GeneSpec {
  int levels = 1;
  bool ordinal = false;
};

using Genome = std::vector<int>;  // a choice index per dimension

// Product of the levels, saturating at SIZE_MAX.
size_t SpaceSize(const std::vector<GeneSpec>& genes);

// Uniform draws with the same results on every platform (the standard
// distributions are implementation-defined).
using Rng = std::mt19937_64;
// Uniform in [0, n); n >= 1.
uint64_t UniformIndex(Rng& rng, uint64_t n);
// Uniform in [0, 1), 53 bits.
double UniformUnit(Rng& rng);

// Distinct genomes covering the space, well spread: scrambled Sobol' points
// mapped to choice indices (floor(u * levels)), skipping genomes `taken`
// says are used. On a space of at most 2^20 genomes, once the points stop
// finding untaken genomes (4 x SpaceSize + 1024 consecutive misses), the untaken
// genomes follow in mixed-radix order (first dimension slowest), so every
// genome comes out exactly once. On a larger space the stream ends after
// 2^20 consecutive misses. Deterministic given (genes, seed) and the
// answers of `taken`.
class GenomeStream {
 public:
  // Throws std::invalid_argument for more than SobolSequence::kMaxDimensions
  // genes or a gene without levels.
  GenomeStream(std::vector<GeneSpec> genes, uint64_t seed);

  // The next genome `taken` rejects not, or nullopt once the space is exhausted.
  std::optional<Genome> Next(const std::function<bool(const Genome&)>& taken);

 private:
  std::optional<Genome> FromEnumeration(const std::function<bool(const Genome&)>& taken);

  static constexpr size_t kSmallSpace = size_t{1} << 20;
  enum class Mode { kSobol, kEnumerate, kExhausted };

  std::vector<GeneSpec> genes_;
  std::optional<SobolSequence> sobol_;  // absent for a space without dimensions
  size_t size_;
  Mode mode_;
  size_t enumerated_ = 0;  // the next mixed-radix index once enumerating
};

}  // namespace frontier
