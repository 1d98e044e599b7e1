// The `space` section: dimension names (shorthands or field paths) expanded
// into the trial-spec fields they write, each choice checked alone against
// the baseline, overlaps refused; and configurations applied to the baseline
// (ApplyConfig, MakeTrialSpec, WhyInvalid, IsBaseline, IsOpDimension).
#include "search_spaces/space_parser.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace frontier {
namespace space_reading {
namespace {

// Shorthand dimension names and the paths they stand for.
const std::map<std::string, std::string>& Shorthands() {
  static const std::map<std::string, std::string> shorthands = {
      {"attention", "arch.stages[*].attention.kind"},
      {"block", "arch.stages[*].block"},
      {"kernel", "arch.stages[*].kernel"},
      {"depth", "arch.stages[*].depth"},
      {"stem", "arch.stem.kind"},
      {"norm", "arch.norm"},
      {"activation", "arch.activation"},
      {"width_mult", "arch.width_mult"},
      {"depth_mult", "arch.depth_mult"},
      {"precision", "runtime.precision"},
      {"memory_format", "runtime.memory_format"},
      {"ops.bev_pool", "arch.bev.pooling"}};
  return shorthands;
}

template <typename Map>
std::vector<std::string> Keys(const Map& map) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : map) keys.push_back(key);
  return keys;
}

// One step of a field path: `key`, `key[N]` or `key[*]`.
struct PathStep {
  std::string key;
  enum Index { kNone = -1, kEvery = -2 };
  int index = kNone;
};

std::optional<std::vector<PathStep>> SplitPath(const std::string& path) {
  static const std::regex kStep("([A-Za-z_][A-Za-z0-9_]*)(\\[([0-9]{1,6}|\\*)\\])?");
  if (path.size() > kMaxKeyBytes) return std::nullopt;
  std::vector<PathStep> steps;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '.')) {
    std::smatch m;
    if (!std::regex_match(part, m, kStep)) return std::nullopt;
    PathStep step{m[1].str()};
    if (m[2].matched) step.index = m[3].str() == "*" ? PathStep::kEvery : std::stoi(m[3].str());
    steps.push_back(step);
  }
  if (steps.empty() || path.back() == '.') return std::nullopt;
  return steps;
}

// The trial-spec field a concrete path names, creating missing objects on
// the way (a baseline need not spell out defaulted objects).
json& FieldAt(json& spec, const std::vector<PathStep>& steps) {
  json* node = &spec;
  for (const PathStep& step : steps) {
    if (!node->is_object()) *node = json::object();
    node = &(*node)[step.key];
    if (step.index >= 0) node = &node->at(step.index);
  }
  return *node;
}

// The part of the spec a choice at `path` writes: the field, or for an
// object choice on a `kind`, the object that holds the kind.
std::string Target(const std::string& path, const json& choice) {
  const std::string kind = ".kind";
  if (choice.is_object() && path.size() > kind.size() &&
      path.compare(path.size() - kind.size(), kind.size(), kind) == 0) {
    return path.substr(0, path.size() - kind.size());
  }
  return path;
}

// Sets one concrete path to a choice: an object choice merges into its
// target (RFC 7386 merge patch), any other choice replaces the field.
void SetField(json& spec, const std::string& path, const json& choice) {
  json& field = FieldAt(spec, *SplitPath(Target(path, choice)));
  if (choice.is_object()) {
    field.merge_patch(choice);
  } else {
    field = choice;
  }
}

// `inner` is `outer` or a field inside it.
bool Within(const std::string& inner, const std::string& outer) {
  return inner == outer || StartsWith(inner, outer + ".") || StartsWith(inner, outer + "[");
}

json NormalizedBaseline(const SearchSpace& space) { return ToJson(ParseTrialSpec(space.base)); }

}  // namespace

void SpaceParser::ParseDimensions(const YAML::Node& node, SearchSpace& space) const {
  if (!node.IsMap()) {
    Fail("space", "expected a mapping of dimension: [choices], got " + Describe(YamlToJson(node)));
  }
  const json normalized = NormalizedBaseline(space);
  for (const auto& entry : node) {
    Dimension dim;
    dim.name = entry.first.Scalar();
    const std::string field = ChildPath("space", dim.name);
    const YAML::Node& list = entry.second;
    if (!list.IsSequence()) Fail(field, "expected a list of choices, got " + Describe(YamlToJson(list)));
    if (list.size() == 0) Fail(field, "needs at least one choice");
    dim.paths = ExpandPath(field, dim.name, normalized);
    std::set<json> seen;
    for (size_t i = 0; i < list.size(); ++i) {
      json choice = YamlToJson(list[i]);
      if (!seen.insert(choice).second) {
        FailAt(ElementPath(field, i), field, "duplicate choice '" + Show(choice) + "'");
      }
      if (choice.is_string() && StartsWith(choice.get<std::string>(), kLabChoicePrefix)) {
        choice = LabChoice(ElementPath(field, i), field, dim, choice.get<std::string>(), space);
      }
      dim.choices.push_back(std::move(choice));
    }
    if (check_choices_) CheckChoices(space, dim);
    space.dimensions.push_back(dim);
  }
  CheckOverlaps(space);
}

// The concrete trial-spec paths a dimension name stands for, checked against
// the baseline with every default filled in (so every field of the trial spec
// is addressable, and `[*]` spans the baseline's list).
std::vector<std::string> SpaceParser::ExpandPath(const std::string& field, const std::string& name,
                                                 const json& normalized) const {
  auto shorthand = Shorthands().find(name);
  std::string full = shorthand != Shorthands().end() ? shorthand->second : name;
  std::optional<std::vector<PathStep>> steps = SplitPath(full);
  if (!steps) {
    Fail(field, "not a dimension: expected a shorthand (" + Join(Keys(Shorthands())) +
                    ") or a field path like stages[1].attention.kind");
  }
  const std::string& first = steps->front().key;
  if (normalized.contains("command")) {  // a command trial varies its params (and task/runtime fields)
    if (first != "params" && first != "runtime" && first != "task") {
      Fail(field, "a trial command's dimensions are params.NAME (or task./runtime. fields); '" + name +
                      "' names a field of frontier-trial's networks");
    }
  } else if (first != "arch" && first != "runtime" && first != "task") {
    steps->insert(steps->begin(), PathStep{"arch"});
  }

  std::vector<std::pair<std::string, const json*>> partial = {{"", &normalized}};
  for (const PathStep& step : *steps) {
    std::vector<std::pair<std::string, const json*>> next;
    for (const auto& [path, node] : partial) {
      if (!node->is_object()) Fail(field, path + " has no fields");
      if (!node->contains(step.key)) {
        std::string where = path.empty() ? "the trial spec" : path;
        std::vector<std::string> keys;
        for (auto item = node->begin(); item != node->end(); ++item) keys.push_back(item.key());
        Fail(field, "unknown field '" + step.key + "' in " + where + "; expected one of " + Join(keys));
      }
      std::string child = ChildPath(path, step.key);
      const json& value = (*node)[step.key];
      if (step.index == PathStep::kNone) {
        next.emplace_back(child, &value);
        continue;
      }
      if (!value.is_array()) Fail(field, child + " is not a list");
      if (step.index >= static_cast<int>(value.size())) {
        Fail(field, "index " + std::to_string(step.index) + " is out of range: " + child + " has " +
                        std::to_string(value.size()) + " entries");
      }
      size_t begin = step.index == PathStep::kEvery ? 0 : step.index;
      size_t end = step.index == PathStep::kEvery ? value.size() : begin + 1;
      for (size_t i = begin; i < end; ++i) next.emplace_back(ElementPath(child, i), &value[i]);
    }
    partial = std::move(next);
  }
  std::vector<std::string> paths;
  for (const auto& [path, node] : partial) paths.push_back(path);
  return paths;
}

// Applies each choice alone to the baseline: a trial-spec error inside the
// part the choice writes means the choice itself is wrong. Errors elsewhere
// are combinations (the coordinator filters those with WhyInvalid).
void SpaceParser::CheckChoices(const SearchSpace& space, const Dimension& dim) const {
  const std::string field = ChildPath("space", dim.name);
  json normalized = NormalizedBaseline(space);
  for (size_t i = 0; i < dim.choices.size(); ++i) {
    const json& choice = dim.choices[i];
    // A program's parameter keeps the type of its baseline value (numbers of any kind are one type).
    for (const std::string& path : dim.paths) {
      if (!StartsWith(path, "params.")) continue;
      const json& base_value = FieldAt(normalized, *SplitPath(path));
      const auto kind = [](const json& v) { return v.is_number() ? std::string("number") : std::string(v.type_name()); };
      if (!base_value.is_null() && kind(choice) != kind(base_value)) {
        FailAt(ElementPath(field, i), field,
               "'" + Show(choice) + "' is a " + kind(choice) + "; the baseline's " + path + " (" + Show(base_value) +
                   ") is a " + kind(base_value));
      }
    }
    json spec = space.base;
    for (const std::string& path : dim.paths) SetField(spec, path, choice);
    try {
      ParseTrialSpec(spec);
    } catch (const SpecError& e) {
      for (const std::string& path : dim.paths) {
        if (e.path() == path) FailAt(ElementPath(field, i), field, Problem(e));
        if (Within(e.path(), Target(path, choice))) FailAt(ElementPath(field, i), field, e.what());
      }
    }
  }
}

// Two dimensions writing the same field (or one inside the other's) would
// make a configuration's meaning depend on their order.
void SpaceParser::CheckOverlaps(const SearchSpace& space) const {
  std::vector<std::pair<std::string, std::string>> written;  // (target, dimension)
  for (const Dimension& dim : space.dimensions) {
    std::set<std::string> targets;
    for (const std::string& path : dim.paths) {
      for (const json& choice : dim.choices) targets.insert(Target(path, choice));
    }
    for (const std::string& target : targets) {
      for (const auto& [other_target, other] : written) {
        if (Within(target, other_target) || Within(other_target, target)) {
          Fail(ChildPath("space", dim.name),
               "overlaps dimension '" + other + "' (both set " + std::min(target, other_target) + ")");
        }
      }
    }
    for (const std::string& target : targets) written.emplace_back(target, dim.name);
  }
}

namespace {

const Dimension& DimensionOf(const SearchSpace& space, const std::string& name, const json& choice) {
  for (const Dimension& dim : space.dimensions) {
    if (dim.name != name) continue;
    if (std::find(dim.choices.begin(), dim.choices.end(), choice) == dim.choices.end()) {
      std::vector<std::string> shown;
      for (const json& c : dim.choices) shown.push_back(Show(c));
      throw SpaceError(space.source, 0, "config." + name,
                       "'" + Show(choice) + "' is not one of its choices (" + Join(shown) + ")");
    }
    return dim;
  }
  std::vector<std::string> names;
  for (const Dimension& dim : space.dimensions) names.push_back(dim.name);
  throw SpaceError(space.source, 0, "config." + name,
                   "not a dimension of this space" + (names.empty() ? "" : " (" + Join(names) + ")"));
}

// Applies a configuration to `spec` (the baseline as written, or normalized).
json Apply(const SearchSpace& space, const Config& config, json spec) {
  if (!config.is_object()) {
    throw SpaceError(space.source, 0, "config",
                     "expected an object {dimension: choice}, got " + Describe(config));
  }
  for (auto it = config.begin(); it != config.end(); ++it) {
    for (const std::string& path : DimensionOf(space, it.key(), it.value()).paths) {
      SetField(spec, path, it.value());
    }
  }
  return spec;
}

}  // namespace
}  // namespace space_reading

namespace {

using nlohmann::json;
using space_reading::Apply;
using space_reading::NormalizedBaseline;
using space_reading::StartsWith;

}  // namespace

json ApplyConfig(const SearchSpace& space, const Config& config) { return Apply(space, config, space.base); }

TrialSpec MakeTrialSpec(const SearchSpace& space, const Config& config, int64_t seed,
                        const std::string& trial_id) {
  json spec = ApplyConfig(space, config);
  spec["seed"] = seed;
  spec["trial_id"] = trial_id;
  return ParseTrialSpec(spec);
}

std::optional<std::string> WhyInvalid(const SearchSpace& space, const Config& config) {
  try {
    ParseTrialSpec(ApplyConfig(space, config));
  } catch (const SpecError& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

bool IsOpDimension(const Dimension& dimension) {
  return std::any_of(dimension.paths.begin(), dimension.paths.end(), [](const std::string& path) {
    return StartsWith(path, "arch.ops.") || path == "arch.bev.pooling";
  });
}

bool IsBaseline(const SearchSpace& space, const Config& config) {
  json normalized = NormalizedBaseline(space);
  return Apply(space, config, normalized) == normalized;
}

}  // namespace frontier
