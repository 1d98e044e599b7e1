#include "server/report/labels.h"

#include <algorithm>
#include <map>

#include "server/report/format.h"

namespace frontier {
namespace {

using nlohmann::json;

// The last components of dimension names whose choices name themselves.
bool NamesItself(const std::string& last) {
  return last == "block" || last == "precision" || last == "memory_format" || last == "activation" ||
         last == "stem";
}

std::string Abbreviate(const std::string& word) {
  static const std::map<std::string, std::string> kShort = {
      {"attention", "attn"},    {"memory_format", "layout"}, {"activation", "act"},
      {"view_transform", "view"}, {"pooling", "pool"},       {"encoder", "enc"},
      {"stages", "s"},          {"precision", "prec"}};
  auto it = kShort.find(word);
  return it == kShort.end() ? word : it->second;
}

// "stages[1].attention.kind" -> {"s1", "attn"}; "bev.encoder[0].width" -> {"bev", "enc0", "width"}.
std::vector<std::string> ShortComponents(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    std::string part = name.substr(start, dot - start);
    std::string index;
    if (const size_t bracket = part.find('['); bracket != std::string::npos) {
      index = part.substr(bracket + 1, part.find(']', bracket) - bracket - 1);
      part = part.substr(0, bracket);
      if (index == "*") index.clear();
    }
    if (!part.empty()) parts.push_back(Abbreviate(part) + index);
    start = dot + 1;
  }
  while (parts.size() > 1 && (parts.back() == "kind" || parts.back() == "type" || parts.back() == "name")) {
    parts.pop_back();
  }
  while (parts.size() > 1 && (parts.front() == "arch" || parts.front() == "runtime" || parts.front() == "task")) {
    parts.erase(parts.begin());
  }
  return parts;
}

std::string LastComponent(const std::string& name) {
  std::string last = name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
  if (const size_t bracket = last.find('['); bracket != std::string::npos) last.resize(bracket);
  if ((last == "kind" || last == "type") && name.find('.') != std::string::npos) {
    return LastComponent(name.substr(0, name.rfind('.')));
  }
  return last;
}

}  // namespace

std::string ChoiceText(const json& choice) {
  if (choice.is_string()) return choice.get<std::string>();
  if (choice.is_number()) return Printf("%g", choice.get<double>());
  if (choice.is_boolean()) return choice.get<bool>() ? "true" : "false";
  if (choice.is_object() && choice.contains("kind") && choice["kind"].is_string()) {
    return choice["kind"].get<std::string>();
  }
  return choice.dump();
}

std::string JoinLabel(const std::vector<ConfigChange>& changes) {
  if (changes.empty()) return "baseline";
  std::string label;
  for (const ConfigChange& change : changes) label += (label.empty() ? "" : " \u00b7 ") + change.text;
  return label;
}

ConfigLabeler::ConfigLabeler(const SearchSpace& space) {
  std::vector<std::vector<std::string>> components;
  for (const Dimension& d : space.dimensions) {
    ReportDimension dim;
    dim.name = d.name;
    dim.choices = d.choices;
    dim.bare = NamesItself(LastComponent(d.name));
    for (const json& choice : d.choices) {
      try {
        if (IsBaseline(space, json{{d.name, choice}})) {
          dim.baseline_choice = choice;
          break;
        }
      } catch (const std::exception&) {
        // A space read back without its baseline (goals only) has no baseline value to compare with.
      }
    }
    components.push_back(ShortComponents(d.name));
    dimensions_.push_back(std::move(dim));
  }
  // Short names: the last component, with as many before it as make it unique.
  for (size_t i = 0; i < dimensions_.size(); ++i) {
    for (size_t take = 1; take <= components[i].size(); ++take) {
      auto tail = [&](size_t j) {
        const auto& c = components[j];
        std::string out;
        for (size_t k = c.size() - std::min(take, c.size()); k < c.size(); ++k) out += (out.empty() ? "" : ".") + c[k];
        return out;
      };
      dimensions_[i].short_name = tail(i);
      bool unique = true;
      for (size_t j = 0; j < dimensions_.size(); ++j) unique = unique && (j == i || tail(j) != tail(i));
      if (unique) break;
    }
  }
  std::map<std::string, int> listed;
  for (const ReportDimension& dim : dimensions_) {
    std::map<std::string, int>& texts = choice_texts_.emplace_back();
    for (const json& choice : dim.choices) ++texts[ChoiceText(choice)];
    for (const auto& [text, n] : texts) ++listed[text];
  }
  for (const auto& [text, n] : listed) {
    if (n > 1) ambiguous_.push_back(text);
  }
}

std::string ConfigLabeler::Text(const std::string& name, const json& choice) const {
  for (size_t d = 0; d < dimensions_.size(); ++d) {
    const ReportDimension& dim = dimensions_[d];
    if (dim.name != name) continue;
    std::string text = ChoiceText(choice);
    // Two choices of the dimension with the same kind: say what else differs.
    const auto same = choice_texts_[d].find(text);
    if (same != choice_texts_[d].end() && same->second > 1 && choice.is_object()) {
      std::string detail;
      for (const auto& [key, value] : choice.items()) {
        if (key != "kind") detail += (detail.empty() ? "" : ",") + key + "=" + ChoiceText(value);
      }
      text += "(" + detail + ")";
    }
    const bool ambiguous = std::find(ambiguous_.begin(), ambiguous_.end(), text) != ambiguous_.end();
    return dim.bare && !ambiguous && choice.is_string() ? text : dim.short_name + "=" + text;
  }
  return ShortComponents(name).empty() ? name + "=" + ChoiceText(choice)
                                       : ShortComponents(name).back() + "=" + ChoiceText(choice);
}

std::vector<ConfigChange> ConfigLabeler::Changes(const json& config) const {
  std::vector<ConfigChange> changes;
  if (!config.is_object()) return changes;
  for (const ReportDimension& dim : dimensions_) {
    if (!config.contains(dim.name)) continue;
    const json& choice = config[dim.name];
    if (!dim.baseline_choice.is_null() && choice == dim.baseline_choice) continue;
    changes.push_back({dim.name, choice, Text(dim.name, choice)});
  }
  for (const auto& item : config.items()) {
    const std::string& name = item.key();  // a plain reference: clang-14 cannot capture structured bindings
    const bool known = std::any_of(dimensions_.begin(), dimensions_.end(),
                                   [&](const ReportDimension& d) { return d.name == name; });
    if (!known) changes.push_back({name, item.value(), Text(name, item.value())});
  }
  return changes;
}

json ConfigLabeler::EffectiveChoices(const json& config) const {
  json choices = json::object();
  for (const ReportDimension& dim : dimensions_) {
    choices[dim.name] = config.is_object() && config.contains(dim.name) ? config[dim.name] : dim.baseline_choice;
  }
  return choices;
}

}  // namespace frontier
