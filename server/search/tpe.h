// Multi-objective tree-structured Parzen estimator (MO-TPE: Bergstra et al.
// 2011; Ozaki et al. 2020, 2022) over a discrete space, as ask/tell in
// rounds: the evaluated genomes are split into a good and a bad set by
// non-dominated front and hypervolume, a Parzen estimator (a weighted
// mixture of one kernel per genome, over all dimensions jointly) is fitted
// to each, and each proposal is the candidate drawn from the good density
// with the largest ratio good / bad. Pure: genomes in, genomes out.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "server/analysis/pareto.h"
#include "server/search/genome.h"

namespace frontier {

struct TpeOptions {
  size_t startup = 10;           // genomes of round 0, from the GenomeStream (a well-spread start)
  size_t batch = 1;              // genomes proposed per later round
  size_t max_evaluations = 100;  // at most this many genomes proposed in all
  size_t candidates = 64;        // draws from the good density per proposal
  double prior_weight = 1.0;     // weight of the prior kernel in each density
  uint64_t seed = 0;
};

// Round 0 proposes the first `startup` admissible genomes of a GenomeStream.
// Each later round is proposed once every genome of the previous round has
// been told, and proposes `batch` genomes from the model of every genome told
// so far (those proposed and any other told, such as the baseline):
//
// - Split: the good set holds the best min(ceil(n / 10), 25) of the n told
//   genomes: whole fronts of the non-dominated sort under constraint-
//   domination, and of the first front that does not fit whole, a greedy
//   hypervolume subset (reference: 1.1 x its worst point in each objective);
//   infeasible members of that front by genome order. The rest is bad.
//   Where the greedy subset's hypervolumes would take more than
//   kMaxHypervolumeSteps in all (many objectives), the members of that front
//   with the largest crowding distance instead.
// - Weights: a good feasible genome weighs its exclusive hypervolume
//   contribution within the good set (divided by the largest; reference as
//   above; 1 each where those hypervolumes would take more than
//   kMaxHypervolumeSteps), an infeasible one 1e-12; bad genomes weigh 1
//   each. Each density adds a prior kernel of weight prior_weight.
// - Kernels, per dimension. Ordinal: a Gaussian on the level index centred
//   on the genome's level, its mass on each level's cell [i - 1/2, i + 1/2]
//   normalized over [-1/2, levels - 1/2]; the bandwidth is Scott's rule
//   0.1 x m^(-1 / (d + 4)) x levels for m kernels and d dimensions with 2 or
//   more levels, clipped to [levels / min(100, m + 1), levels]; the prior
//   kernel is centred with bandwidth `levels`. Categorical: the genome's
//   level gets 1 + p and every level p = prior_weight / ((m + 1) x levels),
//   normalized, so a draw keeps the genome's level with probability
//   1 / (1 + prior_weight / (m + 1)) (Optuna's p omits the division by
//   levels: with 21 levels a draw then keeps a level about a third of the
//   time, and in 30 dimensions draws from the good density are nearly
//   uniform); the prior kernel is uniform. A genome's density is the
//   weighted mixture of the products of its dimensions' kernels.
// - Proposal: `candidates` genomes are drawn from the good density (a kernel
//   by weight, then each dimension from it), and the one with the largest
//   log good - log bad that is new (never proposed or told, admissible, not
//   already in the round) is proposed; when no candidate is new another
//   draw of `candidates` follows (up to 8), then the GenomeStream fills in.
//   Within a round, the proposals made so far join the bad density (a
//   constant liar), so a round spreads out. When nothing new is left the
//   search finishes.
//
// The model sees the told genomes in genome order and the random draws
// follow the rounds, so Ask's answers depend only on the set of genomes told,
// not on the order of the Tells: replaying a history rebuilds the same state.
class Tpe {
 public:
  // `admissible`: whether a genome may be proposed (asked once per genome).
  // Throws std::invalid_argument for startup, batch or candidates of 0, or
  // genes a GenomeStream rejects.
  Tpe(std::vector<GeneSpec> genes, TpeOptions options, std::function<bool(const Genome&)> admissible);

  // The next round, all at once; empty while a genome of the current round
  // is untold, and once finished.
  std::vector<Genome> Ask();
  // The fitness of a genome Ask proposed, or of another evaluated genome
  // that joins the model (the baseline). A genome told twice keeps its first
  // fitness.
  void Tell(const Genome& genome, const Fitness& fitness);
  // True when Ask will never propose anything again.
  bool Finished() const;

  size_t rounds() const { return rounds_; }  // rounds proposed so far
  size_t proposed() const { return proposed_.size(); }

 private:
  size_t Budget() const;
  bool Admissible(const Genome& genome);
  bool Fresh(const Genome& genome, const std::vector<Genome>& round);
  std::vector<Genome> FromStream(size_t count, std::vector<Genome> round);
  std::vector<Genome> FromModel(size_t count);

  std::vector<GeneSpec> genes_;
  TpeOptions options_;
  std::function<bool(const Genome&)> admissible_;
  Rng rng_;
  GenomeStream stream_;
  std::map<Genome, bool> admissible_cache_;
  std::set<Genome> proposed_;
  std::map<Genome, Fitness> told_;  // in genome order: the model's input order
  std::set<Genome> untold_;         // proposed in the current round, not told yet
  size_t rounds_ = 0;
  bool exhausted_ = false;  // the space holds no new admissible genome
};

}  // namespace frontier
