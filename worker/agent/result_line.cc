#include "worker/agent/result_line.h"

#include "worker/agent/placement.h"
#include "os/cpus.h"

namespace frontier {

using nlohmann::json;

std::string StringField(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int ThreadsField(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number_integer() && it->get<int64_t>() > 0 && it->get<int64_t>() <= 4096
             ? it->get<int>()
             : 0;
}

std::string WithPlacement(const std::string& result_json, const AgentOptions& options, int slot,
                          const std::vector<int>& cpus, bool claim_shared) {
  if (result_json.empty()) return result_json;
  json result = json::parse(result_json, nullptr, /*allow_exceptions=*/false);
  if (!result.is_object()) return result_json;
  const bool pinned = !cpus.empty();
  result["placement"] = {{"worker", options.host},
                         {"slot", slot},
                         {"device", NameOf(options.device)},
                         {"cpus", FormatCpuList(pinned ? cpus : UsableCpus())},
                         {"pinned", pinned},
                         {"shared_cores", claim_shared || options.cpus_shared ||
                                              (!pinned && options.slots > 1 && options.device == DeviceKind::kCpu)}};
  return result.dump();
}

}  // namespace frontier
