#include "worker/trial/measure/phases.h"
#include "os/monotonic.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace frontier {
namespace {

size_t IndexOf(std::string_view phase) {
  const auto* found = std::find(kTrialPhases.begin(), kTrialPhases.end(), phase);
  if (found == kTrialPhases.end()) throw std::invalid_argument("unknown trial phase '" + std::string(phase) + "'");
  return static_cast<size_t>(found - kTrialPhases.begin());
}

}  // namespace

void PhaseTimes::Add(std::string_view phase, double seconds) { seconds_[IndexOf(phase)] += std::max(0.0, seconds); }

Monotonic::time_point PhaseTimes::AddSince(std::string_view phase, Monotonic::time_point since) {
  const Monotonic::time_point now = Monotonic::now();
  Add(phase, std::chrono::duration<double>(now - since).count());
  return now;
}

double PhaseTimes::Seconds(std::string_view phase) const { return seconds_[IndexOf(phase)]; }

nlohmann::json PhaseTimes::ToJson(double wall_s) const {
  nlohmann::json phases = nlohmann::json::object();
  double claimed = 0;
  for (size_t i = 0; i < kTrialPhases.size(); ++i) {
    phases[std::string(kTrialPhases[i]) + "_s"] = seconds_[i];
    claimed += seconds_[i];
  }
  phases["other_s"] = std::max(0.0, wall_s - claimed);
  phases["wall_s"] = wall_s;
  return phases;
}

double SecondsSinceProcessStart() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Field 22 (starttime, clock ticks since boot) counts from after the ')' closing field 2 (comm).
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {
  }
  unsigned long long ticks = 0;
  if (!(fields >> ticks)) return 0;
  const long per_second = sysconf(_SC_CLK_TCK);
  timespec now{};
  if (per_second <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return 0;
  const double since = now.tv_sec + now.tv_nsec * 1e-9 - static_cast<double>(ticks) / per_second;
  return std::max(0.0, since);
}

}  // namespace frontier
