// SpaceParser: the reader of one search-space document, whose sections are
// parsed in the files its members name, and what those files share. Internal
// to search_spaces/; other folders read spaces through search_space.h.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"

namespace frontier::space_reading {

using nlohmann::json;

// A YAML node as the JSON value a trial spec holds: YAML 1.2 core-schema
// typing of plain scalars (true/false, integers, floats), quoted scalars and
// any number of more than 64 characters as strings, mappings as objects,
// sequences as arrays, anything else null. The tree must have passed
// SpaceParser::CheckTree (bounded depth, no alias inside itself).
json YamlToJson(const YAML::Node& node);

// How messages show a value and name a field (the paths SpaceParser::LineOf
// finds the line of).
std::string Show(const json& value);      // as a user writes it: strings bare, the rest as JSON
std::string Describe(const json& value);  // "nothing", "a list", "a mapping", or Show quoted
std::string Join(const std::vector<std::string>& items);                   // "a, b, c"
std::string ChildPath(const std::string& parent, const std::string& key);  // parent.key; key at the top
std::string ElementPath(const std::string& parent, size_t index);          // parent[index]
std::string Problem(const SpecError& e);  // its message without the leading "<path>: "

bool StartsWith(const std::string& s, const std::string& prefix);

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

    void Bool(const std::string& key, bool& out) const {
      if (!Has(key)) return;
      json v = Value(key);
      if (!v.is_boolean()) parser_.Fail(Field(key), "expected true or false, got " + Describe(v));
      out = v.get<bool>();
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

  // The document and its top-level fields (search_space.cc).
  // What CheckTree has counted so far, every alias expanded.
  struct Budget {
    size_t nodes = 0;
    size_t bytes = 0;
  };
  void CheckTree(const YAML::Node& node, std::vector<YAML::Node>& enclosing, Budget& budget) const;
  void CheckKeys(const YAML::Node& node, const std::string& path) const;
  void ParseRepeats(const Fields& top, SearchSpace& space) const;

  // The baseline, or the trial command (space_baseline.cc).
  void ParseBaseline(const Fields& top, SearchSpace& space);
  void ParseCommandTrial(const Fields& top, const json& task, SearchSpace& space);
  void ParseDeploySection(const Fields& top, SearchSpace& space) const;
  void ParseProfileSection(const Fields& top, const std::string& example, SearchSpace& space) const;
  bool EverySeed(json& section, const std::string& name) const;
  std::string InSpaceFolder(const std::string& path) const;
  void CheckBaseline(const SearchSpace& space) const;

  // A kernel lab's kept variant as a choice, `lab:DIR` (lab_choice.cc).
  std::string LabChoice(const std::string& at, const std::string& field, const Dimension& dim,
                        const std::string& choice, SearchSpace& space) const;

  // The `space` section: dimensions, their paths and choices (space_dimensions.cc).
  void ParseDimensions(const YAML::Node& node, SearchSpace& space) const;
  std::vector<std::string> ExpandPath(const std::string& field, const std::string& name,
                                      const json& normalized) const;
  void CheckChoices(const SearchSpace& space, const Dimension& dim) const;
  void CheckOverlaps(const SearchSpace& space) const;

  // Objectives, constraints and the metrics they name (space_objectives.cc).
  std::string Metric(const Fields& fields, bool quality_only) const;
  void ParseObjectives(const YAML::Node& node, SearchSpace& space) const;
  void ParseConstraints(const YAML::Node& node, SearchSpace& space) const;

  // The strategy and speed-first screening (space_strategy.cc).
  void ParseStrategy(const YAML::Node& node, SearchSpace& space) const;
  // What the strategy proposes at once within kMaxListedConfigs and kMaxTrialsAtSubmit.
  void CheckProposedAtOnce(const SearchSpace& space) const;
  void ParseScreen(const YAML::Node& node, SearchSpace& space) const;

  std::string source_;
  bool check_choices_ = true;  // every choice makes a valid trial spec
  YAML::Node root_;            // the document, for the lines of fields in messages
};

}  // namespace frontier::space_reading
