#include "worker/profile/bottleneck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace frontier {
namespace {

using json = nlohmann::json;

// Operators named in the verdict.
constexpr int kVerdictOperators = 5;
// Input-bound when at least this share of (step + data wait) time waits for
// data; sure of it from kSureDataWait.
constexpr double kInputBoundDataWait = 0.20;
constexpr double kSureDataWait = 0.30;
// Comms-bound (a data-parallel trial) when at least this share of the
// slowest rank's step waits for the gradient all-reduce after backward
// (distributed.exposed_share): communication dominates the step; sure of it
// from kSureExposedComms.
constexpr double kCommsBoundExposed = 0.50;
constexpr double kSureExposedComms = 0.65;
// With a profile, the largest of the compute, memory and overhead shares
// decides; the verdict is sure ("high") when it leads the next by at least
// kHighMargin, "medium" by kMediumMargin, else "low".
constexpr double kHighMargin = 0.20;
constexpr double kMediumMargin = 0.10;
// A profile whose operators account for less than this share of the profiled
// time (coverage) gives a "low" verdict whatever its margin.
constexpr double kMinCoverage = 0.50;

double NumberAt(const json& j, const char* pointer, double fallback = std::nan("")) {
  const json::json_pointer path(pointer);
  if (!j.contains(path) || !j.at(path).is_number()) return fallback;
  return j.at(path).get<double>();
}

std::string StringAt(const json& j, const char* pointer, const std::string& fallback) {
  const json::json_pointer path(pointer);
  if (!j.contains(path) || !j.at(path).is_string()) return fallback;
  return j.at(path).get<std::string>();
}

std::string Percent(double share) {
  char text[32];
  std::snprintf(text, sizeof text, share < 0.095 ? "%.1f%%" : "%.0f%%", 100 * share);
  return text;
}

std::string FlopRate(double flops_per_s) {
  char text[32];
  if (flops_per_s >= 1e12) {
    std::snprintf(text, sizeof text, "%.3g TFLOP/s", flops_per_s / 1e12);
  } else {
    std::snprintf(text, sizeof text, "%.3g GFLOP/s", flops_per_s / 1e9);
  }
  return text;
}

}  // namespace

json BottleneckVerdict(const json& result) {
  const double wait = NumberAt(result, "/data_wait_fraction");
  const double achieved = NumberAt(result, "/achieved_flops_per_s");
  const double peak = NumberAt(result, "/peak_flops/flops_per_s");
  const double mfu =
      std::isfinite(achieved) && std::isfinite(peak) && peak > 0 ? achieved / peak : std::nan("");
  const json* profile = nullptr;
  if (const auto it = result.find("profile"); it != result.end() && it->is_object() &&
                                              it->contains("by_bound") && it->contains("top_operators")) {
    profile = &*it;
  }

  json verdict = {{"thresholds",
                   {{"input_bound_data_wait_fraction", kInputBoundDataWait},
                    {"sure_data_wait_fraction", kSureDataWait},
                    {"comms_bound_exposed_share", kCommsBoundExposed},
                    {"high_confidence_margin", kHighMargin},
                    {"medium_confidence_margin", kMediumMargin},
                    {"min_coverage", kMinCoverage}}}};
  const auto number_or_null = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  verdict["data_wait_fraction"] = number_or_null(wait);
  const double exposed = NumberAt(result, "/distributed/exposed_share");
  if (std::isfinite(exposed)) verdict["exposed_comms_share"] = exposed;
  verdict["mfu"] = number_or_null(mfu);
  verdict["achieved_flops_per_s"] = number_or_null(achieved);
  verdict["peak_flops_per_s"] = number_or_null(peak);

  json top = json::array();
  std::string top_text, basis_text;
  double compute = std::nan(""), memory = std::nan(""), overhead = std::nan(""), coverage = std::nan("");
  if (profile != nullptr) {
    compute = NumberAt(*profile, "/by_bound/compute", 0);
    memory = NumberAt(*profile, "/by_bound/memory", 0);
    const double small = NumberAt(*profile, "/small_calls/share", 0);
    const double framework = std::max(0.0, NumberAt(*profile, "/by_bound/overhead", 0) - small);
    const bool gpu = profile->at("by_bound").is_object() && profile->at("by_bound").contains("gpu_idle");
    const double between = NumberAt(*profile, gpu ? "/by_bound/gpu_idle" : "/by_bound/outside_operators", 0);
    overhead = small + framework + between;
    coverage = NumberAt(*profile, "/coverage");
    verdict["time_share"] = {{"compute", compute}, {"memory", memory}, {"overhead", overhead}};
    verdict["overhead_parts"] = {{"small_calls", small},
                                 {"framework_operators", framework},
                                 {gpu ? "gpu_idle" : "outside_operators", between}};
    verdict["coverage"] = number_or_null(coverage);
    json bytes_per_flop = json::object();
    if (const auto classes = profile->find("by_class"); classes != profile->end() && classes->is_object()) {
      for (const auto& [name, c] : classes->items()) {
        if (c.contains("bytes_per_flop") && !c["bytes_per_flop"].is_null())
          bytes_per_flop[name] = c["bytes_per_flop"];
      }
    }
    bytes_per_flop["all"] = profile->value("bytes_per_flop", json(nullptr));
    verdict["bytes_per_flop"] = bytes_per_flop;
    for (const auto& op : (*profile)["top_operators"]) {
      if (static_cast<int>(top.size()) == kVerdictOperators) break;
      top.push_back({{"name", op.value("name", "")},
                     {"class", op.value("class", "")},
                     {"share", op.value("share", 0.0)}});
      if (top.size() <= 3) {
        top_text += (top_text.empty() ? "" : ", ") + op.value("name", std::string()) + " " +
                    Percent(op.value("share", 0.0));
      }
    }
    const int steps = static_cast<int>(NumberAt(*profile, "/steps/recorded", 0));
    basis_text = "profile of " + std::to_string(steps) + (steps == 1 ? " step" : " steps");
  }
  verdict["top_operators"] = top;

  std::string kind, basis, confidence, reason;
  if (std::isfinite(wait) && wait >= kInputBoundDataWait) {
    kind = "input-bound";
    basis = "data_wait";
    confidence = wait >= kSureDataWait ? "high" : "medium";
    basis_text = "data wait";
    reason = Percent(wait) + " of step time waits for data (threshold " + Percent(kInputBoundDataWait) + ")";
  } else if (std::isfinite(exposed) && exposed >= kCommsBoundExposed) {
    kind = "comms-bound";
    basis = "exposed_comms";
    confidence = exposed >= kSureExposedComms ? "high" : "medium";
    basis_text = "exposed all-reduce";
    reason = Percent(exposed) + " of the slowest rank's step waits for the gradient all-reduce after backward "
             "(threshold " + Percent(kCommsBoundExposed) + ")";
  } else if (profile != nullptr) {
    basis = "profile";
    struct Share {
      const char* kind;
      const char* what;
      double share;
    };
    std::vector<Share> shares = {{"compute-bound", "compute-class operators", compute},
                                 {"memory-bound", "memory-class operators", memory},
                                 {"overhead-bound", "framework overhead", overhead}};
    const auto takes = [](const Share& s) { return std::string(s.what) + (s.kind[0] == 'o' ? " takes " : " take "); };
    std::stable_sort(shares.begin(), shares.end(), [](const Share& a, const Share& b) { return a.share > b.share; });
    kind = shares[0].kind;
    const double margin = shares[0].share - shares[1].share;
    confidence = margin >= kHighMargin ? "high" : margin >= kMediumMargin ? "medium" : "low";
    const std::string of = profile->value("time_basis", std::string("profiled time"));
    reason = takes(shares[0]) + Percent(shares[0].share) + " of " + of;
    if (kind == "overhead-bound") {
      const json& parts = verdict["overhead_parts"];
      std::string detail;
      for (const auto& [part, share] : parts.items()) {
        detail += (detail.empty() ? "" : ", ") + part + " " + Percent(share.get<double>());
      }
      std::replace(detail.begin(), detail.end(), '_', ' ');
      reason += " (" + detail + ")";
    }
    reason += "; " + std::string(shares[1].what) + " " + Percent(shares[1].share) + ", " + shares[2].what + " " +
              Percent(shares[2].share);
    if (!top_text.empty()) reason += " (top: " + top_text + ")";
    if (std::isfinite(coverage) && coverage < kMinCoverage) {
      confidence = "low";
      reason += "; operators account for only " + Percent(coverage) + " of it";
    }
  } else if (std::isfinite(wait) || std::isfinite(mfu)) {
    kind = "unknown";
    basis = "none";
    reason = "no profile (profiling off, or it failed) to tell compute, memory and overhead apart";
    if (std::isfinite(wait)) reason += "; not input-bound: data wait " + Percent(wait);
  } else {
    kind = "unknown";
    basis = "none";
    reason = "nothing was measured";
  }
  verdict["verdict"] = kind;
  verdict["basis"] = basis;
  verdict["confidence"] = confidence.empty() ? json(nullptr) : json(confidence);

  std::string summary = kind;
  if (!confidence.empty()) summary += " (" + basis_text + ", " + confidence + " confidence)";
  summary += ": " + reason;
  if (kind != "unknown" && std::isfinite(mfu)) {
    summary += "; MFU " + Percent(mfu) + " (" + FlopRate(achieved) + " of " + FlopRate(peak) + " " +
               StringAt(result, "/peak_flops/source", "peak") + ")";
  }
  if (kind != "unknown" && std::isfinite(wait) && basis != "data_wait") summary += "; data wait " + Percent(wait);
  if (std::isfinite(exposed) && basis != "exposed_comms") summary += "; exposed all-reduce " + Percent(exposed);
  verdict["summary"] = summary + ".";
  return verdict;
}
}  // namespace frontier
