// Search-space files (YAML): a baseline trial, the dimensions to vary, the
// objectives, constraints, repeats, parity rule and strategy. Torch-free.
// Format: docs/search-space.md. Parsing validates everything that can be
// checked without running a trial, including every configuration's trial spec
// (through ParseTrialSpec), so a worker never sees an invalid spec.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"

namespace frontier {

// An invalid search-space file. what() reads "<file>:<line>: <field>: <problem>"
// (the line is omitted when unknown).
class SpaceError : public std::runtime_error {
 public:
  SpaceError(const std::string& file, int line, const std::string& field, const std::string& problem);
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::string& field() const { return field_; }

 private:
  std::string file_;
  int line_;
  std::string field_;
};

struct Objective {
  std::string metric;  // a result metric, e.g. val_accuracy, throughput, mfu, peak_memory_mb, params
  bool maximize = true;
};

struct Constraint {
  std::string metric;
  std::optional<double> min, max;
};

// One dimension to vary. `name` is as written in the file (a path like
// "stages[*].block" or "runtime.precision", or a shorthand like "attention");
// `paths` are the concrete trial-spec fields it sets, e.g.
// {"arch.stages[0].block", "arch.stages[1].block"}.
struct Dimension {
  std::string name;
  std::vector<std::string> paths;
  std::vector<nlohmann::json> choices;
};

// Whether the dimension chooses an op's variant (docs/plugins.md): a path
// under arch.ops (ops.attention_kernel) or arch.bev.pooling (ops.bev_pool).
// Reports of such a space show op_speedup and op_bandwidth_share.
bool IsOpDimension(const Dimension& dimension);

struct ParityRule {
  std::string metric = "val_accuracy";
  double margin = 0.005;
  // paired (default): differences per seed, seed k of every config sharing
  // the data order and, where shapes allow, the initialization; Welch
  // (unpaired) when the seeds completed differ. welch: always unpaired.
  std::string test = "paired";
  // The looks a verdict may take: 1, or with adaptive seeds one per seed
  // count from repeats.min to repeats.max; alpha is split over them
  // (SequentialOneSidedQuantile in server/analysis/parity.h).
  int looks = 1;
};

// How configurations are chosen (docs/strategies.md). Each field applies to
// the strategies named in its comment; the parser rejects it elsewhere.
struct StrategySpec {
  std::string name = "grid";        // grid | random | sobol | nsga2 | tpe | asha | ablation
  int trials = 0;                   // random, sobol, nsga2, tpe, asha: at most this many configs (0 = all;
                                    //   nsga2: population x generations)
  int64_t seed = 0;                 // random, sobol, nsga2, tpe, asha: the seed of every draw
  int population = 16;              // nsga2 (and asha over nsga2): parents, and children per generation
  int generations = 10;             // nsga2 (and asha over nsga2): generations, the initial one included
  std::string proposer = "random";  // asha: what proposes the configs it stops early: random | sobol | nsga2
  int min_steps = 0;                // asha: the first rung, a multiple of task.eval_every (set by the parser)
  int eta = 3;                      // asha: reduction factor (>= 2)
  bool cumulative = false;          // ablation: after the one-factor round, keep the best change and go on
  std::string metric;               // ablation, cumulative: the objective that picks the best change
                                    //   (empty = the first objective)
  nlohmann::json options = nlohmann::json::object();  // strategy-specific extras, kept verbatim
};

// Speed-first screening (`screen: {steps, margin, noise}`, docs/strategies.md#screening):
// before the strategy runs, every configuration of the grid and the baseline
// is timed for `steps` steps (one seed, speed only), and the configurations
// that cannot reach the front on the speed objectives or break a constraint
// on a screened metric are never run (server/search/screen.h).
struct ScreenSpec {
  int steps = 0;         // 0: no screening
  double margin = 0.9;   // dropped when worse than the baseline by more than this on every speed objective
  double noise = 0.05;   // relative measurement noise allowed on constraints and objectives
  // Strategy asha only: no screening trials; each configuration is screened
  // inside its first seed's trial, on the step times it reports by step N
  // (server/search/strategy.h, EarlyStopping).
  bool in_trial = false;
  bool enabled() const { return steps > 0; }
  // Screening trials first (server/search/screen.h): screening, not inside the trials.
  bool by_trials() const { return enabled() && !in_trial; }
};

// How a screening trial is recognized wherever trials are read (the
// scheduler, the report, the store's SQL views): its proposer, stored with it
// at creation (TrialRow::proposer); and the state it ends in once it ran
// (completed, diverged, or failed for good: then with its error), never
// counted as completed or failed.
inline constexpr const char* kScreenProposer = "frontier screen";
// A choice `lab:DIR` of an op dimension names a kernel lab's kept variant
// (docs/kernel-lab.md): DIR/manifest.json and its plugin.
inline constexpr const char* kLabChoicePrefix = "lab:";
// How a screened-out configuration's reason begins, wherever it is written
// (a skipped proposal, a trial stopped inside ASHA) and read (the report).
inline constexpr std::string_view kScreenedOut = "screened out: ";
inline constexpr const char* kScreenedState = "screened";

// The most configurations a space with `screen` may have: it runs one
// screening trial per configuration, so the candidate set must be enumerated.
inline constexpr size_t kMaxScreenedConfigs = 10000;
// What a space may make the coordinator build at once. The strategies that
// list their configurations when the experiment is created (grid: every one;
// random: the whole grid, shuffled; sobol: `trials` of them, 0 = the grid;
// asha over random or sobol the same) list at most kMaxListedConfigs; what a
// strategy proposes at once (those lists, an NSGA-II generation, an ablation
// round) becomes at most kMaxTrialsAtSubmit trials (configurations x their
// first seeds). The parser refuses a space beyond either.
inline constexpr size_t kMaxListedConfigs = 100000;
inline constexpr size_t kMaxTrialsAtSubmit = 1000000;

// A configuration: {dimension name: choice}; a dimension left out keeps the
// baseline's value, so {} is the baseline itself.
using Config = nlohmann::json;

struct SearchSpace {
  std::string name;
  std::string description;
  std::string source;     // file name used in messages
  nlohmann::json base;    // the baseline trial spec JSON: {"schema", "task", "arch", "runtime"}
  std::vector<Dimension> dimensions;
  std::vector<Objective> objectives;
  std::vector<Constraint> constraints;
  int repeats = 1;        // seeds per configuration, the baseline included; seeds are 1..repeats
  // Adaptive seeds (`repeats: {min, max}`): up to max_repeats seeds for a
  // configuration whose parity verdict is still inconclusive after `repeats`
  // (= min) and which is on the front or could reach it (docs/search-space.md).
  // Equal to `repeats` for a plain integer.
  int max_repeats = 1;
  bool AdaptiveSeeds() const { return max_repeats > repeats; }
  ParityRule parity;
  StrategySpec strategy;
  ScreenSpec screen;
  int max_attempts = 3;   // leases per trial before it fails for good
  bool retry_timeouts = false;  // a timed-out attempt runs again too (server/scheduler/retry_policy.h)
  // Inference latency depends on the configuration, not the seed: measured on
  // seed 1 of each configuration only, unless the space's `latency` section
  // says `seeds: all` (then on every seed, for its spread).
  bool latency_every_seed = false;
  // Profiling too (docs/profiling.md): the profile section's steps run on seed
  // 1 of each configuration, later seeds are not profiled, unless `profile:
  // {seeds: all}`.
  bool profile_every_seed = false;
};

// Direction of a metric (a parity metric, an objective): an objective's goal
// when the space has one on that metric, else the catalog's direction, else
// lower is better exactly for losses (a name ending in "_loss").
bool LowerIsBetter(const std::string& metric, const std::vector<Objective>& objectives);

// The bounds of a search-space file (docs/hardening.md), besides
// kMaxNesting (input_bounds.h): its size, and with every alias expanded, its
// values and the bytes of its text; the length of one key.
inline constexpr size_t kMaxSpaceBytes = size_t{1} << 20;
inline constexpr size_t kMaxSpaceNodes = 100000;
inline constexpr size_t kMaxKeyBytes = 256;

// Parses and validates YAML text; `source` names the file in messages.
// Text out of bounds (size, NUL or invalid UTF-8, nesting, aliases, a number
// out of range) is refused before any other check. Throws SpaceError.
SearchSpace ParseSearchSpace(const std::string& yaml_text, const std::string& source);
// The text of a search-space file of at most kMaxSpaceBytes (a larger one is
// not read to its end). Throws SpaceError.
std::string ReadSearchSpaceFile(const std::string& path);
SearchSpace LoadSearchSpaceFile(const std::string& path);
// A space accepted at submission, read back from the store: parsed the same
// way but without building a trial spec for every choice again (it passed
// that check then), which dominates the parse of spaces with many choices.
SearchSpace ParseStoredSearchSpace(const std::string& yaml_text, const std::string& source);

// The baseline spec with the configuration's choices applied (JSON, no seed or
// trial id yet). Throws SpaceError for a dimension the space does not have,
// or a choice that dimension does not list.
nlohmann::json ApplyConfig(const SearchSpace& space, const Config& config);

// The full trial spec of a configuration at a seed. Throws SpecError when the
// combination is invalid (e.g. a window that does not divide the map).
TrialSpec MakeTrialSpec(const SearchSpace& space, const Config& config, int64_t seed, const std::string& trial_id);

// Why a configuration cannot run (the SpecError message), or nullopt when it can.
std::optional<std::string> WhyInvalid(const SearchSpace& space, const Config& config);

// Every configuration of the full grid in a fixed order (the first dimension
// varies slowest), the baseline's own values included where they are choices.
// Throws SpaceError when the grid has more than `limit` configurations.
std::vector<Config> EnumerateGrid(const SearchSpace& space, size_t limit = kMaxListedConfigs);

// Number of configurations of the full grid (may be large; saturates at SIZE_MAX).
size_t GridSize(const SearchSpace& space);

// A GridSize for people: "N", or, where it saturated, "at least 2^64" (the
// product no longer fits).
std::string GridCountText(size_t grid_size);
// "the grid has N configurations" (GridCountText).
std::string GridSizeText(size_t grid_size);

// Canonical text of a configuration (sorted keys), e.g.
// {"runtime.precision":"bf16","stem.kind":"patchify"}; "{}" for the baseline.
std::string ConfigKey(const Config& config);

// True when the configuration equals the baseline: no dimension set, or
// every set dimension at the baseline's value.
bool IsBaseline(const SearchSpace& space, const Config& config);

// What an experiment is judged by, stored with it at submission for SQL views
// and reports: {"objectives": [{"metric", "goal": "maximize"|"minimize"}],
// "constraints": [{"metric", "min": number|null, "max": number|null}],
// "parity": {"metric", "margin", "test"}}.
nlohmann::json GoalsJson(const SearchSpace& space);
// The space's name, objectives, constraints and parity rule from GoalsJson
// (the rest left empty): all a report needs, without parsing the YAML again.
// nullopt when `goals` lacks any of them (stores older than goals).
std::optional<SearchSpace> GoalsOnlySpace(const std::string& name, const nlohmann::json& goals);

}  // namespace frontier
