#include "worker/trial/measure/bottleneck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace frontier {
namespace {

using json = nlohmann::json;

// Operators named in the verdict.
constexpr int kVerdictOperators = 5;
// Input-bound when at least this share of (step + data wait) time waits for data.
constexpr double kInputBoundDataWait = 0.20;
// Without a profile: compute-bound when MFU reaches this.
constexpr double kComputeBoundMfu = 0.30;

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
  if (const auto it = result.find("profile");
      it != result.end() && it->is_object() && it->contains("by_bound") && it->contains("top_operators")) {
    profile = &*it;
  }

  json verdict = {{"thresholds",
                   {{"input_bound_data_wait_fraction", kInputBoundDataWait},
                    {"compute_bound_mfu_without_profile", kComputeBoundMfu}}}};
  const auto number_or_null = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  verdict["data_wait_fraction"] = number_or_null(wait);
  verdict["mfu"] = number_or_null(mfu);
  verdict["achieved_flops_per_s"] = number_or_null(achieved);
  verdict["peak_flops_per_s"] = number_or_null(peak);

  json top = json::array();
  std::string top_text;
  double compute = std::nan(""), memory = std::nan(""), overhead = std::nan("");
  if (profile != nullptr) {
    compute = NumberAt(*profile, "/by_bound/compute", 0);
    memory = NumberAt(*profile, "/by_bound/memory", 0);
    overhead =
        NumberAt(*profile, "/by_bound/overhead", 0) + NumberAt(*profile, "/by_bound/outside_operators", 0);
    verdict["time_share"] = {{"compute", compute}, {"memory", memory}, {"overhead", overhead}};
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
  }
  verdict["top_operators"] = top;

  std::string kind, basis, reason;
  if (!std::isfinite(wait) && !std::isfinite(mfu)) {
    kind = "unknown";
    basis = "none";
    reason = "no step-time measurements";
  } else if (std::isfinite(wait) && wait >= kInputBoundDataWait) {
    kind = "input-bound";
    basis = "data_wait";
    reason = Percent(wait) + " of step time waits for data (threshold " + Percent(kInputBoundDataWait) + ")";
  } else if (profile != nullptr) {
    basis = "profile";
    kind = compute >= memory ? "compute-bound" : "memory-bound";
    reason =
        (compute >= memory
             ? "compute-class operators take " + Percent(compute) + ", memory-class " + Percent(memory)
             : "memory-class operators take " + Percent(memory) + ", compute-class " + Percent(compute)) +
        " of profiled time";
    if (!top_text.empty()) reason += " (top: " + top_text + ")";
    if (overhead > std::max(compute, memory))
      reason += "; framework overhead " + Percent(overhead) + " exceeds both";
  } else if (std::isfinite(mfu)) {
    basis = "mfu";
    kind = mfu >= kComputeBoundMfu ? "compute-bound" : "memory-bound";
    reason = "MFU " + Percent(mfu) + (mfu >= kComputeBoundMfu ? " reaches " : " is below ") +
             Percent(kComputeBoundMfu) + " without a profile to tell memory traffic from overhead";
    verdict["confidence"] = "low";
  } else {
    kind = "unknown";
    basis = "none";
    reason = "no FLOP/s measurement";
  }
  verdict["verdict"] = kind;
  verdict["basis"] = basis;

  std::string summary = kind + ": " + reason;
  if (kind != "unknown") {
    if (std::isfinite(mfu)) {
      summary += "; MFU " + Percent(mfu) + " (" + FlopRate(achieved) + " of " + FlopRate(peak) + " " +
                 StringAt(result, "/peak_flops/source", "peak") + ")";
    }
    if (std::isfinite(wait) && basis != "data_wait") summary += "; data wait " + Percent(wait);
  }
  verdict["summary"] = summary + ".";
  return verdict;
}
}  // namespace frontier
