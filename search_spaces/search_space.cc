#include "search_spaces/search_space.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "search_spaces/input_bounds.h"
#include "search_spaces/metric_catalog.h"

namespace frontier {
namespace {

using nlohmann::json;

constexpr size_t kMaxGridForGridStrategy = 100000;

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

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

template <typename Map>
std::vector<std::string> Keys(const Map& map) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : map) keys.push_back(key);
  return keys;
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// A choice or value as a user would write it: strings bare, the rest as JSON.
std::string Show(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

std::string Describe(const json& value) {
  if (value.is_null()) return "nothing";
  if (value.is_array()) return "a list";
  if (value.is_object()) return "a mapping";
  return "'" + Show(value) + "'";
}

std::string ChildPath(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string ElementPath(const std::string& parent, size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

// The message of a SpecError without its leading "<path>: ".
std::string Problem(const SpecError& e) {
  std::string what = e.what();
  return e.path().empty() ? what : what.substr(e.path().size() + 2);
}

bool IsQuoted(const YAML::Node& node) { return node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str"; }

bool IsIntegerText(const std::string& text) {
  static const std::regex kInt("[-+]?[0-9]+");
  return text.size() <= 64 && std::regex_match(text, kInt);
}

bool IsFloatText(const std::string& text) {
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  return text.size() <= 64 && std::regex_match(text, kFloat);
}

// YAML 1.2 core-schema typing of a plain scalar; quoted scalars stay strings.
// Numbers of more than 64 characters stay strings too (CheckTree refuses them).
json ScalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (IsQuoted(node)) return text;
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (IsIntegerText(text)) {
    errno = 0;
    long long value = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == 0) return static_cast<int64_t>(value);
  }
  if (IsFloatText(text)) return std::strtod(text.c_str(), nullptr);
  return text;
}

// Why a plain scalar that reads as a number cannot be one, or nullopt.
std::optional<std::string> NumberProblem(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (IsQuoted(node)) return std::nullopt;
  if (text.size() > 64) {
    if (text.find_first_not_of("0123456789+-.eE") != std::string::npos) return std::nullopt;
    return "number of " + std::to_string(text.size()) + " characters; at most 64";
  }
  if (IsIntegerText(text)) {
    errno = 0;
    std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE) return "integer " + text + " is out of range (at most 9223372036854775807 in magnitude)";
  } else if (IsFloatText(text) && !std::isfinite(std::strtod(text.c_str(), nullptr))) {
    return "number " + text + " is out of range";
  }
  return std::nullopt;
}

json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const YAML::Node& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& entry : node) out[entry.first.Scalar()] = YamlToJson(entry.second);
      return out;
    }
    default:
      return nullptr;
  }
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

// Parses one document; every error carries the file name and, where known,
// the line of the offending node.
class SpaceParser {
 public:
  SpaceParser(std::string source, bool check_choices)
      : source_(std::move(source)), check_choices_(check_choices) {}

  SearchSpace Parse(const std::string& text);

 private:
  // Reads the fields of one YAML mapping; unknown keys are errors.
  class Fields {
   public:
    Fields(const SpaceParser& parser, const YAML::Node& node, std::string path,
           std::vector<std::string> known)
        : parser_(parser), node_(node), path_(std::move(path)) {
      if (!node_.IsMap()) {
        parser_.Fail(
            path_, "expected a mapping with fields " + Join(known) + ", got " + Describe(YamlToJson(node_)));
      }
      for (const auto& entry : node_) {
        const std::string& key = entry.first.Scalar();
        if (std::find(known.begin(), known.end(), key) == known.end()) {
          parser_.Fail(Field(key), "unknown field; expected one of " + Join(known));
        }
      }
    }

    std::string Field(const std::string& key) const { return ChildPath(path_, key); }
    YAML::Node Get(const std::string& key) const { return node_[key]; }
    bool Has(const std::string& key) const { return static_cast<bool>(node_[key]); }

    YAML::Node Required(const std::string& key) const {
      if (!Has(key)) parser_.Fail(path_, "missing field '" + key + "'");
      return Get(key);
    }

    json Value(const std::string& key) const { return YamlToJson(Get(key)); }

    void String(const std::string& key, std::string& out) const {
      if (!Has(key)) return;
      json v = Value(key);
      if (!v.is_string()) parser_.Fail(Field(key), "expected a string, got " + Describe(v));
      out = v.get<std::string>();
    }

    void Choice(const std::string& key, std::string& out, const std::vector<std::string>& choices) const {
      String(key, out);
      if (Has(key) && std::find(choices.begin(), choices.end(), out) == choices.end()) {
        parser_.Fail(Field(key), "unknown choice '" + out + "'; expected one of " + Join(choices));
      }
    }

    template <typename Int>
    void Integer(const std::string& key, Int& out, int64_t min, int64_t max) const {
      if (!Has(key)) return;
      json v = Value(key);
      if (!v.is_number_integer()) parser_.Fail(Field(key), "expected an integer, got " + Describe(v));
      int64_t i = v.get<int64_t>();
      if (i < min || i > max) {
        parser_.Fail(Field(key), "must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                                     "], got " + std::to_string(i));
      }
      out = static_cast<Int>(i);
    }

    std::optional<double> Number(const std::string& key) const {
      if (!Has(key)) return std::nullopt;
      json v = Value(key);
      if (!v.is_number()) parser_.Fail(Field(key), "expected a number, got " + Describe(v));
      return v.get<double>();
    }

   private:
    const SpaceParser& parser_;
    const YAML::Node node_;
    std::string path_;
  };

  [[noreturn]] void Fail(const std::string& field, const std::string& problem) const {
    throw SpaceError(source_, LineOf(field), field, problem);
  }
  [[noreturn]] void FailAt(const std::string& located, const std::string& field,
                           const std::string& problem) const {
    throw SpaceError(source_, LineOf(located), field, problem);
  }

  // The line of a field, or of the nearest enclosing field the file spells
  // out; 0 when none.
  int LineOf(std::string path) const {
    while (!path.empty()) {
      if (int line = Locate(root_, path, 0); line > 0) return line;
      size_t cut = path.find_last_of(".[");
      if (cut == std::string::npos) break;
      path.resize(cut);
    }
    return 0;
  }
  // The 1-based line of the key or list element that `rest` (a field path as
  // ChildPath and ElementPath spell them) names below `node`; 0 when none.
  // Keys may contain dots (dimension names), so the longest matching key wins.
  static int Locate(const YAML::Node& node, std::string_view rest, int line);

  // What CheckTree has counted so far, every alias expanded.
  struct Budget {
    size_t nodes = 0;
    size_t bytes = 0;
  };
  void CheckTree(const YAML::Node& node, std::vector<YAML::Node>& enclosing, Budget& budget) const;
  void CheckKeys(const YAML::Node& node, const std::string& path) const;
  void ParseBaseline(const Fields& top, SearchSpace& space);
  void ParseCommandTrial(const Fields& top, const json& task, SearchSpace& space);
  std::string InSpaceFolder(const std::string& path) const;
  std::string LabChoice(const std::string& at, const std::string& field, const Dimension& dim,
                        const std::string& choice, SearchSpace& space) const;
  void CheckBaseline(const SearchSpace& space) const;
  void ParseDimensions(const YAML::Node& node, SearchSpace& space) const;
  std::vector<std::string> ExpandPath(const std::string& field, const std::string& name,
                                      const json& normalized) const;
  void CheckChoices(const SearchSpace& space, const Dimension& dim) const;
  void CheckOverlaps(const SearchSpace& space) const;
  std::string Metric(const Fields& fields, bool quality_only) const;
  void ParseObjectives(const YAML::Node& node, SearchSpace& space) const;
  void ParseConstraints(const YAML::Node& node, SearchSpace& space) const;
  void ParseStrategy(const YAML::Node& node, SearchSpace& space) const;
  void ParseRepeats(const Fields& top, SearchSpace& space) const;
  void ParseScreen(const YAML::Node& node, SearchSpace& space) const;

  std::string source_;
  bool check_choices_ = true;  // every choice makes a valid trial spec
  YAML::Node root_;            // the document, for the lines of fields in messages
};

// The document within bounds, before anything walks it recursively: at most
// kMaxNesting deep, no alias inside the node it names, and with every alias
// expanded (a chain of anchors multiplies the document) at most
// kMaxSpaceNodes values and kMaxSpaceBytes of text; keys of at most
// kMaxKeyBytes; numbers in range.
void SpaceParser::CheckTree(const YAML::Node& node, std::vector<YAML::Node>& enclosing, Budget& budget) const {
  const int line = node.Mark().line + 1;
  const auto fail = [&](const std::string& problem) { throw SpaceError(source_, line, "", problem); };
  for (const YAML::Node& outer : enclosing) {
    if (node.is(outer)) fail("an alias refers to a node that contains it");
  }
  if (static_cast<int>(enclosing.size()) >= kMaxNesting) {
    fail("nested deeper than " + std::to_string(kMaxNesting) + " levels");
  }
  if (++budget.nodes > kMaxSpaceNodes) {
    fail("more than " + std::to_string(kMaxSpaceNodes) + " values with every alias expanded");
  }
  if (node.IsScalar()) {
    budget.bytes += node.Scalar().size();
    if (budget.bytes > kMaxSpaceBytes) {
      fail("more than " + std::to_string(kMaxSpaceBytes) + " bytes of text with every alias expanded");
    }
    if (std::optional<std::string> problem = NumberProblem(node)) fail(*problem);
    return;
  }
  enclosing.push_back(node);
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) CheckTree(item, enclosing, budget);
  } else if (node.IsMap()) {
    for (const auto& entry : node) {
      if (entry.first.IsScalar() && entry.first.Scalar().size() > kMaxKeyBytes) {
        throw SpaceError(source_, entry.first.Mark().line + 1, "",
                         "a key of " + std::to_string(entry.first.Scalar().size()) + " bytes; at most " +
                             std::to_string(kMaxKeyBytes));
      }
      CheckTree(entry.first, enclosing, budget);
      CheckTree(entry.second, enclosing, budget);
    }
  }
  enclosing.pop_back();
}

// Rejects duplicate and non-scalar keys, which the JSON model cannot hold.
void SpaceParser::CheckKeys(const YAML::Node& node, const std::string& path) const {
  if (node.IsMap()) {
    std::set<std::string> keys;
    for (const auto& entry : node) {
      const int line = entry.first.Mark().line + 1;
      if (!entry.first.IsScalar()) throw SpaceError(source_, line, path, "keys must be plain scalars");
      const std::string& key = entry.first.Scalar();
      if (!keys.insert(key).second) throw SpaceError(source_, line, ChildPath(path, key), "duplicate key");
      CheckKeys(entry.second, ChildPath(path, key));
    }
  } else if (node.IsSequence()) {
    size_t i = 0;
    for (const auto& element : node) CheckKeys(element, ElementPath(path, i++));
  }
}

int SpaceParser::Locate(const YAML::Node& node, std::string_view rest, int line) {
  if (rest.empty()) return line;
  if (rest.front() == '[') {
    const size_t close = rest.find(']');
    if (!node.IsSequence() || close == std::string_view::npos) return 0;
    size_t index = 0;
    for (char c : rest.substr(1, close - 1)) {
      if (c < '0' || c > '9') return 0;
      index = index * 10 + (c - '0');
    }
    if (index >= node.size()) return 0;
    const YAML::Node element = node[index];
    rest.remove_prefix(close + 1);
    if (!rest.empty() && rest.front() == '.') rest.remove_prefix(1);
    return Locate(element, rest, element.Mark().line + 1);
  }
  if (!node.IsMap()) return 0;
  bool found = false;
  YAML::const_iterator best;
  size_t best_size = 0;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) continue;
    const std::string& key = it->first.Scalar();
    const bool matches = rest.substr(0, key.size()) == key &&
                         (rest.size() == key.size() || rest[key.size()] == '.' || rest[key.size()] == '[');
    if (matches && (!found || key.size() > best_size)) {
      best = it;
      found = true;
      best_size = key.size();
    }
  }
  if (!found) return 0;
  rest.remove_prefix(best_size);
  if (!rest.empty() && rest.front() == '.') rest.remove_prefix(1);
  return Locate(best->second, rest, best->first.Mark().line + 1);
}

SearchSpace SpaceParser::Parse(const std::string& text) {
  // The bytes first: yaml-cpp takes seconds over a megabyte of brackets.
  if (text.size() > kMaxSpaceBytes) {
    throw SpaceError(source_, 0, "",
                     "a search-space file of " + std::to_string(text.size()) + " bytes; the limit is 1 MiB");
  }
  const auto fail_at = [&](const InputFault& fault) {
    throw SpaceError(source_, fault.line, "", "byte " + std::to_string(fault.offset) + ": " + fault.problem);
  };
  if (std::optional<InputFault> fault = FindEncodingFault(text)) fail_at(*fault);
  if (std::optional<InputFault> fault = FindNestingFault(text, kMaxNesting, /*json_strings=*/false)) {
    fail_at(*fault);
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    throw SpaceError(source_, e.mark.line + 1, "", "nested deeper than " + std::to_string(kMaxNesting) + " levels");
  } catch (const YAML::ParserException& e) {
    throw SpaceError(source_, e.mark.line + 1, "", "invalid YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw SpaceError(source_, e.mark.line + 1, "", "invalid YAML: " + e.msg);
  }
  std::vector<YAML::Node> enclosing;
  Budget budget;
  CheckTree(root, enclosing, budget);
  if (!root.IsMap()) {
    throw SpaceError(source_, std::max(1, root.Mark().line + 1), "",
                     "expected a mapping of fields (name, task, baseline, space, objectives, ...)");
  }
  root_.reset(root);
  // A stored space was checked when it was submitted.
  if (check_choices_) CheckKeys(root, "");

  SearchSpace space;
  space.source = source_;
  Fields top(*this, root, "",
             {"name", "description", "task", "baseline", "trial", "space", "objectives", "constraints", "repeats",
              "parity", "strategy", "screen", "max_attempts", "profile", "latency"});
  top.Required("name");
  top.String("name", space.name);
  static const std::regex kName("[A-Za-z0-9][A-Za-z0-9_.-]{0,99}");
  if (space.name.size() > 100 || !std::regex_match(space.name, kName)) {
    Fail("name", "'" + space.name + "' is not a valid name (letters, digits, '_', '.', '-'; at most 100)");
  }
  top.String("description", space.description);
  ParseBaseline(top, space);
  CheckBaseline(space);
  if (top.Has("space")) ParseDimensions(top.Get("space"), space);
  ParseObjectives(top.Required("objectives"), space);
  if (top.Has("constraints")) ParseConstraints(top.Get("constraints"), space);
  ParseRepeats(top, space);
  if (top.Has("parity")) {
    Fields parity(*this, top.Get("parity"), "parity", {"metric", "margin", "test"});
    if (parity.Has("metric")) space.parity.metric = Metric(parity, true);
    parity.Choice("test", space.parity.test, {"welch", "paired"});
    if (std::optional<double> margin = parity.Number("margin")) {
      if (*margin < 0) Fail("parity.margin", "must be at least 0");
      space.parity.margin = *margin;
    }
  }
  space.parity.looks = space.max_repeats - space.repeats + 1;
  if (top.Has("strategy")) ParseStrategy(top.Get("strategy"), space);
  top.Integer("max_attempts", space.max_attempts, 1, 100);
  if (top.Has("screen")) ParseScreen(top.Get("screen"), space);
  if (space.strategy.name == "grid" && GridSize(space) > kMaxGridForGridStrategy) {
    Fail("space", "the grid has " + std::to_string(GridSize(space)) + " configurations, more than " +
                      std::to_string(kMaxGridForGridStrategy) + "; use strategy random");
  }
  return space;
}

// `repeats: N` (N seeds each) or `repeats: {min: A, max: B}` (A seeds each,
// up to B for a configuration whose verdict is inconclusive; docs/search-space.md).
void SpaceParser::ParseRepeats(const Fields& top, SearchSpace& space) const {
  if (top.Has("repeats") && top.Get("repeats").IsMap()) {
    Fields repeats(*this, top.Get("repeats"), "repeats", {"min", "max"});
    repeats.Required("min");
    repeats.Required("max");
    repeats.Integer("min", space.repeats, 1, 1000);
    repeats.Integer("max", space.max_repeats, 1, 1000);
    if (space.max_repeats < space.repeats) {
      Fail("repeats.max", "must be at least repeats.min (" + std::to_string(space.repeats) + "), got " +
                              std::to_string(space.max_repeats));
    }
    return;
  }
  top.Integer("repeats", space.repeats, 1, 1000);
  space.max_repeats = space.repeats;
}

void SpaceParser::ParseBaseline(const Fields& top, SearchSpace& space) {
  json task = json::object();
  if (top.Has("task")) {
    task = top.Value("task");
    if (!task.is_object()) {
      Fail("task", "expected a mapping of trial-spec task fields, got " + Describe(task));
    }
  }
  if (top.Has("trial") && top.Has("baseline")) {
    Fail("trial", "a space has either a baseline (frontier-trial's networks) or a trial command, not both");
  }
  if (top.Has("trial")) {
    ParseCommandTrial(top, task, space);
    return;
  }
  Fields baseline(*this, top.Required("baseline"), "baseline", {"arch", "runtime"});
  json arch = YamlToJson(baseline.Required("arch"));
  json runtime = baseline.Has("runtime") ? baseline.Value("runtime") : json::object();
  if (runtime.is_object() && runtime.contains("plugins") && runtime["plugins"].is_array()) {
    for (json& plugin : runtime["plugins"]) {  // the trial spec's validation checks the rest
      if (plugin.is_string() && !plugin.get<std::string>().empty()) plugin = InSpaceFolder(plugin);
    }
  }
  space.base = {{"schema", kTrialSpecSchema}, {"task", task}, {"arch", arch}, {"runtime", runtime}};
  // Profiling (docs/profiling.md) and latency (docs/trial-output.md) apply to every trial of the
  // experiment; trials are profiled unless the space says `profile: off`.
  if (top.Has("profile")) {
    json profile = top.Value("profile");
    if (profile == false || profile == "off") profile = {{"steps", 0}};
    if (!profile.is_object()) Fail("profile", "expected a mapping like {steps: 3} or off, got " + Describe(profile));
    space.base["profile"] = profile;
  }
  if (top.Has("latency")) {
    const json latency = top.Value("latency");
    if (!latency.is_object()) Fail("latency", "expected a mapping like {batch_size: 8}, got " + Describe(latency));
    space.base["latency"] = latency;
  }
}

// `path` made absolute against the space file's folder (an absolute path as
// given), normalized, without a trailing slash.
// A kernel lab's kept variant (docs/kernel-lab.md): `lab:DIR` names the
// folder `frontier ops optimize` kept (DIR/manifest.json, DIR/plugin.so),
// relative to the space file. The choice becomes the variant's name, and its
// plugin joins the baseline's runtime.plugins, so every trial can load it.
std::string SpaceParser::LabChoice(const std::string& at, const std::string& field, const Dimension& dim,
                                   const std::string& choice, SearchSpace& space) const {
  const std::string dir = InSpaceFolder(choice.substr(std::string(kLabChoicePrefix).size()));
  const std::string manifest_path = dir + "/manifest.json";
  std::ifstream in(manifest_path, std::ios::binary);
  if (!in) FailAt(at, field, "'" + Abbreviated(choice, kMaxQuotedBytes) + "': no kernel lab variant at " + manifest_path);
  std::string text(64 * 1024 + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  json manifest;
  try {
    manifest = ParseBoundedJson(text, 64 * 1024);
  } catch (const std::exception& e) {
    FailAt(at, field, manifest_path + ": " + e.what());
  }
  const auto text_field = [&](const char* key) {
    if (!manifest.is_object() || !manifest.contains(key) || !manifest[key].is_string() ||
        manifest[key].get<std::string>().empty()) {
      FailAt(at, field, manifest_path + ": no '" + key + "'");
    }
    return manifest[key].get<std::string>();
  };
  const std::string op = text_field("op"), variant = text_field("variant"), plugin = text_field("plugin");
  const std::map<std::string, std::string> op_paths = {{"attention_kernel", "arch.ops.attention_kernel"},
                                                       {"bev_pool", "arch.bev.pooling"}};
  const auto expected = op_paths.find(op);
  for (const std::string& path : dim.paths) {
    if (expected == op_paths.end() || path != expected->second) {
      FailAt(at, field, "'" + Abbreviated(choice, kMaxQuotedBytes) + "' is a variant of the op " + op + ", not a choice of " + path);
    }
  }
  if (plugin.find('/') != std::string::npos) FailAt(at, field, manifest_path + ": 'plugin' must be a file name");
  json& runtime = space.base["runtime"];
  if (!runtime.is_object()) runtime = json::object();
  if (!runtime.contains("plugins") || !runtime["plugins"].is_array()) runtime["plugins"] = json::array();
  const std::string library = dir + "/" + plugin;
  if (std::find(runtime["plugins"].begin(), runtime["plugins"].end(), library) == runtime["plugins"].end()) {
    runtime["plugins"].push_back(library);
  }
  return variant;
}

std::string SpaceParser::InSpaceFolder(const std::string& path) const {
  namespace fs = std::filesystem;
  std::error_code ignored;
  const fs::path resolved = fs::path(path).is_absolute() ? fs::path(path) : fs::path(source_).parent_path() / path;
  std::string absolute = fs::absolute(resolved, ignored).lexically_normal().string();
  if (absolute.size() > 1 && absolute.back() == '/') absolute.pop_back();
  return absolute;
}

// A command trial (docs/byo-model.md): `trial: {command: [argv...], workdir,
// params, time_limit_s, runtime}`; the workdir is resolved against the space
// file's folder.
void SpaceParser::ParseCommandTrial(const Fields& top, const json& task, SearchSpace& space) {
  Fields trial(*this, top.Get("trial"), "trial", {"command", "workdir", "params", "time_limit_s", "runtime"});
  const json argv = YamlToJson(trial.Required("command"));
  if (!argv.is_array() || argv.empty()) {
    Fail("trial.command", "expected the program and its arguments as a list, e.g. [/usr/bin/python3, train.py]");
  }
  std::string workdir = ".";
  trial.String("workdir", workdir);
  json params = trial.Has("params") ? trial.Value("params") : json::object();
  if (!params.is_object()) Fail("trial.params", "expected a mapping of the program's parameters, got " + Describe(params));
  json command = {{"argv", argv}, {"workdir", InSpaceFolder(workdir)}};
  if (std::optional<double> limit = trial.Number("time_limit_s")) command["time_limit_s"] = *limit;
  json runtime = trial.Has("runtime") ? trial.Value("runtime") : json::object();
  space.base = {{"schema", kTrialSpecSchema}, {"protocol", kTrialProtocol}, {"params", params},
                {"task", task},               {"runtime", runtime},           {"command", command}};
  // nsys/ncu wrap the command as they wrap frontier-trial (docs/profiling.md).
  if (top.Has("profile")) {
    const json profile = top.Value("profile");
    if (!profile.is_object()) Fail("profile", "expected a mapping like {tool: nsys}, got " + Describe(profile));
    space.base["profile"] = profile;
  }
}

// The baseline must be a valid trial spec; its errors point at the field in
// the file (task fields live at the top level, arch and runtime under baseline,
// or for a command trial params, command and runtime under trial).
void SpaceParser::CheckBaseline(const SearchSpace& space) const {
  try {
    ParseTrialSpec(space.base);
  } catch (const SpecError& e) {
    const std::string section = space.base.contains("command") ? "trial" : "baseline";
    std::string field = StartsWith(e.path(), "task") ? e.path() : ChildPath(section, e.path());
    Fail(field, Problem(e));
  }
}

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

std::string SpaceParser::Metric(const Fields& fields, bool quality_only) const {
  std::string metric;
  fields.String("metric", metric);
  const std::vector<std::string> known =
      MetricNames([&](const MetricInfo& m) { return quality_only ? m.quality : m.selectable; });
  const MetricInfo* info = FindMetric(metric);
  if (info == nullptr || std::find(known.begin(), known.end(), metric) == known.end()) {
    Fail(fields.Field("metric"),
         (quality_only ? "'" + metric + "' is not a quality metric" : "unknown metric '" + metric + "'") +
             "; expected one of " + Join(known));
  }
  if (!quality_only && info->test_split) {
    Fail(fields.Field("metric"), "the test split is for the final report; select on val_" + metric.substr(5));
  }
  return metric;
}

void SpaceParser::ParseObjectives(const YAML::Node& node, SearchSpace& space) const {
  if (!node.IsSequence()) {
    Fail("objectives", "expected a list of {metric, goal}, got " + Describe(YamlToJson(node)));
  }
  if (node.size() == 0) Fail("objectives", "needs at least one objective");
  for (size_t i = 0; i < node.size(); ++i) {
    Fields fields(*this, node[i], ElementPath("objectives", i), {"metric", "goal"});
    fields.Required("metric");
    Objective objective;
    objective.metric = Metric(fields, false);
    objective.maximize = FindMetric(objective.metric)->maximize;
    std::string goal = objective.maximize ? "maximize" : "minimize";
    fields.Choice("goal", goal, {"maximize", "minimize"});
    objective.maximize = goal == "maximize";
    for (const Objective& earlier : space.objectives) {
      if (earlier.metric == objective.metric) {
        Fail(fields.Field("metric"), "duplicate objective " + objective.metric);
      }
    }
    space.objectives.push_back(objective);
  }
}

void SpaceParser::ParseConstraints(const YAML::Node& node, SearchSpace& space) const {
  if (!node.IsSequence()) {
    Fail("constraints", "expected a list of {metric, max, min}, got " + Describe(YamlToJson(node)));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    Fields fields(*this, node[i], ElementPath("constraints", i), {"metric", "min", "max"});
    fields.Required("metric");
    Constraint constraint;
    constraint.metric = Metric(fields, false);
    constraint.min = fields.Number("min");
    constraint.max = fields.Number("max");
    if (!constraint.min && !constraint.max) Fail(fields.Field("metric"), "needs a min or a max");
    if (constraint.min && constraint.max && *constraint.min > *constraint.max) {
      Fail(fields.Field("min"), "is above max");
    }
    for (const Constraint& earlier : space.constraints) {
      if (earlier.metric == constraint.metric) {
        Fail(fields.Field("metric"),
             "duplicate constraint on " + constraint.metric + "; put min and max in one entry");
      }
    }
    space.constraints.push_back(constraint);
  }
}

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
    const json in_trial = fields.Value("in_trial");
    if (!in_trial.is_boolean())
      Fail(fields.Field("in_trial"), "expected true or false, got " + Describe(in_trial));
    screen.in_trial = in_trial.get<bool>();
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
    Fail("screen", "the grid has " + std::to_string(GridSize(space)) + " configurations, more than " +
                       std::to_string(kMaxScreenedConfigs) +
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
  if (strategy.name == "sobol" && strategy.trials == 0 && GridSize(space) > kMaxGridForGridStrategy) {
    Fail("strategy", "the grid has " + std::to_string(GridSize(space)) + " configurations, more than " +
                         std::to_string(kMaxGridForGridStrategy) + "; set trials");
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

SpaceError::SpaceError(const std::string& file, int line, const std::string& field,
                       const std::string& problem)
    : std::runtime_error(Abbreviated(file, kMaxQuotedBytes) + (line > 0 ? ":" + std::to_string(line) : "") +
                         ": " + (field.empty() ? "" : Abbreviated(field, kMaxQuotedBytes) + ": ") +
                         Abbreviated(problem, 4 * kMaxQuotedBytes)),
      file_(file),
      line_(line),
      field_(field) {}

SearchSpace ParseSearchSpace(const std::string& yaml_text, const std::string& source) {
  return SpaceParser(source, /*check_choices=*/true).Parse(yaml_text);
}

SearchSpace ParseStoredSearchSpace(const std::string& yaml_text, const std::string& source) {
  return SpaceParser(source, /*check_choices=*/false).Parse(yaml_text);
}

std::string ReadSearchSpaceFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SpaceError(path, 0, "", "cannot open the search-space file");
  // One byte past the limit is enough to refuse a larger file without reading it all.
  std::string text(kMaxSpaceBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) throw SpaceError(path, 0, "", "cannot read the search-space file");
  if (text.size() > kMaxSpaceBytes) throw SpaceError(path, 0, "", "a search-space file over 1 MiB; the limit is 1 MiB");
  return text;
}

SearchSpace LoadSearchSpaceFile(const std::string& path) { return ParseSearchSpace(ReadSearchSpaceFile(path), path); }

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
