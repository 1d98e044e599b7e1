#include "server/search/tpe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "server/analysis/hypervolume.h"

namespace frontier {
namespace {

constexpr double kTiny = 1e-12;  // the weight of an infeasible good genome; a contribution's floor
constexpr size_t kMaxGood = 25;  // the good set's largest size
constexpr int kDrawsPerProposal = 8;
// Scott's rule's factor for ordinal kernels. Optuna uses 0.2; 0.1 measured
// higher hypervolume on every ordinal row of tests/bench/strategy_bench.py.
constexpr double kBandwidth = 0.1;

// log erfc(x) for x >= 0, without underflow (asymptotic series beyond 20).
double LogErfc(double x) {
  if (x < 20) return std::log(std::erfc(x));
  const double inv2 = 1 / (x * x);
  return -x * x - std::log(x) - 0.5 * std::log(3.14159265358979323846) +
         std::log1p(-0.5 * inv2 + 0.75 * inv2 * inv2);
}

// log of the standard normal mass of [a, b], a < b, accurate in both tails.
double LogNormalMass(double a, double b) {
  if (b <= 0) return LogNormalMass(-b, -a);
  const double r = 1 / std::sqrt(2.0);
  if (a >= 0) {
    const double la = LogErfc(a * r), lb = LogErfc(b * r);
    return std::log(0.5) + la + std::log1p(-std::exp(lb - la));
  }
  return std::log1p(-0.5 * std::erfc(-a * r) - 0.5 * std::erfc(b * r));
}

// log P(level | a Gaussian on the level index centred on `centre` with
// bandwidth `sigma`, restricted to [-1/2, levels - 1/2]), for every level.
std::vector<double> OrdinalKernel(int levels, double centre, double sigma) {
  const double total = LogNormalMass((-0.5 - centre) / sigma, (levels - 0.5 - centre) / sigma);
  std::vector<double> log_mass(static_cast<size_t>(levels));
  for (int level = 0; level < levels; ++level) {
    log_mass[static_cast<size_t>(level)] =
        LogNormalMass((level - 0.5 - centre) / sigma, (level + 0.5 - centre) / sigma) - total;
  }
  return log_mass;
}

size_t Draw(Rng& rng, const std::vector<double>& probabilities) {
  double u = UniformUnit(rng);
  for (size_t i = 0; i + 1 < probabilities.size(); ++i) {
    if (u < probabilities[i]) return i;
    u -= probabilities[i];
  }
  return probabilities.size() - 1;
}

double LogSumExp(const std::vector<double>& values) {
  const double top = *std::max_element(values.begin(), values.end());
  if (!std::isfinite(top)) return top;
  double sum = 0;
  for (double v : values) sum += std::exp(v - top);
  return top + std::log(sum);
}

// A Parzen estimator over genomes: a weighted mixture of one kernel per
// centre genome and a prior kernel, each the product of per-dimension
// kernels (see Tpe in tpe.h).
class ParzenDensity {
 public:
  ParzenDensity(const std::vector<GeneSpec>& genes, std::vector<Genome> centres, std::vector<double> weights,
                double prior_weight)
      : genes_(genes), centres_(std::move(centres)) {
    weights.push_back(prior_weight);
    double sum = 0;
    for (double w : weights) sum += w;
    for (double w : weights) {
      probabilities_.push_back(w / sum);
      log_weights_.push_back(std::log(w / sum));
    }
    const size_t m = centres_.size();
    const size_t variable =
        std::count_if(genes_.begin(), genes_.end(), [](const GeneSpec& g) { return g.levels > 1; });
    const double scott =
        kBandwidth * std::pow(static_cast<double>(std::max<size_t>(m, 1)), -1.0 / (variable + 4.0));
    for (const GeneSpec& gene : genes_) {
      const int levels = gene.levels;
      if (gene.ordinal && !ordinal_.count(levels)) {
        const double sigma = std::clamp(scott * levels, levels / std::min(100.0, m + 1.0), 1.0 * levels);
        Table table;
        for (int centre = 0; centre < levels; ++centre) table.push_back(OrdinalKernel(levels, centre, sigma));
        table.push_back(OrdinalKernel(levels, (levels - 1) / 2.0, levels));  // the prior
        ordinal_.emplace(levels, std::move(table));
      }
      if (!gene.ordinal && !categorical_.count(levels)) {
        const double p = prior_weight / ((m + 1.0) * levels);  // see tpe.h
        const double norm = 1 + levels * p;
        categorical_.emplace(levels, Categorical{std::log((1 + p) / norm), std::log(p / norm), 1 / norm});
      }
    }
  }

  double LogPdf(const Genome& genome) const {
    std::vector<double> terms(log_weights_);
    for (size_t k = 0; k < terms.size(); ++k) {
      for (size_t d = 0; d < genes_.size(); ++d) terms[k] += LogKernel(k, d, genome[d]);
    }
    return LogSumExp(terms);
  }

  Genome Sample(Rng& rng) const {
    const size_t k = Draw(rng, probabilities_);
    Genome genome(genes_.size());
    for (size_t d = 0; d < genes_.size(); ++d) {
      const int levels = genes_[d].levels;
      if (levels < 2) continue;
      if (genes_[d].ordinal) {
        const std::vector<double>& log_mass = ordinal_.at(levels)[Row(k, d)];
        std::vector<double> mass;
        for (double v : log_mass) mass.push_back(std::exp(v));
        genome[d] = static_cast<int>(Draw(rng, mass));
      } else if (!IsPrior(k) && UniformUnit(rng) < categorical_.at(levels).own_share) {
        genome[d] = centres_[k][d];
      } else {
        genome[d] = static_cast<int>(UniformIndex(rng, static_cast<uint64_t>(levels)));
      }
    }
    return genome;
  }

 private:
  using Table = std::vector<std::vector<double>>;  // [centre level, or levels for the prior][level]
  struct Categorical {
    double log_own;    // log P(the centre's level)
    double log_other;  // log P(any other level)
    double own_share;  // the kernel as a mixture: the centre's level with this share, else uniform
  };

  bool IsPrior(size_t k) const { return k == centres_.size(); }
  size_t Row(size_t k, size_t d) const {
    return IsPrior(k) ? static_cast<size_t>(genes_[d].levels) : static_cast<size_t>(centres_[k][d]);
  }

  double LogKernel(size_t k, size_t d, int level) const {
    const int levels = genes_[d].levels;
    if (levels < 2) return 0;
    if (genes_[d].ordinal) return ordinal_.at(levels)[Row(k, d)][static_cast<size_t>(level)];
    if (IsPrior(k)) return -std::log(static_cast<double>(levels));
    const Categorical& c = categorical_.at(levels);
    return centres_[k][d] == level ? c.log_own : c.log_other;
  }

  const std::vector<GeneSpec>& genes_;
  std::vector<Genome> centres_;
  std::vector<double> probabilities_;  // per kernel, the prior last
  std::vector<double> log_weights_;
  std::map<int, Table> ordinal_;            // per number of levels
  std::map<int, Categorical> categorical_;  // per number of levels
};

// The reference point of a set of minimized objective vectors: 1.1 x its
// worst value in each objective (0.9 x when negative; 1e-12 for 0), as
// maximized coordinates for Hypervolume.
std::vector<double> Reference(const std::vector<const std::vector<double>*>& points) {
  std::vector<double> reference(points.front()->size(), -std::numeric_limits<double>::infinity());
  for (const auto* p : points) {
    for (size_t i = 0; i < reference.size(); ++i) reference[i] = std::max(reference[i], (*p)[i]);
  }
  for (double& r : reference) {
    r = std::max(1.1 * r, 0.9 * r);
    if (r == 0) r = kTiny;
    r = -r;
  }
  return reference;
}

// Callers keep within kMaxHypervolumeSteps (HypervolumeAffordable), where Hypervolume has a value.
double HypervolumeOf(const std::vector<const std::vector<double>*>& points,
                     const std::vector<double>& reference) {
  std::vector<std::vector<double>> maximized;
  for (const auto* p : points) {
    maximized.emplace_back();
    for (double v : *p) maximized.back().push_back(-v);
  }
  return Hypervolume(maximized, reference).value();
}

// Whether `calls` hypervolumes of at most `points` points each stay within kMaxHypervolumeSteps in all.
bool HypervolumeAffordable(size_t calls, size_t points, size_t objectives) {
  return static_cast<double>(calls) * HypervolumeSteps(points, objectives) <= kMaxHypervolumeSteps;
}

// `count` members of a feasible front chosen greedily by hypervolume gain;
// where that is not affordable (many objectives), the `count` with the
// largest crowding distance (CrowdingOrder: ties to the earlier).
std::vector<size_t> GreedyHypervolumeSubset(const std::vector<Fitness>& points,
                                            const std::vector<size_t>& front, size_t count) {
  if (!HypervolumeAffordable(count * front.size(), count, points[front.front()].objectives.size())) {
    const std::vector<size_t> order = CrowdingOrder(CrowdingDistances(points, front));
    std::vector<size_t> chosen;
    for (size_t i = 0; i < count; ++i) chosen.push_back(front[order[i]]);
    return chosen;
  }
  std::vector<const std::vector<double>*> all;
  for (size_t i : front) all.push_back(&points[i].objectives);
  const std::vector<double> reference = Reference(all);
  std::vector<size_t> chosen;
  std::vector<const std::vector<double>*> selected;
  std::vector<bool> taken(front.size(), false);
  double covered = 0;
  while (chosen.size() < count) {
    size_t best = front.size();
    double best_volume = -1;
    for (size_t j = 0; j < front.size(); ++j) {
      if (taken[j]) continue;
      selected.push_back(all[j]);
      const double volume = HypervolumeOf(selected, reference);
      selected.pop_back();
      if (volume - covered > best_volume) {
        best_volume = volume - covered;
        best = j;
      }
    }
    taken[best] = true;
    selected.push_back(all[best]);
    covered += best_volume;
    chosen.push_back(front[best]);
  }
  return chosen;
}

// The good genomes (indices into `points`) for a good set of `count`.
std::vector<size_t> GoodSet(const std::vector<Fitness>& points, size_t count) {
  std::vector<size_t> good;
  for (const std::vector<size_t>& front : NonDominatedFronts(points)) {
    const size_t room = count - good.size();
    if (room == 0) break;
    if (front.size() <= room) {
      good.insert(good.end(), front.begin(), front.end());
    } else if (points[front.front()].feasible()) {
      const std::vector<size_t> subset = GreedyHypervolumeSubset(points, front, room);
      good.insert(good.end(), subset.begin(), subset.end());
    } else {
      good.insert(good.end(), front.begin(), front.begin() + static_cast<std::ptrdiff_t>(room));
    }
  }
  std::sort(good.begin(), good.end());
  return good;
}

// Each good genome's weight: its exclusive hypervolume contribution within
// the good set's feasible members, over the largest; 1e-12 when infeasible.
std::vector<double> GoodWeights(const std::vector<Fitness>& points, const std::vector<size_t>& good) {
  std::vector<double> weights(good.size(), kTiny);
  std::vector<size_t> feasible;
  for (size_t g = 0; g < good.size(); ++g) {
    if (points[good[g]].feasible()) feasible.push_back(g);
  }
  if (feasible.size() == 1) weights[feasible[0]] = 1;
  if (feasible.size() < 2) return weights;
  if (!HypervolumeAffordable(feasible.size() + 1, feasible.size(),
                             points[good[feasible[0]]].objectives.size())) {
    for (size_t g : feasible) weights[g] = 1;
    return weights;
  }
  std::vector<const std::vector<double>*> all;
  for (size_t g : feasible) all.push_back(&points[good[g]].objectives);
  const std::vector<double> reference = Reference(all);
  const double volume = HypervolumeOf(all, reference);
  std::vector<double> contributions;
  for (size_t i = 0; i < all.size(); ++i) {
    std::vector<const std::vector<double>*> rest = all;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
    contributions.push_back(volume - HypervolumeOf(rest, reference) + kTiny);
  }
  const double top = *std::max_element(contributions.begin(), contributions.end());
  for (size_t i = 0; i < feasible.size(); ++i)
    weights[feasible[i]] = std::clamp(contributions[i] / top, 0.0, 1.0);
  return weights;
}

}  // namespace

Tpe::Tpe(std::vector<GeneSpec> genes, TpeOptions options, std::function<bool(const Genome&)> admissible)
    : genes_(genes),
      options_(options),
      admissible_(std::move(admissible)),
      rng_(options.seed),
      stream_(std::move(genes), options.seed) {
  if (options_.startup < 1) throw std::invalid_argument("Tpe: startup must be at least 1");
  if (options_.batch < 1) throw std::invalid_argument("Tpe: batch must be at least 1");
  if (options_.candidates < 1) throw std::invalid_argument("Tpe: candidates must be at least 1");
}

size_t Tpe::Budget() const {
  return options_.max_evaluations > proposed_.size() ? options_.max_evaluations - proposed_.size() : 0;
}

bool Tpe::Finished() const { return untold_.empty() && (exhausted_ || Budget() == 0); }

bool Tpe::Admissible(const Genome& genome) {
  auto it = admissible_cache_.find(genome);
  if (it == admissible_cache_.end()) it = admissible_cache_.emplace(genome, admissible_(genome)).first;
  return it->second;
}

bool Tpe::Fresh(const Genome& genome, const std::vector<Genome>& round) {
  return !proposed_.count(genome) && !told_.count(genome) &&
         std::find(round.begin(), round.end(), genome) == round.end() && Admissible(genome);
}

void Tpe::Tell(const Genome& genome, const Fitness& fitness) {
  if (!told_.emplace(genome, fitness).second) return;
  untold_.erase(genome);
}

std::vector<Genome> Tpe::Ask() {
  if (Finished() || !untold_.empty()) return {};
  const size_t count = std::min(rounds_ == 0 ? options_.startup : options_.batch, Budget());
  std::vector<Genome> round = rounds_ == 0 || told_.empty() ? FromStream(count, {}) : FromModel(count);
  if (round.empty()) {
    exhausted_ = true;
    return {};
  }
  ++rounds_;
  for (const Genome& genome : round) {
    proposed_.insert(genome);
    untold_.insert(genome);
  }
  return round;
}

std::vector<Genome> Tpe::FromStream(size_t count, std::vector<Genome> round) {
  while (round.size() < count) {
    std::optional<Genome> genome = stream_.Next([&](const Genome& g) { return !Fresh(g, round); });
    if (!genome) break;
    round.push_back(std::move(*genome));
  }
  return round;
}

std::vector<Genome> Tpe::FromModel(size_t count) {
  std::vector<Genome> genomes;
  std::vector<Fitness> points;
  for (const auto& [genome, fitness] : told_) {
    genomes.push_back(genome);
    points.push_back(fitness);
  }
  const size_t good_count =
      std::min(kMaxGood, static_cast<size_t>(std::ceil(0.1 * static_cast<double>(points.size()))));
  const std::vector<size_t> good = GoodSet(points, good_count);
  std::vector<Genome> good_centres, bad_centres;
  for (size_t i = 0, g = 0; i < genomes.size(); ++i) {
    if (g < good.size() && good[g] == i) {
      good_centres.push_back(genomes[i]);
      ++g;
    } else {
      bad_centres.push_back(genomes[i]);
    }
  }
  const ParzenDensity good_density(genes_, std::move(good_centres), GoodWeights(points, good),
                                   options_.prior_weight);

  std::vector<Genome> round;
  while (round.size() < count) {
    // The round's earlier proposals count as bad (a constant liar), which
    // spreads a round instead of drawing the same region `batch` times.
    std::vector<Genome> liars = bad_centres;
    liars.insert(liars.end(), round.begin(), round.end());
    const std::vector<double> bad_weights(liars.size(), 1.0);
    const ParzenDensity bad_density(genes_, std::move(liars), bad_weights, options_.prior_weight);
    std::optional<Genome> best;
    double best_score = -std::numeric_limits<double>::infinity();
    for (int draw = 0; draw < kDrawsPerProposal && !best; ++draw) {
      for (size_t c = 0; c < options_.candidates; ++c) {
        Genome candidate = good_density.Sample(rng_);
        if (!Fresh(candidate, round)) continue;
        const double score = good_density.LogPdf(candidate) - bad_density.LogPdf(candidate);
        if (!best || score > best_score) {
          best_score = score;
          best = std::move(candidate);
        }
      }
    }
    if (!best) break;
    round.push_back(std::move(*best));
  }
  return FromStream(count, std::move(round));
}

}  // namespace frontier
