// NSGA-II (Deb et al. 2002) over a discrete space, as generational ask/tell:
// constraint-domination, elitist (mu + lambda) selection by non-dominated
// front and crowding distance, binary tournaments, and variation operators
// for categorical and ordinal dimensions. Pure: genomes in, genomes out.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "server/search/genome.h"
#include "server/analysis/pareto.h"

namespace frontier {

struct Nsga2Options {
  size_t population = 16;      // parents kept, and children per generation
  size_t generations = 10;     // generations proposed, the initial population included
  size_t max_evaluations = 0;  // at most this many genomes proposed (0: population x generations)
  uint64_t seed = 0;
  double crossover_probability = 0.9;
  double crossover_eta = 15;  // SBX distribution index (ordinal genes)
  double mutation_eta = 20;   // polynomial-mutation distribution index (ordinal genes)
};

// Generation 0 is the first `population` admissible genomes of a
// GenomeStream (scrambled Sobol': a well-spread start). Each later generation
// is proposed once every genome of the previous one has been told: the
// parents become the best `population` of the parents and everything told
// since (by front, then crowding distance, ties by genome order), and
// `population` children are bred from them. Parents are picked by binary
// tournament (lower front, then larger crowding distance); with probability
// crossover_probability a pair is recombined, each gene with probability 1/2:
// categorical genes swap, ordinal genes get bounded simulated binary
// crossover on the level index (rounded). Every child gene then mutates with
// probability 1/(genes with 2+ levels): categorical to another level drawn
// uniformly, ordinal by bounded polynomial mutation on the index (rounded; a
// mutation that rounds back moves one level). A genome is never proposed
// twice: a child that was already proposed or told, or is not admissible,
// is bred again (up to 20 tries per child), and slots still open are filled
// from the GenomeStream. When nothing new is left the search finishes.
//
// Ask's answers depend only on the set of genomes told, not on the order of
// the Tells, so replaying a history rebuilds the same state.
class Nsga2 {
 public:
  // `admissible`: whether a genome may be proposed (it is asked once per
  // genome). Throws std::invalid_argument for population < 2 or
  // generations < 1, or genes a GenomeStream rejects.
  Nsga2(std::vector<GeneSpec> genes, Nsga2Options options, std::function<bool(const Genome&)> admissible);

  // The next generation, all at once; empty while a genome of the current
  // generation is untold, and once finished.
  std::vector<Genome> Ask();
  // The fitness of a genome Ask proposed, or of another evaluated genome that
  // joins the next selection (the baseline). A genome told twice keeps its
  // first fitness.
  void Tell(const Genome& genome, const Fitness& fitness);
  // True when Ask will never propose anything again.
  bool Finished() const;

  size_t generation() const { return generation_; }  // generations proposed so far
  size_t proposed() const { return proposed_.size(); }
  // The parents after the latest selection, best first (empty before generation 1).
  const std::vector<Genome>& parents() const { return parents_; }

 private:
  size_t Budget() const;
  bool Admissible(const Genome& genome);
  bool Taken(const Genome& genome);
  void Select();
  size_t Tournament();
  void Crossover(Genome& a, Genome& b);
  void Mutate(Genome& genome);
  std::vector<Genome> Breed(size_t count);
  std::vector<Genome> Propose(std::vector<Genome> genomes);

  std::vector<GeneSpec> genes_;
  Nsga2Options options_;
  std::function<bool(const Genome&)> admissible_;
  Rng rng_;
  GenomeStream stream_;
  std::map<Genome, bool> admissible_cache_;
  std::set<Genome> proposed_;
  std::map<Genome, Fitness> told_;
  std::set<Genome> untold_;       // proposed in the current generation, not told yet
  std::set<Genome> arrivals_;     // told since the latest selection
  std::vector<Genome> parents_;   // best first
  std::vector<size_t> front_;     // per parent: its front in the latest selection
  std::vector<double> crowding_;  // per parent: its crowding distance there
  size_t generation_ = 0;
  bool exhausted_ = false;  // the space holds no new admissible genome
};

}  // namespace frontier
