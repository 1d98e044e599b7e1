// PLACEHOLDER while the profiler is being written: records nothing.
#include "worker/profiler.h"

namespace frontier {

struct StepProfiler::Impl {};

StepProfiler::StepProfiler(const ProfileSpec&, int, std::string, std::string) : impl_(std::make_unique<Impl>()) {}
StepProfiler::~StepProfiler() = default;
bool StepProfiler::Covers(int) const { return false; }
void StepProfiler::BeforeStep(int) {}
void StepProfiler::AfterStep(int) {}
nlohmann::json StepProfiler::Finish() { return nullptr; }

nlohmann::json BottleneckVerdict(const nlohmann::json&) { return nullptr; }

}  // namespace frontier
