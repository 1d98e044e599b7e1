// What every trial of a space starts from: the `baseline` (arch and runtime
// of frontier-trial's networks, with the top-level task, profile and
// latency) or the `trial` command (docs/byo-model.md), the paths in them
// resolved against the space file's folder (InSpaceFolder), and the check
// that the result is a valid trial spec (CheckBaseline).
#include "search_spaces/space_parser.h"

#include <filesystem>

namespace frontier::space_reading {

void SpaceParser::ParseBaseline(const Fields& top, SearchSpace& space) {
  json task = json::object();
  if (top.Has("task")) {
    task = top.Value("task");
    if (!task.is_object()) {
      Fail("task", "expected a mapping of trial-spec task fields, got " + Describe(task));
    }
  }
  if (top.Has("trial") && top.Has("baseline")) {
    Fail("trial", "a space has either a baseline (frontier-trial's networks) or a trial command, not both");
  }
  if (top.Has("trial")) {
    ParseCommandTrial(top, task, space);
    return;
  }
  Fields baseline(*this, top.Required("baseline"), "baseline", {"arch", "runtime"});
  json arch = YamlToJson(baseline.Required("arch"));
  json runtime = baseline.Has("runtime") ? baseline.Value("runtime") : json::object();
  if (runtime.is_object() && runtime.contains("plugins") && runtime["plugins"].is_array()) {
    for (json& plugin : runtime["plugins"]) {  // the trial spec's validation checks the rest
      if (plugin.is_string() && !plugin.get<std::string>().empty()) plugin = InSpaceFolder(plugin);
    }
  }
  space.base = {{"schema", kTrialSpecSchema}, {"task", task}, {"arch", arch}, {"runtime", runtime}};
  // Profiling (docs/profiling.md) and latency (docs/trial-output.md) depend on the configuration:
  // seed 1 of each measures them unless the section says `seeds: all`.
  ParseProfileSection(top, "{steps: 3}", space);
  if (top.Has("latency")) {
    json latency = top.Value("latency");
    if (!latency.is_object()) Fail("latency", "expected a mapping like {batch_size: 8}, got " + Describe(latency));
    space.latency_every_seed = EverySeed(latency, "latency");
    space.base["latency"] = latency;
  }
  ParseDeploySection(top, space);
}

// The space's `profile` section, the trial spec's for seed 1 of every configuration (every seed with
// `seeds: all`): `off` (or false) is `{steps: 0}`. `example` names the mappings the error suggests.
void SpaceParser::ParseProfileSection(const Fields& top, const std::string& example, SearchSpace& space) const {
  if (!top.Has("profile")) return;
  json profile = top.Value("profile");
  if (profile == false || profile == "off") profile = {{"steps", 0}};
  if (!profile.is_object()) Fail("profile", "expected a mapping like " + example + " or off, got " + Describe(profile));
  space.profile_every_seed = EverySeed(profile, "profile");
  space.base["profile"] = profile;
}

// A section's `seeds` (the space's, not the trial spec's: which seeds of a configuration measure
// it): `first` (seed 1, the default) or `all`; true for `all`. Removes it from the section.
bool SpaceParser::EverySeed(json& section, const std::string& name) const {
  if (!section.contains("seeds")) return false;
  const json seeds = section["seeds"];
  if (seeds != "first" && seeds != "all") {
    Fail(name + ".seeds", "expected first (seed 1 of each configuration, the default) or all, got " + Describe(seeds));
  }
  section.erase("seeds");
  return seeds == "all";
}

// Onboard inference (docs/trial-output.md, Deploy) of every trial: every seed, as the parity of its int8
// quality against its float quality is paired over seeds. A command trial's program measures it with
// the SDK's measure_deploy (docs/byo-model.md).
void SpaceParser::ParseDeploySection(const Fields& top, SearchSpace& space) const {
  if (!top.Has("deploy")) return;
  const json deploy = top.Value("deploy");
  if (!deploy.is_object()) Fail("deploy", "expected a mapping like {formats: [float, int8]}, got " + Describe(deploy));
  space.base["deploy"] = deploy;
}

// `path` made absolute against the space file's folder (an absolute path as
// given), normalized, without a trailing slash.
std::string SpaceParser::InSpaceFolder(const std::string& path) const {
  namespace fs = std::filesystem;
  std::error_code ignored;
  const fs::path resolved = fs::path(path).is_absolute() ? fs::path(path) : fs::path(source_).parent_path() / path;
  std::string absolute = fs::absolute(resolved, ignored).lexically_normal().string();
  if (absolute.size() > 1 && absolute.back() == '/') absolute.pop_back();
  return absolute;
}

// A command trial (docs/byo-model.md): `trial: {command: [argv...], workdir,
// params, time_limit_s, runtime}`; the workdir is resolved against the space
// file's folder.
void SpaceParser::ParseCommandTrial(const Fields& top, const json& task, SearchSpace& space) {
  Fields trial(*this, top.Get("trial"), "trial", {"command", "workdir", "params", "time_limit_s", "runtime"});
  const json argv = YamlToJson(trial.Required("command"));
  if (!argv.is_array() || argv.empty()) {
    Fail("trial.command", "expected the program and its arguments as a list, e.g. [/usr/bin/python3, train.py]");
  }
  std::string workdir = ".";
  trial.String("workdir", workdir);
  json params = trial.Has("params") ? trial.Value("params") : json::object();
  if (!params.is_object()) Fail("trial.params", "expected a mapping of the program's parameters, got " + Describe(params));
  json command = {{"argv", argv}, {"workdir", InSpaceFolder(workdir)}};
  if (std::optional<double> limit = trial.Number("time_limit_s")) command["time_limit_s"] = *limit;
  json runtime = trial.Has("runtime") ? trial.Value("runtime") : json::object();
  space.base = {{"schema", kTrialSpecSchema}, {"protocol", kTrialProtocol}, {"params", params},
                {"task", task},               {"runtime", runtime},           {"command", command}};
  // The SDK profiles a few steps in-process unless the space says `profile: off`; nsys/ncu wrap the
  // command as they wrap frontier-trial (docs/profiling.md).
  ParseProfileSection(top, "{steps: 3}, {tool: nsys}", space);
  ParseDeploySection(top, space);
}

// The baseline must be a valid trial spec; its errors point at the field in
// the file (task fields live at the top level, arch and runtime under baseline,
// or for a command trial params, command and runtime under trial).
void SpaceParser::CheckBaseline(const SearchSpace& space) const {
  try {
    ParseTrialSpec(space.base);
  } catch (const SpecError& e) {
    const std::string section = space.base.contains("command") ? "trial" : "baseline";
    std::string field = StartsWith(e.path(), "task") ? e.path() : ChildPath(section, e.path());
    Fail(field, Problem(e));
  }
}

}  // namespace frontier::space_reading
