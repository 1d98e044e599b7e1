// The `strategy` section (the fields each strategy takes, ASHA's rungs, an
// external proposer's settings) and `screen`, speed-first screening
// (docs/strategies.md#screening).
#include "search_spaces/space_parser.h"

#include <algorithm>
#include <limits>
#include <map>

#include "search_spaces/metric_catalog.h"

namespace frontier::space_reading {
namespace {

// The fields each strategy takes, besides its name.
const std::map<std::string, std::vector<std::string>>& StrategyFields() {
  static const std::map<std::string, std::vector<std::string>> fields = {
      {"grid", {}},
      {"random", {"trials", "seed"}},
      {"sobol", {"trials", "seed"}},
      {"nsga2", {"trials", "seed", "population", "generations"}},
      {"tpe", {"trials", "seed"}},
      {"asha", {"proposer", "min_steps", "eta", "trials", "seed", "population", "generations"}},
      {"ablation", {"cumulative", "metric"}},
      {"external",
       {"address", "batch", "trials", "seed", "deadline_s", "max_invalid", "token_file", "tls_ca", "tls_cert",
        "tls_key"}}};
  return fields;
}

}  // namespace

// `screen: {steps, margin, noise, in_trial}` (docs/search-space.md, docs/strategies.md#screening).
void SpaceParser::ParseScreen(const YAML::Node& node, SearchSpace& space) const {
  Fields fields(*this, node, "screen", {"steps", "margin", "noise", "in_trial"});
  fields.Required("steps");
  if (space.base.contains("command")) {
    Fail("screen", "a command trial cannot be screened: screening times frontier-trial's networks for a few steps");
  }
  const TaskSpec task = ParseTrialSpec(space.base).task;
  ScreenSpec& screen = space.screen;
  fields.Integer("steps", screen.steps, 2, std::max(2, task.steps - 1));
  if (screen.steps >= task.steps) {
    Fail(fields.Field("steps"), "must be fewer than task.steps (" + std::to_string(task.steps) +
                                    "): screening is cheaper than a trial or it saves nothing");
  }
  if (std::optional<double> margin = fields.Number("margin")) {
    if (!(*margin > 0 && *margin < 1)) Fail(fields.Field("margin"), "must be in (0, 1)");
    screen.margin = *margin;
  }
  if (std::optional<double> noise = fields.Number("noise")) {
    if (!(*noise >= 0 && *noise < 1)) Fail(fields.Field("noise"), "must be in [0, 1)");
    screen.noise = *noise;
  }
  if (fields.Has("in_trial")) {
    fields.Bool("in_trial", screen.in_trial);
    if (screen.in_trial && space.strategy.name != "asha") {
      Fail(fields.Field("in_trial"),
           "screening inside the trials needs strategy asha, whose trials report their "
           "step times as they run; strategy " +
               space.strategy.name + " screens with screening trials first (leave in_trial out)");
    }
    if (screen.in_trial && screen.steps > space.strategy.min_steps) {
      Fail(fields.Field("steps"),
           "inside the trials screening must judge a configuration before ASHA's first rung (" +
               std::to_string(space.strategy.min_steps) + " steps), not at " + std::to_string(screen.steps));
    }
    if (screen.in_trial) return;  // nothing is enumerated: the strategy proposes as without screening
  }
  if (GridSize(space) > kMaxScreenedConfigs) {
    Fail("screen",
         GridSizeText(GridSize(space)) + ", more than " + std::to_string(kMaxScreenedConfigs) +
             ": screening runs one trial per configuration, so every one is enumerated and timed first");
  }
}

void SpaceParser::ParseStrategy(const YAML::Node& node, SearchSpace& space) const {
  const std::vector<std::string> names = {"grid", "random", "sobol", "nsga2", "tpe", "asha", "ablation", "external"};
  StrategySpec& strategy = space.strategy;
  if (node.IsMap() && node["name"]) {
    const json name = YamlToJson(node["name"]);
    if (!name.is_string()) Fail("strategy.name", "expected a string, got " + Describe(name));
    strategy.name = name.get<std::string>();
    if (std::find(names.begin(), names.end(), strategy.name) == names.end()) {
      Fail("strategy.name", "unknown choice '" + strategy.name + "'; expected one of " + Join(names));
    }
  }
  std::vector<std::string> known = {"name"};
  for (const std::string& field : StrategyFields().at(strategy.name)) known.push_back(field);
  if (node.IsMap()) {
    // A field of another strategy says which strategies take it; any other is unknown.
    for (const auto& entry : node) {
      const std::string& key = entry.first.Scalar();
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::vector<std::string> takers;
      for (const auto& [name, fields] : StrategyFields()) {
        if (std::find(fields.begin(), fields.end(), key) != fields.end()) takers.push_back(name);
      }
      if (!takers.empty()) {
        Fail("strategy." + key,
             "applies to strateg" + std::string(takers.size() == 1 ? "y " : "ies ") + Join(takers) + " only");
      }
    }
  }
  Fields fields(*this, node, "strategy", known);
  fields.Integer("trials", strategy.trials, 0, std::numeric_limits<int>::max());
  fields.Integer("seed", strategy.seed, std::numeric_limits<int64_t>::min(),
                 std::numeric_limits<int64_t>::max());
  fields.Integer("population", strategy.population, 2, 100000);
  fields.Integer("generations", strategy.generations, 1, 100000);
  fields.Choice("proposer", strategy.proposer, {"random", "sobol", "nsga2"});
  if (fields.Has("cumulative")) {
    const json cumulative = fields.Value("cumulative");
    if (!cumulative.is_boolean())
      Fail(fields.Field("cumulative"), "expected true or false, got " + Describe(cumulative));
    strategy.cumulative = cumulative.get<bool>();
  }
  if (fields.Has("metric")) {
    fields.String("metric", strategy.metric);
    if (!strategy.cumulative) Fail(fields.Field("metric"), "applies to a cumulative ablation only");
    const bool is_objective = std::any_of(space.objectives.begin(), space.objectives.end(),
                                          [&](const Objective& o) { return o.metric == strategy.metric; });
    if (!is_objective) Fail(fields.Field("metric"), "'" + strategy.metric + "' is not one of the objectives");
  }
  if (strategy.name == "external") {
    // A proposer outside the coordinator (docs/proposers.md); its settings
    // go to strategy.options for MakeStrategy and server/proposer/.
    fields.Required("address");
    std::string address;
    fields.String("address", address);
    const size_t colon = address.rfind(':');
    if (address.empty() || colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
      Fail(fields.Field("address"), "expected HOST:PORT of a Proposer service, got '" + address + "'");
    }
    int batch = 4, max_invalid = 3;
    fields.Integer("batch", batch, 1, 1000);
    fields.Integer("max_invalid", max_invalid, 1, 1000);
    double deadline_s = 30;
    if (const std::optional<double> d = fields.Number("deadline_s")) {
      if (!(*d > 0 && *d <= 3600)) Fail(fields.Field("deadline_s"), "must be in (0, 3600] seconds");
      deadline_s = *d;
    }
    json options = {{"address", address}, {"batch", batch}, {"max_invalid", max_invalid}, {"deadline_s", deadline_s}};
    for (const char* key : {"token_file", "tls_ca", "tls_cert", "tls_key"}) {
      std::string value;
      fields.String(key, value);
      if (fields.Has(key)) options[key] = value;
    }
    if (options.contains("tls_cert") != options.contains("tls_key")) {
      Fail(fields.Field(options.contains("tls_cert") ? "tls_cert" : "tls_key"), "tls_cert and tls_key go together");
    }
    strategy.options = std::move(options);
    return;
  }
  if (strategy.name != "asha") return;
  for (const char* key : {"population", "generations"}) {
    if (fields.Has(key) && strategy.proposer != "nsga2")
      Fail(fields.Field(key), "applies to proposer nsga2 only");
  }
  // ASHA compares trials at evaluations: every rung must be an evaluation step.
  const TaskSpec task = ParseTrialSpec(space.base).task;
  if (task.eval_every <= 0)
    Fail("task.eval_every", "strategy asha needs evaluations during training (eval_every > 0)");
  strategy.min_steps = task.eval_every;
  fields.Integer("min_steps", strategy.min_steps, 1, std::numeric_limits<int>::max());
  fields.Integer("eta", strategy.eta, 2, 1000);
  if (strategy.min_steps % task.eval_every != 0) {
    Fail(fields.Field("min_steps"), "must be a multiple of task.eval_every (" +
                                        std::to_string(task.eval_every) +
                                        ") so that every rung is an evaluation");
  }
  if (strategy.min_steps >= task.steps) {
    Fail(fields.Field("min_steps"), "must be below task.steps (" + std::to_string(task.steps) + ")");
  }
  const std::vector<std::string> measured =
      MetricNames([](const MetricInfo& m) { return m.in_progress && m.selectable; });
  const bool comparable =
      std::any_of(space.objectives.begin(), space.objectives.end(), [&](const Objective& o) {
        return std::find(measured.begin(), measured.end(), o.metric) != measured.end();
      });
  if (!comparable) {
    Fail("objectives", "strategy asha compares trials during training, on " + Join(measured) +
                           "; name at least one of them as an objective");
  }
}

// What a strategy proposes at once becomes trials at once (the lists of
// grid, random and sobol when the experiment is submitted, an NSGA-II
// generation, an ablation round), each seed a trial built up front: their
// number is bounded here, before anything is built.
void SpaceParser::CheckProposedAtOnce(const SearchSpace& space) const {
  const StrategySpec& strategy = space.strategy;
  const bool asha = strategy.name == "asha";
  const std::string proposer = asha ? strategy.proposer : strategy.name;
  const std::string who = asha ? "asha's proposer " + proposer : "strategy " + proposer;
  const std::string bound = std::to_string(kMaxListedConfigs);
  const size_t grid = GridSize(space);
  const std::string grid_has = GridSizeText(grid);
  const size_t trials = static_cast<size_t>(strategy.trials);
  size_t at_once = 0;
  if (proposer == "grid" || proposer == "random" || proposer == "sobol") {
    if (proposer == "grid" && grid > kMaxListedConfigs) {
      Fail("space", grid_has + ", more than " + bound + "; use strategy sobol with trials, nsga2 or tpe");
    }
    if (proposer == "random" && grid > kMaxListedConfigs) {
      Fail("strategy", who + " shuffles every configuration of the grid, and " + grid_has + ", more than " +
                           bound + "; use proposer sobol with trials");
    }
    at_once = proposer != "grid" && trials > 0 ? std::min(trials, grid) : grid;
    if (at_once > kMaxListedConfigs) {
      if (trials > 0) {
        Fail("strategy.trials", "must be at most " + bound + ": " + who +
                                    " lists every configuration it runs when the experiment is submitted");
      }
      Fail("strategy", grid_has + ", more than " + bound + ", and " + who +
                           " without trials lists every one when the experiment is submitted; set trials");
    }
  } else if (proposer == "nsga2") {
    at_once = std::min(static_cast<size_t>(strategy.population), grid);
    if (trials > 0) at_once = std::min(at_once, trials);
  } else if (proposer == "ablation") {
    for (const Dimension& dim : space.dimensions) at_once += dim.choices.size();
  } else {
    return;  // tpe and external propose a few at a time
  }
  // ASHA starts a configuration's later seeds once its first passed the first rung.
  const size_t seeds = asha ? 1 : static_cast<size_t>(space.repeats);
  if (at_once * seeds > kMaxTrialsAtSubmit) {
    Fail("repeats", who + " proposes " + std::to_string(at_once) + " configurations at once, x " +
                        std::to_string(seeds) + " seeds: " + std::to_string(at_once * seeds) +
                        " trials, more than " + std::to_string(kMaxTrialsAtSubmit));
  }
}

}  // namespace frontier::space_reading
