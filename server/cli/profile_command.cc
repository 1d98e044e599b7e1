#include "server/cli/profile_command.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "server/cli/cli.h"

namespace frontier {
namespace {

using nlohmann::json;

std::string Percent(const json& share) {
  if (!share.is_number()) return "n/a";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * share.get<double>());
  return text;
}

std::string Field(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

std::string ProfileSummary(const std::string& experiment_id, const std::string& run_id, const json& result) {
  const json profile = result.value("profile", json::object());
  const json bottleneck = result.value("bottleneck", json::object());
  std::string out = "profile run " + run_id + ": " + Field(profile, "tool");
  const json steps = profile.value("steps", json::object());
  if (steps.is_object() && steps.contains("count")) out += ", " + Field(steps, "count") + " steps";
  if (profile.contains("host")) out += " on " + Field(profile, "host");
  out += "\n";
  if (bottleneck.contains("summary")) out += "bottleneck: " + Field(bottleneck, "summary") + "\n";
  if (profile.contains("time_basis")) {
    out += "time basis: " + Field(profile, "time_basis") + "; coverage " + Percent(profile.value("coverage", json())) +
           "\n";
  }
  if (profile.contains("by_bound") && profile["by_bound"].is_object()) {
    out += "by bound:";
    for (const auto& [bound, share] : profile["by_bound"].items()) out += "  " + bound + " " + Percent(share);
    out += "\n";
  }
  if (profile.contains("top_operators") && profile["top_operators"].is_array()) {
    out += "top operators:\n";
    int shown = 0;
    for (const json& op : profile["top_operators"]) {
      if (!op.is_object() || ++shown > 8) break;
      char line[256];
      std::snprintf(line, sizeof line, "  %-36s %-14s %7s\n", Field(op, "name").substr(0, 36).c_str(),
                    Field(op, "class").c_str(), Percent(op.value("share", json())).c_str());
      out += line;
    }
  }
  if (profile.contains("error")) out += "profile error: " + Field(profile, "error") + "\n";
  const std::string trace = Field(profile, "trace").empty() ? Field(profile, "report") : Field(profile, "trace");
  if (!trace.empty()) {
    const std::string name = trace.substr(trace.find_last_of('/') + 1);
    out += "trace: frontier artifacts " + experiment_id + " --trial " + run_id + " --get " + name +
           "  (written at " + Field(profile, "host") + ":" + trace + ")\n";
  }
  return out;
}

int Profile(Client& client, const std::string& experiment_id, const ProfileOptions& options) {
  v1::ProfileTrialRequest req;
  req.set_experiment_id(experiment_id);
  req.set_trial_id(options.trial);
  req.set_steps(options.steps);
  req.set_tool(options.tool);
  v1::ProfileTrialResponse queued;
  grpc::Status s = client.stub().ProfileTrial(client.Context().get(), req, &queued);
  if (!s.ok()) return client.Failure(s, "profile " + options.trial);
  const std::string run = queued.run().id();
  std::cerr << "profile run " << run << " of " << options.trial << " queued (" << options.steps << " steps, "
            << options.tool << "); waiting up to " << options.timeout_s << " s for a worker\n";
  v1::GetTrialRequest get;
  get.set_experiment_id(experiment_id);
  get.set_trial_id(run);
  v1::Trial trial = queued.run();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeout_s);
  for (;;) {
    if (trial.state() != v1::TRIAL_PENDING && trial.state() != v1::TRIAL_RUNNING) break;
    if (std::chrono::steady_clock::now() >= give_up) {
      std::cerr << "frontier: profile run " << run << " is still "
                << (trial.state() == v1::TRIAL_PENDING ? "waiting for a worker" : "running") << " after "
                << options.timeout_s << " s; it stays queued: `frontier artifacts " << experiment_id << " --trial "
                << run << "` shows its trace once it ran\n";
      return kCliFailed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    s = client.stub().GetTrial(client.Context().get(), get, &trial);
    if (!s.ok()) return client.Failure(s, "profile run " + run);
  }
  if (trial.state() != v1::TRIAL_COMPLETED) {
    std::cerr << "frontier: profile run " << run << " ended " << v1::TrialState_Name(trial.state()) << ": "
              << trial.error() << "\n";
    return kCliFailed;
  }
  const json result = json::parse(trial.result_json(), nullptr, /*allow_exceptions=*/false);
  v1::ListArtifactsRequest list;
  list.set_experiment_id(experiment_id);
  list.set_trial_id(run);
  v1::ListArtifactsResponse artifacts;
  const bool listed = client.stub().ListArtifacts(client.Context().get(), list, &artifacts).ok();
  if (options.output == "json") {
    json out = {{"run", run},
                {"profile_of", options.trial},
                {"profile", result.value("profile", json())},
                {"bottleneck", result.value("bottleneck", json())},
                {"artifacts", json::array()}};
    for (const auto& a : artifacts.artifacts()) out["artifacts"].push_back({{"name", a.name()}, {"size", a.size()}});
    std::cout << out.dump(2) << "\n";
    return kCliOk;
  }
  std::cout << ProfileSummary(experiment_id, run, result.is_object() ? result : json::object());
  if (listed && artifacts.artifacts_size() > 0) {
    std::cout << "artifacts (frontier artifacts " << experiment_id << " --trial " << run << "):\n";
    for (const auto& a : artifacts.artifacts()) std::cout << "  " << a.name() << "  " << a.size() << "\n";
  }
  return kCliOk;
}

}  // namespace frontier
