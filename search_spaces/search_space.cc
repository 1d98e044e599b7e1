// Reading a search-space document (search_space.h): its text and YAML within
// bounds (CheckTree, CheckKeys), plain scalars typed as JSON (YamlToJson), the
// line of a field in messages (Locate), the top-level fields in order
// (SpaceParser::Parse: name, repeats, parity, max_attempts; the other
// sections in the files space_parser.h names), SpaceError, and the entry
// points that parse, read and load a space file.
#include "search_spaces/search_space.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <string_view>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "search_spaces/input_bounds.h"
#include "search_spaces/space_parser.h"

namespace frontier {
namespace space_reading {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
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

namespace {

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

}  // namespace

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
              "parity", "strategy", "screen", "max_attempts", "retry_timeouts", "profile", "latency", "deploy"});
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
  top.Bool("retry_timeouts", space.retry_timeouts);
  if (top.Has("screen")) ParseScreen(top.Get("screen"), space);
  CheckProposedAtOnce(space);
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

}  // namespace space_reading

using space_reading::SpaceParser;

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

}  // namespace frontier
