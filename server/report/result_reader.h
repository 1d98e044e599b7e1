// What a report reads of one trial result, from the parsed document or from
// its JSON text in one SAX pass (no document built: a report over 100,000
// trials reads 100,000 results). Internal to frontier_report.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace frontier {

// What the report reads of one trial result.
struct ResultFacts {
  std::vector<double> values;                    // by metric index; NaN when absent
  bool has_evals = false;                        // "evals" is a list
  std::vector<std::pair<double, double>> evals;  // (train_time_s, parity metric) per evaluation with both
  std::optional<std::string> verdict;
  std::string bottleneck_summary;
  nlohmann::json profile;  // the profiled seed's entry in ConfigSummary::profiles; null when not profiled
  bool shared_cores = false;  // placement.shared_cores: another trial ran on its cores meanwhile
  nlohmann::json deploy;      // the result's deploy section (an object); null when it has none
};

// Reads into `facts` (whose `values` has one NaN per path) the finite numbers
// at `paths` (MetricPath of each summarized metric), the evaluations' parity
// metric with their train_time_s, the bottleneck verdict and summary, the
// profile's summary and the deploy section; a result that is not an object adds nothing.
void ReadResultFacts(const nlohmann::json& result, const std::vector<std::vector<std::string>>& paths,
                     const std::string& parity_metric, const std::string& trial_id, ResultFacts& facts);
// The same from the JSON text: a SAX pass for results without a "profile"
// section (the document for the few with one). Throws std::invalid_argument
// when the text is not valid JSON.
void ReadResultFactsText(std::string_view result_json, const std::vector<std::vector<std::string>>& paths,
                         const std::string& parity_metric, const std::string& trial_id, ResultFacts& facts);

}  // namespace frontier
