#include "server/report/result_reader.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "search_spaces/input_bounds.h"
#include "search_spaces/metric_catalog.h"

namespace frontier {

using nlohmann::json;

namespace {

// The profiles entry of a result's "profile" section; a field of another
// type reads as absent (a stored result is JSON a worker sent).
json ProfileEntry(const std::string& trial_id, const json& profile) {
  json top = json::array();
  const json& operators = profile.value("top_operators", json());
  for (const json& op : operators.is_array() ? operators : json::array()) {
    if (top.size() == 5) break;
    if (!op.is_object()) continue;
    top.push_back({{"name", StringAt(op, {"name"})},
                   {"class", StringAt(op, {"class"})},
                   {"share", NumberAt(op, {"share"}).value_or(0.0)}});
  }
  const bool has_trace = profile.value("trace", json()).is_string();
  json entry = {{"trial_id", trial_id},
                {"tool", StringAt(profile, {"tool"})},
                {"host", StringAt(profile, {"host"})},
                {"trace", StringAt(profile, {has_trace ? "trace" : "report"})},
                {"top_operators", top}};
  if (profile.contains("error")) entry["error"] = profile["error"];
  return entry;
}

// The verdict as the report shows it: with what it rests on, e.g.
// "overhead-bound (profile)", "input-bound (data wait)" (docs/profiling.md).
std::string VerdictLabel(const std::string& verdict, std::string basis) {
  if (basis.empty() || basis == "none") return verdict;
  for (char& c : basis) c = c == '_' ? ' ' : c;
  return verdict + " (" + basis + ")";
}

}  // namespace

void ReadResultFacts(const json& result, const std::vector<std::vector<std::string>>& paths,
                     const std::string& parity_metric, const std::string& trial_id, ResultFacts& facts) {
  if (!result.is_object()) return;
  const std::vector<std::string> parity_path = {parity_metric};
  for (size_t m = 0; m < paths.size(); ++m) {
    if (std::optional<double> v = NumberAt(result, paths[m])) facts.values[m] = *v;
  }
  auto evals = result.find("evals");
  if (evals != result.end() && evals->is_array()) {
    facts.has_evals = true;
    for (const json& e : *evals) {
      const std::optional<double> value = NumberAt(e, parity_path);
      auto seconds = e.is_object() ? e.find("train_time_s") : e.end();
      if (value && seconds != e.end() && seconds->is_number())
        facts.evals.emplace_back(seconds->get<double>(), *value);
    }
  }
  const json& bottleneck = result.value("bottleneck", json());
  if (bottleneck.is_object() && bottleneck.value("verdict", json()).is_string()) {
    const json basis = bottleneck.value("basis", json());
    facts.verdict = VerdictLabel(bottleneck["verdict"].get<std::string>(),
                                 basis.is_string() ? basis.get<std::string>() : "");
    facts.bottleneck_summary = StringAt(bottleneck, {"summary"});
  }
  const json& profile = result.value("profile", json());
  if (profile.is_object()) facts.profile = ProfileEntry(trial_id, profile);
  const json& placement = result.value("placement", json());
  facts.shared_cores = placement.is_object() && placement.value("shared_cores", json()) == true;
  const json& deploy = result.value("deploy", json());
  if (deploy.is_object()) facts.deploy = deploy;
}

namespace {

// ReadResultFacts on the JSON text without building the document: a SAX pass that
// keeps the numbers at the metrics' paths, the evaluations' parity metric and
// time, the bottleneck verdict, and builds the (small) deploy section alone.
class FactsReader final : public nlohmann::json_sax<json> {
 public:
  FactsReader(const std::vector<std::vector<std::string>>& paths, const std::string& parity_metric,
              ResultFacts& facts)
      : paths_(paths), parity_metric_(parity_metric), facts_(facts) {}

  bool null() override { return Capture(nullptr); }
  bool boolean(bool v) override {
    Capture(v);
    if (levels_.size() == 2 && !levels_[1].array && levels_[0].key == "placement" &&
        levels_[1].key == "shared_cores")
      facts_.shared_cores = v;
    return true;
  }
  bool number_integer(number_integer_t v) override { return Capture(v) && Number(static_cast<double>(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Capture(v) && Number(static_cast<double>(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Capture(v) && Number(v); }
  bool string(string_t& v) override {
    Capture(v);
    if (levels_.size() == 2 && !levels_[1].array && levels_[0].key == "bottleneck") {
      if (levels_[1].key == "verdict") verdict_ = v;
      if (levels_[1].key == "basis") basis_ = v;
      if (!verdict_.empty()) facts_.verdict = VerdictLabel(verdict_, basis_);
      if (levels_[1].key == "summary") facts_.bottleneck_summary = v;
    }
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    if (!captured_.empty()) {
      captured_.push_back(Captured(json::object()));
    } else if (levels_.size() == 1 && !levels_[0].array && levels_[0].key == "deploy") {
      facts_.deploy = json::object();
      captured_.push_back(&facts_.deploy);
    }
    levels_.push_back({false, {}});
    if (InEvaluation())
      evaluation_ = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
    return true;
  }
  bool key(string_t& k) override {
    levels_.back().key = k;
    return true;
  }
  bool end_object() override {
    if (InEvaluation() && !std::isnan(evaluation_.first) && !std::isnan(evaluation_.second)) {
      facts_.evals.push_back(evaluation_);
    }
    levels_.pop_back();
    if (!captured_.empty()) captured_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (levels_.size() == 1 && levels_[0].key == "evals") facts_.has_evals = true;
    if (!captured_.empty()) captured_.push_back(Captured(json::array()));
    levels_.push_back({true, {}});
    return true;
  }
  bool end_array() override {
    levels_.pop_back();
    if (!captured_.empty()) captured_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& e) override {
    throw std::invalid_argument("trial result is not valid JSON at byte " + std::to_string(position) + " ('" +
                                token + "'): " + e.what());
  }

 private:
  struct Level {
    bool array;
    std::string key;  // objects: the key of the value being read
  };

  // Inside an element of the top-level "evals" list.
  bool InEvaluation() const {
    return levels_.size() == 3 && !levels_[0].array && levels_[0].key == "evals" && levels_[1].array &&
           !levels_[2].array;
  }

  // Inside the deploy section: `value` placed in the container being built;
  // returns where it went (a container's place stays valid while it is open:
  // only its own elements are added meanwhile).
  json* Captured(json value) {
    json& parent = *captured_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    json& slot = parent[levels_.back().key];
    slot = std::move(value);
    return &slot;
  }
  template <typename T>
  bool Capture(T&& value) {
    if (!captured_.empty()) Captured(json(std::forward<T>(value)));
    return true;
  }

  bool Number(double v) {
    if (InEvaluation()) {
      if (levels_[2].key == "train_time_s") evaluation_.first = v;
      if (levels_[2].key == parity_metric_ && std::isfinite(v)) evaluation_.second = v;
      return true;
    }
    if (!std::isfinite(v)) return true;
    for (size_t m = 0; m < paths_.size(); ++m) {
      const std::vector<std::string>& path = paths_[m];
      if (path.size() != levels_.size()) continue;
      bool match = true;
      for (size_t i = 0; i < path.size() && match; ++i)
        match = !levels_[i].array && levels_[i].key == path[i];
      if (match) facts_.values[m] = v;
    }
    return true;
  }

  const std::vector<std::vector<std::string>>& paths_;
  const std::string& parity_metric_;
  ResultFacts& facts_;
  std::vector<Level> levels_;
  std::pair<double, double> evaluation_;
  std::string verdict_, basis_;  // of the bottleneck object
  std::vector<json*> captured_;  // the deploy section's open containers, innermost last
};

}  // namespace

void ReadResultFactsText(std::string_view result_json, const std::vector<std::vector<std::string>>& paths,
                         const std::string& parity_metric, const std::string& trial_id, ResultFacts& facts) {
  // Stored results passed the coordinator's bounds; a store written by
  // anything else is read within them too (a deep document would overflow
  // the stack of every copy).
  if (std::optional<InputFault> fault = FindNestingFault(result_json, kMaxNesting, /*json_strings=*/true)) {
    throw std::invalid_argument("trial result out of bounds at " + Describe(*fault));
  }
  if (result_json.find("\"profile\"") != std::string_view::npos) {
    // Profiled seeds (few) keep a summary of their profile: read the document.
    // (libFuzzer found the parse error escaping as nlohmann's exception.)
    const json result = json::parse(result_json, nullptr, /*allow_exceptions=*/false);
    if (result.is_discarded()) throw std::invalid_argument("trial result is not valid JSON");
    try {
      ReadResultFacts(result, paths, parity_metric, trial_id, facts);
    } catch (const json::exception& e) {
      throw std::invalid_argument(std::string("trial result: ") + e.what());
    }
    return;
  }
  FactsReader reader(paths, parity_metric, facts);
  json::sax_parse(result_json, &reader);
}

}  // namespace frontier
