#include "server/analysis/pareto.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace frontier {

bool Dominates(const std::vector<double>& a, const std::vector<double>& b) {
  bool better = false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] > b[i]) return false;
    if (a[i] < b[i]) better = true;
  }
  return better;
}

std::vector<size_t> ParetoFront(const std::vector<std::vector<double>>& points,
                                const std::vector<bool>& maximize) {
  for (const auto& p : points) {
    if (p.size() != maximize.size())
      throw std::invalid_argument("ParetoFront: point size differs from objectives");
  }
  // In "lower is better" coordinates and sorted lexicographically ascending,
  // every point that dominates another comes before it.
  const size_t dims = maximize.size();
  std::vector<std::vector<double>> lower(points);
  for (std::vector<double>& p : lower) {
    for (size_t d = 0; d < dims; ++d) {
      if (maximize[d]) p[d] = -p[d];
    }
  }
  std::vector<size_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    for (size_t d = 0; d < dims; ++d) {
      if (lower[a][d] != lower[b][d]) return lower[a][d] < lower[b][d];
    }
    return a < b;
  });
  std::vector<size_t> front;
  if (dims == 2) {
    // Dominated exactly when an earlier point with a smaller first coordinate
    // is at most as large in the second, or one with an equal first coordinate
    // is smaller in the second (the first of its run of equal first coordinates).
    double best_before_run = std::numeric_limits<double>::infinity();
    size_t run_start = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      const size_t i = order[k];
      if (k > 0 && lower[i][0] != lower[order[k - 1]][0]) {
        for (size_t r = run_start; r < k; ++r)
          best_before_run = std::min(best_before_run, lower[order[r]][1]);
        run_start = k;
      }
      const bool dominated = best_before_run <= lower[i][1] || lower[order[run_start]][1] < lower[i][1];
      if (!dominated) front.push_back(i);
    }
  } else {
    // A point dominated by anything is dominated by a front point found before it.
    for (size_t i : order) {
      if (std::none_of(front.begin(), front.end(), [&](size_t f) { return Dominates(lower[f], lower[i]); })) {
        front.push_back(i);
      }
    }
  }
  std::sort(front.begin(), front.end());
  return front;
}

bool ConstrainedDominates(const Fitness& a, const Fitness& b) {
  if (a.feasible() != b.feasible()) return a.feasible();
  if (!a.feasible()) return a.violation < b.violation;
  if (a.objectives.size() != b.objectives.size()) {
    throw std::invalid_argument("ConstrainedDominates: objective vectors of different sizes");
  }
  return Dominates(a.objectives, b.objectives);
}

std::vector<std::vector<size_t>> NonDominatedFronts(const std::vector<Fitness>& points) {
  const size_t n = points.size();
  std::vector<std::vector<size_t>> dominates(n);  // i -> the points i dominates
  std::vector<size_t> dominated_by(n, 0);         // how many points dominate i
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      if (ConstrainedDominates(points[i], points[j])) {
        dominates[i].push_back(j);
        ++dominated_by[j];
      } else if (ConstrainedDominates(points[j], points[i])) {
        dominates[j].push_back(i);
        ++dominated_by[i];
      }
    }
  }
  std::vector<std::vector<size_t>> fronts;
  std::vector<size_t> current;
  for (size_t i = 0; i < n; ++i) {
    if (dominated_by[i] == 0) current.push_back(i);
  }
  while (!current.empty()) {
    std::vector<size_t> next;
    for (size_t i : current) {
      for (size_t j : dominates[i]) {
        if (--dominated_by[j] == 0) next.push_back(j);
      }
    }
    std::sort(next.begin(), next.end());
    fronts.push_back(std::move(current));
    current = std::move(next);
  }
  return fronts;
}

std::vector<double> CrowdingDistances(const std::vector<Fitness>& points, const std::vector<size_t>& front) {
  std::vector<double> distance(front.size(), 0.0);
  if (front.empty() || !points[front[0]].feasible()) return distance;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const size_t objectives = points[front[0]].objectives.size();
  std::vector<size_t> order(front.size());
  for (size_t m = 0; m < objectives; ++m) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return points[front[a]].objectives[m] < points[front[b]].objectives[m];
    });
    const double low = points[front[order.front()]].objectives[m];
    const double high = points[front[order.back()]].objectives[m];
    distance[order.front()] = kInf;
    distance[order.back()] = kInf;
    if (high == low) continue;
    for (size_t k = 1; k + 1 < order.size(); ++k) {
      distance[order[k]] +=
          (points[front[order[k + 1]]].objectives[m] - points[front[order[k - 1]]].objectives[m]) /
          (high - low);
    }
  }
  return distance;
}

std::vector<size_t> CrowdingOrder(const std::vector<double>& distances) {
  std::vector<size_t> order(distances.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return distances[a] > distances[b]; });
  return order;
}

std::vector<size_t> RankOrder(const std::vector<Fitness>& points) {
  std::vector<size_t> order;
  order.reserve(points.size());
  for (const std::vector<size_t>& front : NonDominatedFronts(points)) {
    for (size_t k : CrowdingOrder(CrowdingDistances(points, front))) order.push_back(front[k]);
  }
  return order;
}

}  // namespace frontier
