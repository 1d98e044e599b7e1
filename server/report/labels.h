// Short names for configurations: what differs from the baseline, e.g.
// "convnext · bf16 · attn=linear" (docs/report.md, "Labels"). Every renderer
// names configs this way; the CSV and JSON keep the full config key too.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"

namespace frontier {

// One dimension of the space as reports show it.
struct ReportDimension {
  std::string name;                     // as in the space file, e.g. "stages[1].attention.kind"
  std::string short_name;               // e.g. "attn", unique among the space's dimensions
  std::vector<nlohmann::json> choices;  // as listed
  nlohmann::json baseline_choice;       // the choice equal to the baseline's value; null when none is
  bool bare = false;                    // its choices name themselves ("convnext", "bf16"): no "name="
};

// A dimension where a config differs from the baseline.
struct ConfigChange {
  std::string dimension;   // ReportDimension::name (or the config's key for a space without dimensions)
  nlohmann::json choice;
  std::string text;        // "convnext", "attn=linear"
};

class ConfigLabeler {
 public:
  // A space without dimensions (one read back from goals only) labels each
  // entry of a config as "name=value".
  explicit ConfigLabeler(const SearchSpace& space);

  const std::vector<ReportDimension>& dimensions() const { return dimensions_; }
  // The dimensions where `config` differs from the baseline, in the space's
  // order; entries the space does not know are kept, as "name=value".
  std::vector<ConfigChange> Changes(const nlohmann::json& config) const;
  // Each dimension's choice in `config`, the baseline's where it is unset:
  // {dimension name: choice} (null for a dimension whose baseline value is not a choice).
  nlohmann::json EffectiveChoices(const nlohmann::json& config) const;

 private:
  std::string Text(const std::string& name, const nlohmann::json& choice) const;
  std::vector<ReportDimension> dimensions_;
  std::vector<std::string> ambiguous_;  // choice texts that more than one dimension lists
  // Per dimension (dimensions_' order): how many of its choices have each text, counted once here
  // rather than for every config labelled (a space may list thousands of choices).
  std::vector<std::map<std::string, int>> choice_texts_;
};

// The changes' texts joined by " · "; "baseline" when there is none.
std::string JoinLabel(const std::vector<ConfigChange>& changes);

// A choice as a short text: a string as is, a number as %g, an object by its
// "kind" (e.g. {"kind": "mhsa", "heads": 4} is "mhsa"), anything else as JSON.
std::string ChoiceText(const nlohmann::json& choice);

}  // namespace frontier
