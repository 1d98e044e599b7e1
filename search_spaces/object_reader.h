// ObjectReader: how the trial spec's parsers read one JSON object, field by
// field, checked. Internal to search_spaces/ (trial_spec.cc and
// trial_spec_arch.cc); other folders read specs through trial_spec.h.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"

namespace frontier::spec_reading {

// Reads the fields of one JSON object, remembering which it consumed so that
// unknown (misspelled) keys are reported instead of ignored.
//
// Contract: every failure throws SpecError naming the field as `path.key`
// (just `key` for the top level, whose path is ""). A reader that finds a
// key absent leaves `out` as it was, so a spec's defaults are the values the
// caller put there before reading. Kind's leniency is one thread_local flag
// (PluginNamesAllowed), which ParseTrialSpec sets while it reads the arch of
// a spec that loads plugins and clears after.
class ObjectReader {
 public:
  // Throws unless `j` is an object.
  ObjectReader(const nlohmann::json& j, std::string path);

  std::string Field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool Has(const std::string& key) const { return j_.contains(key); }

  // The value at `key`, or nullptr; either way the key counts as read.
  const nlohmann::json* Get(const std::string& key);

  // An integer or number in [min, max]; a bool; a string.
  void Int(const std::string& key, int& out, int min, int max);
  void Int64(const std::string& key, int64_t& out, int64_t min, int64_t max);
  void Double(const std::string& key, double& out, double min, double max);
  void Bool(const std::string& key, bool& out);
  void String(const std::string& key, std::string& out);
  // A string that must be one of `choices`; an absent key checks the default.
  void Choice(const std::string& key, std::string& out, const std::vector<std::string>& choices);
  // A choice of an enum's names (runtime_kinds.h): `out` keeps its value when the key is absent.
  template <class E>
  void Enum(const std::string& key, E& out) {
    std::string name = NameOf(out);
    Choice(key, name, NamesOf<E>());
    out = *ParseName<E>(name);
  }
  // A name from one of frontier-trial's registries (stem, block family,
  // attention kind, op variant): one of the built-ins, or, in a spec that
  // loads plugins, any name (a plugin may register it; frontier-trial fails
  // the trial naming it when none did).
  void Kind(const std::string& key, std::string& out, const std::vector<std::string>& builtins);
  static bool& PluginNamesAllowed();

  // Call after reading every known field.
  // The first key not read so far, or "".
  std::string Unknown() const;
  void RejectUnknown() const;

 private:
  int64_t CheckedInteger(const nlohmann::json& v, const std::string& key, int64_t min, int64_t max) const;

  const nlohmann::json& j_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace frontier::spec_reading
