// ObjectReader (object_reader.h): the checked reads of one JSON object's
// fields that every section of a trial spec is parsed with.
#include "search_spaces/object_reader.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace frontier::spec_reading {
namespace {

using nlohmann::json;

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

}  // namespace

ObjectReader::ObjectReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
  if (!j_.is_object()) throw SpecError(path_, "expected an object, got " + std::string(j_.type_name()));
}

const json* ObjectReader::Get(const std::string& key) {
  seen_.insert(key);
  auto it = j_.find(key);
  return it == j_.end() ? nullptr : &*it;
}

void ObjectReader::Int(const std::string& key, int& out, int min, int max) {
  if (const json* v = Get(key)) out = static_cast<int>(CheckedInteger(*v, key, min, max));
}

void ObjectReader::Int64(const std::string& key, int64_t& out, int64_t min, int64_t max) {
  if (const json* v = Get(key)) out = CheckedInteger(*v, key, min, max);
}

void ObjectReader::Double(const std::string& key, double& out, double min, double max) {
  const json* v = Get(key);
  if (!v) return;
  if (!v->is_number()) throw SpecError(Field(key), "expected a number");
  double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    std::ostringstream os;
    os << "must be in [" << min << ", " << max << "], got " << d;
    throw SpecError(Field(key), os.str());
  }
  out = d;
}

void ObjectReader::Bool(const std::string& key, bool& out) {
  const json* v = Get(key);
  if (!v) return;
  if (!v->is_boolean()) throw SpecError(Field(key), "expected true or false");
  out = v->get<bool>();
}

void ObjectReader::String(const std::string& key, std::string& out) {
  const json* v = Get(key);
  if (!v) return;
  if (!v->is_string()) throw SpecError(Field(key), "expected a string");
  out = v->get<std::string>();
}

void ObjectReader::Choice(const std::string& key, std::string& out, const std::vector<std::string>& choices) {
  String(key, out);
  if (std::find(choices.begin(), choices.end(), out) == choices.end()) {
    throw SpecError(Field(key), "unknown choice '" + out + "'; expected one of " + Join(choices));
  }
}

void ObjectReader::Kind(const std::string& key, std::string& out, const std::vector<std::string>& builtins) {
  if (!PluginNamesAllowed()) return Choice(key, out, builtins);
  String(key, out);
  if (out.empty() || out.size() > 64) throw SpecError(Field(key), "expected a name of 1 to 64 characters");
}

bool& ObjectReader::PluginNamesAllowed() {
  thread_local bool allowed = false;
  return allowed;
}

std::string ObjectReader::Unknown() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (!seen_.count(it.key())) return it.key();
  }
  return "";
}

void ObjectReader::RejectUnknown() const {
  const std::string key = Unknown();
  if (!key.empty()) throw SpecError(Field(key), "unknown field");
}

int64_t ObjectReader::CheckedInteger(const json& v, const std::string& key, int64_t min, int64_t max) const {
  if (!v.is_number_integer()) throw SpecError(Field(key), "expected an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    throw SpecError(Field(key),
                    "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + v.dump());
  }
  int64_t i = v.get<int64_t>();
  if (i < min || i > max) {
    throw SpecError(Field(key), "must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                                    "], got " + std::to_string(i));
  }
  return i;
}

}  // namespace frontier::spec_reading
