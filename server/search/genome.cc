#include "server/search/genome.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace frontier {

size_t SpaceSize(const std::vector<GeneSpec>& genes) {
  size_t size = 1;
  for (const GeneSpec& gene : genes) {
    const size_t levels = static_cast<size_t>(gene.levels);
    if (levels != 0 && size > std::numeric_limits<size_t>::max() / levels) {
      return std::numeric_limits<size_t>::max();
    }
    size *= levels;
  }
  return size;
}

uint64_t UniformIndex(Rng& rng, uint64_t n) {
  // Rejection sampling: only the largest multiple of n below 2^64 is used.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % n;
}

double UniformUnit(Rng& rng) { return static_cast<double>(rng() >> 11) * 0x1p-53; }

GenomeStream::GenomeStream(std::vector<GeneSpec> genes, uint64_t seed)
    : genes_(std::move(genes)), size_(SpaceSize(genes_)) {
  for (const GeneSpec& gene : genes_) {
    if (gene.levels < 1) throw std::invalid_argument("GenomeStream: a dimension without levels");
  }
  if (!genes_.empty()) sobol_.emplace(genes_.size(), seed);
  mode_ = sobol_ ? Mode::kSobol : Mode::kEnumerate;
}

std::optional<Genome> GenomeStream::Next(const std::function<bool(const Genome&)>& taken) {
  const uint64_t miss_limit = size_ <= kSmallSpace ? 4 * static_cast<uint64_t>(size_) + 1024 : kSmallSpace;
  uint64_t misses = 0;
  while (mode_ == Mode::kSobol) {
    const std::vector<double> u = sobol_->Next();
    Genome genome(genes_.size());
    for (size_t d = 0; d < genes_.size(); ++d) {
      genome[d] = std::min(genes_[d].levels - 1, static_cast<int>(u[d] * genes_[d].levels));
    }
    if (!taken(genome)) return genome;
    if (++misses > miss_limit) mode_ = size_ <= kSmallSpace ? Mode::kEnumerate : Mode::kExhausted;
  }
  if (mode_ == Mode::kExhausted) return std::nullopt;
  return FromEnumeration(taken);
}

std::optional<Genome> GenomeStream::FromEnumeration(const std::function<bool(const Genome&)>& taken) {
  while (enumerated_ < size_) {  // size_ <= kSmallSpace here
    size_t rest = enumerated_++;
    Genome genome(genes_.size());
    for (size_t d = genes_.size(); d-- > 0;) {
      genome[d] = static_cast<int>(rest % static_cast<size_t>(genes_[d].levels));
      rest /= static_cast<size_t>(genes_[d].levels);
    }
    if (!taken(genome)) return genome;
  }
  mode_ = Mode::kExhausted;
  return std::nullopt;
}

}  // namespace frontier
