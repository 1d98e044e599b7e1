// A table of named builders: the seam through which the trial runner learns
// its stems, block families, attention kinds, op variants and tasks. A new
// kind is one Add call (at the registry's built-in list, or from a plugin
// before any trial runs), never an edit of a switch. Torch-free.
//
// Not synchronized: entries are added before the first trial is built (the
// built-ins when the registry is first used); lookups may then run anywhere.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace frontier {

template <typename Entry>
class Registry {
 public:
  // `what` names the kind in errors: "stem", "block family", ...
  explicit Registry(std::string what) : what_(std::move(what)) {}

  // Throws std::logic_error when `name` is already registered.
  Registry& Add(const std::string& name, Entry entry) {
    if (!entries_.emplace(name, std::move(entry)).second) {
      throw std::logic_error(what_ + " '" + name + "' is registered twice");
    }
    return *this;
  }

  bool Has(const std::string& name) const { return entries_.count(name) > 0; }

  // Throws std::invalid_argument("unknown <what> '<name>'") for a name never
  // added. (Trial specs are validated by name before they are built, with the
  // field's path in the message: search_spaces/trial_spec_arch.cc.)
  const Entry& At(const std::string& name) const {
    const auto it = entries_.find(name);
    if (it == entries_.end()) throw std::invalid_argument("unknown " + what_ + " '" + name + "'");
    return it->second;
  }

  // Every registered name, sorted.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& [name, entry] : entries_) names.push_back(name);
    return names;
  }

 private:
  std::string what_;
  std::map<std::string, Entry> entries_;
};

}  // namespace frontier
