// Multi-objective search quality of Frontier's strategy core on standard test
// problems (ZDT1, ZDT2, ZDT3 with 30 variables, DTLZ2 with 2 objectives and 11
// variables), every variable discretized: "ordinal" (101 ordered levels, x =
// i/100) or "categorical" (21 unordered levels, x = i/20; 21 keeps ZDT3's
// sin(10 pi x1) from vanishing on every level, and DTLZ2's optimum 0.5 on one). Drives the genome
// strategies directly, as the coordinator would (ask a batch, evaluate, tell):
//   nsga2   Nsga2 with the strategy's defaults (population 16, the initial
//           population from the scrambled Sobol' stream)
//   sobol   GenomeStream (what strategy sobol proposes)
//   random  independent uniform genomes (strategy random shuffles the
//           enumerated grid, which is the same draw on spaces this large)
// Prints one JSON document on stdout: every run's objective vectors in
// evaluation order; tests/bench/strategy_bench.py turns them into hypervolume
// tables next to Optuna's samplers.
//
//   strategy_bench [--seeds N] [--evaluations N] [--population N]
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/search/genome.h"
#include "server/search/nsga2.h"
#include "server/search/tpe.h"
#include "tests/bench/bench_main.h"

namespace frontier {
namespace {

constexpr double kPi = 3.14159265358979323846;

struct Problem {
  std::string name;
  int variables;
  std::function<std::vector<double>(const std::vector<double>&)> evaluate;  // x in [0, 1]^n, minimized
};

double ZdtG(const std::vector<double>& x) {
  double sum = 0;
  for (size_t i = 1; i < x.size(); ++i) sum += x[i];
  return 1 + 9 * sum / (x.size() - 1);
}

std::vector<Problem> Problems() {
  return {
      {"zdt1", 30,
       [](const std::vector<double>& x) {
         const double g = ZdtG(x);
         return std::vector<double>{x[0], g * (1 - std::sqrt(x[0] / g))};
       }},
      {"zdt2", 30,
       [](const std::vector<double>& x) {
         const double g = ZdtG(x);
         return std::vector<double>{x[0], g * (1 - (x[0] / g) * (x[0] / g))};
       }},
      {"zdt3", 30,
       [](const std::vector<double>& x) {
         const double g = ZdtG(x);
         return std::vector<double>{x[0],
                                    g * (1 - std::sqrt(x[0] / g) - x[0] / g * std::sin(10 * kPi * x[0]))};
       }},
      {"dtlz2", 11,
       [](const std::vector<double>& x) {
         double g = 0;
         for (size_t i = 1; i < x.size(); ++i) g += (x[i] - 0.5) * (x[i] - 0.5);
         return std::vector<double>{(1 + g) * std::cos(x[0] * kPi / 2), (1 + g) * std::sin(x[0] * kPi / 2)};
       }},
  };
}

struct Encoding {
  std::string name;
  int levels;
  bool ordinal;
};

std::vector<double> Decode(const Genome& genome, int levels) {
  std::vector<double> x;
  for (int level : genome) x.push_back(level / (levels - 1.0));
  return x;
}

using Objectives = std::vector<std::vector<double>>;

// Ask a round, evaluate it, tell it, until the algorithm proposes nothing.
template <typename Algorithm>
Objectives RunRounds(Algorithm& algorithm, const Problem& problem, const Encoding& encoding) {
  Objectives out;
  for (std::vector<Genome> round = algorithm.Ask(); !round.empty(); round = algorithm.Ask()) {
    for (const Genome& genome : round) {
      out.push_back(problem.evaluate(Decode(genome, encoding.levels)));
      algorithm.Tell(genome, Fitness{out.back(), 0});
    }
  }
  return out;
}

std::vector<GeneSpec> Genes(const Problem& problem, const Encoding& encoding) {
  return std::vector<GeneSpec>(problem.variables, GeneSpec{encoding.levels, encoding.ordinal});
}

Objectives RunNsga2(const Problem& problem, const Encoding& encoding, uint64_t seed, size_t evaluations,
                    size_t population) {
  Nsga2Options options;
  options.population = population;
  options.generations = evaluations;  // bounded by max_evaluations
  options.max_evaluations = evaluations;
  options.seed = seed;
  Nsga2 nsga2(Genes(problem, encoding), options, [](const Genome&) { return true; });
  return RunRounds(nsga2, problem, encoding);
}

Objectives RunTpe(const Problem& problem, const Encoding& encoding, uint64_t seed, size_t evaluations,
                  const TpeOptions& defaults) {
  TpeOptions options = defaults;
  options.max_evaluations = evaluations;
  options.seed = seed;
  Tpe tpe(Genes(problem, encoding), options, [](const Genome&) { return true; });
  return RunRounds(tpe, problem, encoding);
}

Objectives RunSobol(const Problem& problem, const Encoding& encoding, uint64_t seed, size_t evaluations) {
  GenomeStream stream(Genes(problem, encoding), seed);
  std::set<Genome> drawn;
  Objectives out;
  while (out.size() < evaluations) {
    const std::optional<Genome> genome = stream.Next([&](const Genome& g) { return drawn.count(g) > 0; });
    if (!genome) break;
    drawn.insert(*genome);
    out.push_back(problem.evaluate(Decode(*genome, encoding.levels)));
  }
  return out;
}

Objectives RunRandom(const Problem& problem, const Encoding& encoding, uint64_t seed, size_t evaluations) {
  Rng rng(seed);
  Objectives out;
  for (size_t i = 0; i < evaluations; ++i) {
    Genome genome(problem.variables);
    for (int& level : genome) level = static_cast<int>(UniformIndex(rng, encoding.levels));
    out.push_back(problem.evaluate(Decode(genome, encoding.levels)));
  }
  return out;
}

int Main(int argc, char** argv) {
  size_t seeds = 10, evaluations = 500, population = 16;
  TpeOptions tpe;
  std::string only;  // one algorithm's runs alone (tuning), e.g. frontier-tpe
  const std::string usage =
      "usage: strategy_bench [--seeds N] [--evaluations N] [--population N] [--tpe-batch N]\n"
      "                      [--tpe-startup N] [--tpe-candidates N] [--only ALGORITHM]\n";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long parsed = bench::IntFlag(flag, argv[i + 1]);
    if (parsed < 0) throw std::invalid_argument(flag + ": " + argv[i + 1] + " is negative");
    const size_t value = static_cast<size_t>(parsed);
    if (flag == "--seeds") {
      seeds = value;
    } else if (flag == "--evaluations") {
      evaluations = value;
    } else if (flag == "--population") {
      population = value;
    } else if (flag == "--tpe-batch") {
      tpe.batch = value;
    } else if (flag == "--tpe-startup") {
      tpe.startup = value;
    } else if (flag == "--tpe-candidates") {
      tpe.candidates = value;
    } else if (flag == "--only") {
      only = argv[i + 1];
    } else {
      std::cerr << usage;
      return 64;
    }
  }
  if (argc % 2 == 0) {
    std::cerr << usage;
    return 64;
  }
  using Run = std::function<Objectives(const Problem&, const Encoding&, uint64_t)>;
  const std::vector<std::pair<std::string, Run>> algorithms = {
      {"frontier-tpe", [&](const Problem& p, const Encoding& e,
                           uint64_t seed) { return RunTpe(p, e, seed, evaluations, tpe); }},
      {"frontier-nsga2", [&](const Problem& p, const Encoding& e,
                             uint64_t seed) { return RunNsga2(p, e, seed, evaluations, population); }},
      {"frontier-sobol",
       [&](const Problem& p, const Encoding& e, uint64_t seed) { return RunSobol(p, e, seed, evaluations); }},
      {"frontier-random", [&](const Problem& p, const Encoding& e,
                              uint64_t seed) { return RunRandom(p, e, seed, evaluations); }},
  };
  const std::vector<Encoding> encodings = {{"ordinal", 101, true}, {"categorical", 21, false}};
  nlohmann::json runs = nlohmann::json::array();
  for (const Problem& problem : Problems()) {
    for (const Encoding& encoding : encodings) {
      for (uint64_t seed = 0; seed < seeds; ++seed) {
        for (const auto& [name, run] : algorithms) {
          if (!only.empty() && name != only) continue;
          runs.push_back({{"problem", problem.name},
                          {"encoding", encoding.name},
                          {"algorithm", name},
                          {"seed", seed},
                          {"objectives", run(problem, encoding, seed)}});
        }
      }
    }
  }
  std::cout
      << nlohmann::json{{"population", population},
                        {"tpe",
                         {{"batch", tpe.batch}, {"startup", tpe.startup}, {"candidates", tpe.candidates}}},
                        {"runs", runs}}
             .dump()
      << "\n";
  return 0;
}

}  // namespace
}  // namespace frontier

int main(int argc, char** argv) {
  return frontier::bench::GuardedMain("strategy_bench", [&] { return frontier::Main(argc, argv); });
}
