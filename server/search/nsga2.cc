#include "server/search/nsga2.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace frontier {
namespace {

constexpr int kTriesPerChild = 20;

// Bounded simulated binary crossover of two values in [low, high] (Deb and
// Agrawal 1995, as in Deb's NSGA-II code).
void Sbx(double& x1, double& x2, double low, double high, double eta, Rng& rng) {
  if (std::fabs(x1 - x2) < 1e-12) return;
  const double y1 = std::min(x1, x2), y2 = std::max(x1, x2);
  const double u = UniformUnit(rng);
  auto spread = [&](double beta) {
    const double alpha = 2.0 - std::pow(beta, -(eta + 1.0));
    return u <= 1.0 / alpha ? std::pow(u * alpha, 1.0 / (eta + 1.0))
                            : std::pow(1.0 / (2.0 - u * alpha), 1.0 / (eta + 1.0));
  };
  const double beta_low = spread(1.0 + 2.0 * (y1 - low) / (y2 - y1));
  const double beta_high = spread(1.0 + 2.0 * (high - y2) / (y2 - y1));
  double c1 = std::clamp(0.5 * ((y1 + y2) - beta_low * (y2 - y1)), low, high);
  double c2 = std::clamp(0.5 * ((y1 + y2) + beta_high * (y2 - y1)), low, high);
  if (UniformUnit(rng) < 0.5) std::swap(c1, c2);
  x1 = c1;
  x2 = c2;
}

// Bounded polynomial mutation of a value in [low, high] (Deb and Goyal 1996).
double PolynomialMutation(double y, double low, double high, double eta, Rng& rng) {
  const double span = high - low;
  const double u = UniformUnit(rng);
  const double power = 1.0 / (eta + 1.0);
  double delta;
  if (u < 0.5) {
    const double xy = 1.0 - (y - low) / span;
    delta = std::pow(2.0 * u + (1.0 - 2.0 * u) * std::pow(xy, eta + 1.0), power) - 1.0;
  } else {
    const double xy = 1.0 - (high - y) / span;
    delta = 1.0 - std::pow(2.0 * (1.0 - u) + 2.0 * (u - 0.5) * std::pow(xy, eta + 1.0), power);
  }
  return std::clamp(y + delta * span, low, high);
}

}  // namespace

Nsga2::Nsga2(std::vector<GeneSpec> genes, Nsga2Options options, std::function<bool(const Genome&)> admissible)
    : genes_(genes),
      options_(options),
      admissible_(std::move(admissible)),
      rng_(options.seed),
      stream_(std::move(genes), options.seed) {
  if (options_.population < 2) throw std::invalid_argument("Nsga2: population must be at least 2");
  if (options_.generations < 1) throw std::invalid_argument("Nsga2: generations must be at least 1");
}

size_t Nsga2::Budget() const {
  const size_t total =
      options_.max_evaluations > 0 ? options_.max_evaluations : options_.population * options_.generations;
  return total > proposed_.size() ? total - proposed_.size() : 0;
}

bool Nsga2::Finished() const {
  return untold_.empty() && (exhausted_ || generation_ >= options_.generations || Budget() == 0);
}

bool Nsga2::Admissible(const Genome& genome) {
  auto it = admissible_cache_.find(genome);
  if (it == admissible_cache_.end()) it = admissible_cache_.emplace(genome, admissible_(genome)).first;
  return it->second;
}

bool Nsga2::Taken(const Genome& genome) {
  return proposed_.count(genome) || told_.count(genome) || !Admissible(genome);
}

void Nsga2::Tell(const Genome& genome, const Fitness& fitness) {
  if (!told_.emplace(genome, fitness).second) return;
  arrivals_.insert(genome);
  untold_.erase(genome);
}

std::vector<Genome> Nsga2::Ask() {
  if (Finished() || !untold_.empty()) return {};
  std::vector<Genome> batch;
  if (generation_ == 0) {
    const size_t count = std::min(options_.population, Budget());
    while (batch.size() < count) {
      std::optional<Genome> genome = stream_.Next([&](const Genome& g) {
        return Taken(g) || std::find(batch.begin(), batch.end(), g) != batch.end();
      });
      if (!genome) break;
      batch.push_back(std::move(*genome));
    }
  } else {
    Select();
    batch = Breed(std::min(options_.population, Budget()));
  }
  if (batch.empty()) {
    exhausted_ = true;
    return {};
  }
  ++generation_;
  return Propose(std::move(batch));
}

std::vector<Genome> Nsga2::Propose(std::vector<Genome> genomes) {
  for (const Genome& genome : genomes) {
    proposed_.insert(genome);
    untold_.insert(genome);
  }
  return genomes;
}

void Nsga2::Select() {
  // The pool in genome order, so the selection does not depend on the order of the Tells.
  std::set<Genome> pool(parents_.begin(), parents_.end());
  pool.insert(arrivals_.begin(), arrivals_.end());
  arrivals_.clear();
  const std::vector<Genome> members(pool.begin(), pool.end());
  std::vector<Fitness> points;
  points.reserve(members.size());
  for (const Genome& genome : members) points.push_back(told_.at(genome));
  parents_.clear();
  front_.clear();
  crowding_.clear();
  const std::vector<std::vector<size_t>> fronts = NonDominatedFronts(points);
  for (size_t f = 0; f < fronts.size() && parents_.size() < options_.population; ++f) {
    const std::vector<double> distance = CrowdingDistances(points, fronts[f]);
    const std::vector<size_t> order = CrowdingOrder(distance);
    for (size_t k = 0; k < order.size() && parents_.size() < options_.population; ++k) {
      parents_.push_back(members[fronts[f][order[k]]]);
      front_.push_back(f);
      crowding_.push_back(distance[order[k]]);
    }
  }
}

size_t Nsga2::Tournament() {
  const size_t a = UniformIndex(rng_, parents_.size());
  const size_t b = UniformIndex(rng_, parents_.size());
  if (front_[b] != front_[a]) return front_[b] < front_[a] ? b : a;
  return crowding_[b] > crowding_[a] ? b : a;
}

void Nsga2::Crossover(Genome& a, Genome& b) {
  if (UniformUnit(rng_) >= options_.crossover_probability) return;
  for (size_t d = 0; d < genes_.size(); ++d) {
    if (UniformUnit(rng_) >= 0.5) continue;
    if (!genes_[d].ordinal) {
      std::swap(a[d], b[d]);
      continue;
    }
    double x1 = a[d], x2 = b[d];
    Sbx(x1, x2, 0.0, genes_[d].levels - 1.0, options_.crossover_eta, rng_);
    a[d] = static_cast<int>(std::lround(x1));
    b[d] = static_cast<int>(std::lround(x2));
  }
}

void Nsga2::Mutate(Genome& genome) {
  const size_t variable =
      std::count_if(genes_.begin(), genes_.end(), [](const GeneSpec& g) { return g.levels > 1; });
  if (variable == 0) return;
  const double probability = 1.0 / static_cast<double>(variable);
  for (size_t d = 0; d < genes_.size(); ++d) {
    const int levels = genes_[d].levels;
    if (levels < 2 || UniformUnit(rng_) >= probability) continue;
    if (!genes_[d].ordinal) {
      const int other = static_cast<int>(UniformIndex(rng_, static_cast<uint64_t>(levels - 1)));
      genome[d] = other < genome[d] ? other : other + 1;
      continue;
    }
    const double moved = PolynomialMutation(genome[d], 0.0, levels - 1.0, options_.mutation_eta, rng_);
    int level = static_cast<int>(std::lround(moved));
    if (level == genome[d]) {
      // Rounded back: step one level towards the move, or away from the bound.
      const bool up = genome[d] == 0 || (genome[d] < levels - 1 && moved >= genome[d]);
      level = genome[d] + (up ? 1 : -1);
    }
    genome[d] = level;
  }
}

std::vector<Genome> Nsga2::Breed(size_t count) {
  std::vector<Genome> children;
  auto fresh = [&](const Genome& g) {
    return !Taken(g) && std::find(children.begin(), children.end(), g) == children.end();
  };
  for (size_t tries = 0; children.size() < count && tries < kTriesPerChild * count && !parents_.empty();
       tries += 2) {
    Genome a = parents_[Tournament()];
    Genome b = parents_[Tournament()];
    Crossover(a, b);
    Mutate(a);
    Mutate(b);
    if (fresh(a)) children.push_back(std::move(a));
    if (children.size() < count && fresh(b)) children.push_back(std::move(b));
  }
  while (children.size() < count) {
    std::optional<Genome> genome = stream_.Next([&](const Genome& g) { return !fresh(g); });
    if (!genome) break;
    children.push_back(std::move(*genome));
  }
  return children;
}

}  // namespace frontier
