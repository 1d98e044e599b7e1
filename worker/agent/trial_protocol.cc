#include "worker/agent/trial_protocol.h"

#include <filesystem>
#include <system_error>

#include "worker/agent/result_line.h"

namespace frontier {

using nlohmann::json;
using std::chrono::milliseconds;

std::optional<std::string> ReadCommandSection(const json& section, TrialCommand* command,
                                              milliseconds* limit) {
  if (!section.is_object()) return "command: expected an object";
  const auto argv = section.find("argv");
  if (argv == section.end() || !argv->is_array() || argv->empty())
    return "command.argv: expected a non-empty list";
  for (const json& arg : *argv) {
    if (!arg.is_string() || arg.get<std::string>().empty())
      return "command.argv: every entry must be a non-empty string";
    command->program.push_back(arg.get<std::string>());
  }
  command->workdir = StringField(section, "workdir");
  std::error_code error;
  if (!command->workdir.empty() && !std::filesystem::is_directory(command->workdir, error)) {
    return "command.workdir: " + command->workdir + " is not a folder on this worker";
  }
  const auto time_limit = section.find("time_limit_s");
  if (time_limit != section.end() && time_limit->is_number() && time_limit->get<double>() > 0) {
    *limit = milliseconds(static_cast<int64_t>(time_limit->get<double>() * 1000));
  }
  return std::nullopt;
}

std::optional<std::string> ResultSchemaProblem(const json& result) {
  const auto schema = result.find("schema");
  if (schema == result.end() || *schema != 1)
    return "schema is " + (schema == result.end() ? std::string("missing") : schema->dump()) + ", expected 1";
  const std::string status = StringField(result, "status");
  if (status.empty()) return std::string("no status");
  if (status == "completed") {
    const json::json_pointer median("/step_time_ms/median");
    if (!result.contains(median) || !result.at(median).is_number() ||
        !(result.at(median).get<double>() > 0)) {
      return std::string("a completed result needs step_time_ms.median > 0");
    }
  }
  if ((status == "failed" || status == "diverged") && StringField(result, "error").empty()) {
    return "a " + status + " result needs an error";
  }
  return std::nullopt;
}

}  // namespace frontier
