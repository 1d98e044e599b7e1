// Trial specs (trial_spec.h): reading the task, runtime, profile and latency
// sections and a command trial's spec, ParseTrialSpec over them all (the
// arch section is trial_spec_arch.cc's), SpecError, and ToJson: the spec
// written back with every default filled in.
#include "search_spaces/trial_spec.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "search_spaces/input_bounds.h"
#include "search_spaces/object_reader.h"
#include "search_spaces/trial_spec_arch.h"

namespace frontier {
namespace {

using nlohmann::json;
using spec_reading::ObjectReader;
using spec_reading::ParseArch;

constexpr int kMaxInt = 1 << 30;

void ParseOptimizer(const json& j, const std::string& path, OptimizerSpec& o) {
  ObjectReader r(j, path);
  r.Choice("name", o.name, {"sgd", "adamw"});
  if (o.name == "adamw" && !r.Has("weight_decay")) o.weight_decay = 0.05;
  if (o.name == "adamw" && !r.Has("lr")) o.lr = 1e-3;
  r.Double("lr", o.lr, 0, 100);
  r.Double("momentum", o.momentum, 0, 1);
  r.Bool("nesterov", o.nesterov);
  r.Double("weight_decay", o.weight_decay, 0, 10);
  r.Double("beta1", o.beta1, 0, 1);
  r.Double("beta2", o.beta2, 0, 1);
  r.RejectUnknown();
  if (o.nesterov && (o.name != "sgd" || o.momentum <= 0)) {
    throw SpecError(r.Field("nesterov"), "needs optimizer sgd with momentum > 0");
  }
}

void ParseBevTask(const json& j, BevTaskSpec& b);

TargetSpec ParseTarget(const json& j) {
  TargetSpec target;
  ObjectReader r(j, "task.target");
  r.Choice("metric", target.metric, {"val_accuracy", "val_iou", "val_loss"});
  r.Double("value", target.value, -1e9, 1e9);
  r.RejectUnknown();
  return target;
}

void ParseTask(const json& j, TaskSpec& t) {
  ObjectReader r(j, "task");
  r.Choice("dataset", t.dataset, {"fashion-mnist", "synthetic", "bev-synthetic"});
  r.String("data_dir", t.data_dir);
  if (const json* in = r.Get("input")) {
    if (t.dataset != "synthetic") throw SpecError("task.input", "only the synthetic dataset takes an input shape");
    ObjectReader ir(*in, "task.input");
    ir.Int("channels", t.input.channels, 1, 64);
    ir.Int("height", t.input.height, 1, 4096);
    ir.Int("width", t.input.width, 1, 4096);
    ir.Int("classes", t.input.classes, 2, 100000);
    ir.RejectUnknown();
  }
  r.Int("batch_size", t.batch_size, 1, 1 << 16);
  r.Int("steps", t.steps, 1, kMaxInt);
  r.Int("eval_every", t.eval_every, 0, kMaxInt);
  r.Int("warmup_steps", t.warmup_steps, 0, kMaxInt);
  r.Int("val_size", t.val_size, 1, 59000);
  r.Int("test_size", t.test_size, 1, 10000);
  if (const json* b = r.Get("bev")) {
    if (t.dataset != "bev-synthetic") throw SpecError("task.bev", "only the bev-synthetic dataset takes a bev section");
    ParseBevTask(*b, t.bev);
  }
  if (const json* a = r.Get("augment")) {
    ObjectReader ar(*a, "task.augment");
    ar.Bool("flip", t.augment.flip);
    ar.Int("crop_padding", t.augment.crop_padding, 0, 64);
    ar.RejectUnknown();
  }
  if (const json* o = r.Get("optimizer")) ParseOptimizer(*o, "task.optimizer", t.optimizer);
  if (const json* s = r.Get("schedule")) {
    ObjectReader sr(*s, "task.schedule");
    sr.Choice("name", t.schedule.name, {"cosine", "constant"});
    sr.Int("warmup", t.schedule.warmup, 0, kMaxInt);
    sr.Double("min_lr", t.schedule.min_lr, 0, 100);
    sr.RejectUnknown();
  }
  r.Double("grad_clip", t.grad_clip, 0, 1e9);
  if (const json* g = r.Get("target")) t.target = ParseTarget(*g);
  r.RejectUnknown();
  const bool bev = t.dataset == "bev-synthetic";
  if (bev && (t.augment.flip || t.augment.crop_padding > 0)) {
    throw SpecError("task.augment", "bev-synthetic takes no augmentation (it would break the camera geometry)");
  }
  if (t.target && (t.target->metric == "val_iou") != bev && t.target->metric != "val_loss") {
    throw SpecError("task.target.metric", bev ? "bev-synthetic reports val_iou, not val_accuracy"
                                              : "val_iou is the metric of bev-synthetic only");
  }
  if (t.warmup_steps >= t.steps) {
    throw SpecError("task.warmup_steps", "must be below task.steps (" + std::to_string(t.steps) +
                                             ") so that some steps are measured");
  }
}

void ParseBevTask(const json& j, BevTaskSpec& b) {
  ObjectReader r(j, "task.bev");
  r.Int("cameras", b.cameras, 1, 12);
  r.Int("height", b.height, 8, 1024);
  r.Int("width", b.width, 8, 2048);
  r.Double("fov_deg", b.fov_deg, 0, 170);
  r.Int("grid", b.grid, 4, 1024);
  r.Double("resolution", b.resolution, 0.05, 10);
  r.Int("max_boxes", b.max_boxes, 0, 200);
  r.Int("train_samples", b.train_samples, 1, 1 << 22);
  r.Int("val_samples", b.val_samples, 1, 1 << 22);
  r.Int("test_samples", b.test_samples, 1, 1 << 22);
  r.Int64("data_seed", b.data_seed, 0, INT64_MAX);
  r.Double("noise", b.noise, 0, 1);
  r.RejectUnknown();
}

void ParseRuntime(const json& j, RuntimeSpec& rt) {
  ObjectReader r(j, "runtime");
  r.Enum("precision", rt.precision);
  r.Enum("memory_format", rt.memory_format);
  r.Int("threads", rt.threads, 0, 1024);
  r.String("device", rt.device);
  r.Int("ranks", rt.ranks, 1, 1024);
  r.Int("nodes", rt.nodes, 1, 1024);
  r.Enum("batch_policy", rt.batch_policy);
  r.Double("bucket_cap_mb", rt.bucket_cap_mb, 0.001, 65536);
  r.Bool("overlap", rt.overlap);
  r.Int("spot_checks", rt.spot_checks, 0, 64);
  if (const json* p = r.Get("plugins")) {
    if (!p->is_array() || p->size() > kMaxPlugins) {
      throw SpecError("runtime.plugins", "expected a list of at most " + std::to_string(kMaxPlugins) +
                                             " shared-library paths");
    }
    for (size_t i = 0; i < p->size(); ++i) {
      const std::string field = "runtime.plugins[" + std::to_string(i) + "]";
      if (!(*p)[i].is_string() || (*p)[i].get<std::string>().empty()) {
        throw SpecError(field, "expected the path of a plugin's shared library");
      }
      rt.plugins.push_back((*p)[i].get<std::string>());
    }
  }
  r.RejectUnknown();
  if (rt.nodes > rt.ranks) {
    throw SpecError("runtime.nodes", "is " + std::to_string(rt.nodes) + " but runtime.ranks is " +
                                         std::to_string(rt.ranks) + ": every node runs at least one rank");
  }
  const std::string& d = rt.device;
  bool cuda_n = d.rfind("cuda:", 0) == 0 && d.size() > 5 &&
                std::all_of(d.begin() + 5, d.end(), [](char c) { return std::isdigit(c); });
  if (d != "auto" && d != "cpu" && d != "cuda" && !cuda_n) {
    throw SpecError("runtime.device", "unknown device '" + d + "'; expected auto, cpu, cuda or cuda:N");
  }
}

// A section without `steps` profiles kDefaultProfileSteps steps with the
// in-process profiler, none when it names nsys or ncu (they wrap the whole
// process; steps only narrow what they record).
void ParseProfile(const json& j, const TaskSpec& task, ProfileSpec& p) {
  ObjectReader r(j, "profile");
  p.steps = -1;
  r.Int("steps", p.steps, 0, 10000);
  r.Int("start", p.start, -1, kMaxInt);
  r.Choice("tool", p.tool, {"libtorch", "nsys", "ncu"});
  r.RejectUnknown();
  if (p.steps < 0) p.steps = p.tool == "libtorch" ? kDefaultProfileSteps : 0;
  if (p.steps > task.steps) {
    throw SpecError("profile.steps", "profiles " + std::to_string(p.steps) + " steps but the trial runs only " +
                                         std::to_string(task.steps) + " steps");
  }
  if (p.start >= 0 && p.steps > 0 && p.start + p.steps > task.steps) {
    throw SpecError("profile.steps", "profiles steps " + std::to_string(p.start) + ".." +
                                         std::to_string(p.start + p.steps - 1) + " but the trial runs only " +
                                         std::to_string(task.steps) + " steps");
  }
}

// The kernel lab's op calls of a command trial: at most 64, each an op name
// and up to 8 input shapes of up to 8 dimensions, 2^28 elements an input.
std::vector<LabOpCall> ParseLabOpCalls(const json& j) {
  if (!j.is_array() || j.size() > 64) throw SpecError("op_calls", "expected a list of at most 64 op calls");
  std::vector<LabOpCall> calls;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = "op_calls[" + std::to_string(i) + "]";
    const json& c = j[i];
    if (!c.is_object() || !c.contains("op") || !c["op"].is_string() || !c.contains("shapes") ||
        !c["shapes"].is_array() || c["shapes"].empty() || c["shapes"].size() > 8 || c.size() != 2) {
      throw SpecError(at, "expected {op: NAME, shapes: [[...], ...]} with 1 to 8 input shapes");
    }
    LabOpCall call;
    call.op = c["op"].get<std::string>();
    if (call.op.empty() || call.op.size() > 64) throw SpecError(at + ".op", "expected an op name");
    for (const json& shape : c["shapes"]) {
      if (!shape.is_array() || shape.empty() || shape.size() > 8) {
        throw SpecError(at + ".shapes", "expected shapes of 1 to 8 dimensions");
      }
      std::vector<int64_t> dims;
      double elements = 1;
      for (const json& d : shape) {
        if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > (1 << 20)) {
          throw SpecError(at + ".shapes", "expected dimensions in [1, 2^20]");
        }
        dims.push_back(d.get<int64_t>());
        elements *= static_cast<double>(dims.back());
      }
      if (elements > static_cast<double>(int64_t{1} << 28)) {
        throw SpecError(at + ".shapes", "an input of more than 2^28 elements");
      }
      call.shapes.push_back(std::move(dims));
    }
    calls.push_back(std::move(call));
  }
  return calls;
}

void ParseLatency(const json& j, LatencySpec& l) {
  ObjectReader r(j, "latency");
  r.Int("batch_size", l.batch_size, 0, 65536);
  r.Int("repetitions", l.repetitions, 0, 100000);
  r.Int("warmup", l.warmup, 0, 10000);
  r.RejectUnknown();
}

std::string QuotedJson(const json& v) { return Abbreviated(v.dump(), kMaxQuotedBytes); }

// A list of 1..kMaxDeploySettings distinct integers in [min, max].
std::vector<int> DeployInts(const json& j, const std::string& path, int min, int max) {
  if (!j.is_array() || j.empty() || j.size() > static_cast<size_t>(kMaxDeploySettings)) {
    throw SpecError(path, "expected a list of 1 to " + std::to_string(kMaxDeploySettings) + " integers, e.g. [1, 8]");
  }
  std::vector<int> out;
  for (const json& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) {
      throw SpecError(path, "expected integers in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
                                QuotedJson(v));
    }
    if (std::find(out.begin(), out.end(), v.get<int>()) != out.end()) {
      throw SpecError(path, QuotedJson(v) + " is listed twice");
    }
    out.push_back(v.get<int>());
  }
  return out;
}

void ParseDeploy(const json& j, DeploySpec& d) {
  ObjectReader r(j, "deploy");
  d.enabled = true;
  if (const json* f = r.Get("formats")) {
    if (!f->is_array() || f->empty() || f->size() > std::size(kDeployFormats)) {
      throw SpecError("deploy.formats", "expected a list of formats, e.g. [float, int8]");
    }
    d.formats.clear();
    for (const json& v : *f) {
      const std::string name = v.is_string() ? v.get<std::string>() : "";
      if (std::find(std::begin(kDeployFormats), std::end(kDeployFormats), name) == std::end(kDeployFormats)) {
        throw SpecError("deploy.formats",
                        "format " + QuotedJson(v) +
                            " is not in this build: it measures float (fp32, batch norms folded, inference mode), "
                            "torchscript (that network traced into a TorchScript graph) and int8 (post-training "
                            "static quantization); ONNX Runtime and TensorRT are not installed");
      }
      if (std::find(d.formats.begin(), d.formats.end(), name) != d.formats.end()) {
        throw SpecError("deploy.formats", QuotedJson(v) + " is listed twice");
      }
      d.formats.push_back(name);
    }
  }
  if (const json* b = r.Get("batch")) d.batch = DeployInts(*b, "deploy.batch", 1, 4096);
  if (const json* t = r.Get("threads")) d.threads = DeployInts(*t, "deploy.threads", 1, 256);
  if (r.Has("engine")) r.Choice("engine", d.engine, {"onednn", "qnnpack"});
  r.Int("calibration_batches", d.calibration_batches, 1, 1000);
  r.Int("repetitions", d.repetitions, 1, 100000);
  r.Int("warmup", d.warmup, 0, 10000);
  r.RejectUnknown();
}

}  // namespace

SpecError::SpecError(std::string path, const std::string& problem)
    : std::runtime_error(Abbreviated(path.empty() ? problem : path + ": " + problem, 5 * kMaxQuotedBytes)),
      path_(std::move(path)) {}

namespace {

// A command trial's spec: {schema, protocol, trial_id, seed, params, task:
// {steps, eval_every, warmup_steps, target}, runtime, command: {argv, workdir,
// time_limit_s}}.
TrialSpec ParseCommandTrialSpec(const json& j) {
  TrialSpec spec;
  ObjectReader r(j, "");
  r.Int("schema", spec.schema, kTrialSpecSchema, kTrialSpecSchema);
  int protocol = kTrialProtocol;
  r.Int("protocol", protocol, kTrialProtocol, kTrialProtocol);
  r.String("trial_id", spec.trial_id);
  r.Int64("seed", spec.seed, 0, INT64_MAX);
  if (const json* p = r.Get("params")) {
    if (!p->is_object()) throw SpecError("params", "expected an object of the program's parameters");
    spec.params = *p;
  }
  if (const json* t = r.Get("task")) {
    ObjectReader tr(*t, "task");
    tr.Int("steps", spec.task.steps, 1, kMaxInt);
    tr.Int("eval_every", spec.task.eval_every, 0, kMaxInt);
    tr.Int("warmup_steps", spec.task.warmup_steps, 0, kMaxInt);
    if (const json* g = tr.Get("target")) spec.task.target = ParseTarget(*g);
    if (!tr.Unknown().empty()) {
      throw SpecError("task." + tr.Unknown(), "a command trial's task has steps, eval_every, warmup_steps and "
                                              "target only; put the program's own settings in params");
    }
  }
  if (spec.task.warmup_steps >= spec.task.steps) {
    throw SpecError("task.warmup_steps", "must be below task.steps (" + std::to_string(spec.task.steps) +
                                             ") so that some steps are measured");
  }
  if (const json* rt = r.Get("runtime")) ParseRuntime(*rt, spec.runtime);
  if (!spec.runtime.plugins.empty()) {
    throw SpecError("runtime.plugins", "plugins are loaded by frontier-trial (docs/plugins.md); a trial command "
                                       "loads its own code");
  }
  if (spec.runtime.ranks > 1) {
    throw SpecError("runtime.ranks", "data-parallel ranks are frontier-trial's (docs/distributed.md); a trial "
                                     "command runs as one process and starts its own ranks if it has any");
  }
  ObjectReader cr(*r.Get("command"), "command");
  spec.command.enabled = true;
  const json* argv = cr.Get("argv");
  if (argv == nullptr || !argv->is_array() || argv->empty()) {
    throw SpecError("command.argv", "expected a non-empty list of strings (the program and its arguments)");
  }
  for (size_t i = 0; i < argv->size(); ++i) {
    const json& arg = (*argv)[i];
    if (!arg.is_string() || arg.get<std::string>().empty() || arg.get<std::string>().find('\0') != std::string::npos) {
      throw SpecError("command.argv[" + std::to_string(i) + "]", "expected a non-empty string");
    }
    spec.command.argv.push_back(arg.get<std::string>());
  }
  cr.String("workdir", spec.command.workdir);
  if (!spec.command.workdir.empty() && spec.command.workdir.front() != '/') {
    throw SpecError("command.workdir", "must be an absolute path (the space file's folder is resolved at submission)");
  }
  cr.Double("time_limit_s", spec.command.time_limit_s, 0, 1e7);
  cr.RejectUnknown();
  // A command is profiled in-process by the Python SDK (libtorch: torch's profiler, the default) or by
  // wrapping it (nsys/ncu); a program without the SDK ignores the section.
  spec.latency.repetitions = 0;  // the program measures its own (frontier_trial's measure_latency)
  if (const json* p = r.Get("profile")) ParseProfile(*p, spec.task, spec.profile);
  if (spec.profile.tool == "libtorch" && spec.profile.steps > spec.task.steps) spec.profile.steps = 0;
  if (const json* calls = r.Get("op_calls")) spec.op_calls = ParseLabOpCalls(*calls);
  if (const json* d = r.Get("deploy")) ParseDeploy(*d, spec.deploy);  // the SDK's measure_deploy reads it
  r.RejectUnknown();
  return spec;
}

}  // namespace

TrialSpec ParseTrialSpec(const json& j) {
  if (j.is_object() && j.contains("command")) return ParseCommandTrialSpec(j);
  TrialSpec spec;
  ObjectReader r(j, "");
  r.Int("schema", spec.schema, 1, 1000);
  if (spec.schema != kTrialSpecSchema) {
    throw SpecError("schema", "unsupported trial spec schema " + std::to_string(spec.schema) +
                                  "; this build reads schema " + std::to_string(kTrialSpecSchema));
  }
  r.String("trial_id", spec.trial_id);
  r.Int64("seed", spec.seed, 0, INT64_MAX);
  if (const json* t = r.Get("task")) ParseTask(*t, spec.task);
  const json* arch = r.Get("arch");
  if (!arch) throw SpecError("arch", "missing");
  // The runtime first: its plugins decide which names the arch may use.
  if (const json* rt = r.Get("runtime")) ParseRuntime(*rt, spec.runtime);
  {
    bool& allowed = ObjectReader::PluginNamesAllowed();
    allowed = !spec.runtime.plugins.empty();
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{allowed};
    ParseArch(*arch, spec.arch);
  }
  if (const json* p = r.Get("profile")) ParseProfile(*p, spec.task, spec.profile);
  if (const json* l = r.Get("latency")) ParseLatency(*l, spec.latency);
  if (const json* d = r.Get("deploy")) ParseDeploy(*d, spec.deploy);
  r.RejectUnknown();
  const bool bev_task = spec.task.dataset == "bev-synthetic";
  if (bev_task && !spec.arch.bev.enabled) throw SpecError("arch.bev", "the bev-synthetic dataset needs an arch.bev section");
  if (!bev_task && spec.arch.bev.enabled) throw SpecError("arch.bev", "only the bev-synthetic dataset takes a bev section");
  ResolveArch(spec.arch, spec.task);  // shape-dependent checks
  if (spec.runtime.ranks > spec.task.batch_size && spec.runtime.batch_policy == BatchPolicy::kSplitGlobal) {
    throw SpecError("runtime.ranks", std::to_string(spec.runtime.ranks) + " ranks cannot split a global batch of " +
                                         std::to_string(spec.task.batch_size) +
                                         " (task.batch_size): every rank needs a row; lower the ranks or use "
                                         "batch_policy fixed_per_rank");
  }
  return spec;
}

TrialSpec ParseTrialSpecText(const std::string& text) {
  json j;
  try {
    j = ParseBoundedJson(text, kMaxTrialSpecBytes);
  } catch (const InputError& e) {
    throw SpecError("", e.what());
  }
  return ParseTrialSpec(j);
}

TrialSpec LoadTrialSpecFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw SpecError("", "cannot open trial spec file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return ParseTrialSpecText(ss.str());
  } catch (const SpecError& e) {
    throw SpecError(e.path(), std::string(e.what()).substr(e.path().empty() ? 0 : e.path().size() + 2) +
                                  " (in " + path + ")");
  }
}

static json StagesJson(const std::vector<StageSpec>& list) {
  json stages = json::array();
  for (const StageSpec& st : list) {
    stages.push_back({{"block", st.block},
                      {"width", st.width},
                      {"depth", st.depth},
                      {"stride", st.stride},
                      {"kernel", st.kernel},
                      {"expansion", st.expansion},
                      {"se", st.se},
                      {"attention",
                       {{"kind", st.attention.kind},
                        {"heads", st.attention.heads},
                        {"head_dim", st.attention.head_dim},
                        {"kv_heads", st.attention.kv_heads},
                        {"window", st.attention.window},
                        {"blocks", st.attention.blocks}}},
                      {"moe",
                       {{"experts", st.moe.experts},
                        {"top_k", st.moe.top_k},
                        {"capacity_factor", st.moe.capacity_factor},
                        {"aux_loss_weight", st.moe.aux_loss_weight}}}});
  }
  return stages;
}

static json RuntimeJson(const RuntimeSpec& r) {
  json j = {{"precision", r.precision},       {"memory_format", r.memory_format}, {"threads", r.threads},
            {"device", r.device},             {"ranks", r.ranks},                 {"nodes", r.nodes},
            {"batch_policy", r.batch_policy}, {"bucket_cap_mb", r.bucket_cap_mb}, {"overlap", r.overlap},
            {"spot_checks", r.spot_checks}};
  if (!r.plugins.empty()) j["plugins"] = r.plugins;
  return j;
}

static json ProfileJson(const ProfileSpec& p) { return {{"steps", p.steps}, {"start", p.start}, {"tool", p.tool}}; }

static json LatencyJson(const LatencySpec& l) {
  return {{"batch_size", l.batch_size}, {"repetitions", l.repetitions}, {"warmup", l.warmup}};
}

static json DeployJson(const DeploySpec& d) {
  json out = {{"formats", d.formats},
              {"batch", d.batch},
              {"threads", d.threads},
              {"calibration_batches", d.calibration_batches},
              {"repetitions", d.repetitions},
              {"warmup", d.warmup}};
  if (!d.engine.empty()) out["engine"] = d.engine;
  return out;
}

json ToJson(const TrialSpec& s) {
  if (s.command.enabled) {
    json task = {{"steps", s.task.steps}, {"eval_every", s.task.eval_every}, {"warmup_steps", s.task.warmup_steps}};
    if (s.task.target) task["target"] = {{"metric", s.task.target->metric}, {"value", s.task.target->value}};
    json command = {{"argv", s.command.argv}, {"time_limit_s", s.command.time_limit_s}};
    if (!s.command.workdir.empty()) command["workdir"] = s.command.workdir;
    json out = {{"schema", s.schema},
            {"protocol", kTrialProtocol},
            {"trial_id", s.trial_id},
            {"seed", s.seed},
            {"params", s.params},
            {"task", task},
            {"runtime", RuntimeJson(s.runtime)},
            {"command", command}};
    out["profile"] = ProfileJson(s.profile);
    if (!s.op_calls.empty()) {
      json calls = json::array();
      for (const LabOpCall& c : s.op_calls) calls.push_back({{"op", c.op}, {"shapes", c.shapes}});
      out["op_calls"] = calls;
    }
    if (s.deploy.enabled) out["deploy"] = DeployJson(s.deploy);
    return out;
  }
  const json stages = StagesJson(s.arch.stages);
  const TaskSpec& t = s.task;
  json task = {{"dataset", t.dataset},
               {"batch_size", t.batch_size},
               {"steps", t.steps},
               {"eval_every", t.eval_every},
               {"warmup_steps", t.warmup_steps},
               {"val_size", t.val_size},
               {"test_size", t.test_size},
               {"augment", {{"flip", t.augment.flip}, {"crop_padding", t.augment.crop_padding}}},
               {"optimizer",
                {{"name", t.optimizer.name},
                 {"lr", t.optimizer.lr},
                 {"momentum", t.optimizer.momentum},
                 {"nesterov", t.optimizer.nesterov},
                 {"weight_decay", t.optimizer.weight_decay},
                 {"beta1", t.optimizer.beta1},
                 {"beta2", t.optimizer.beta2}}},
               {"schedule", {{"name", t.schedule.name}, {"warmup", t.schedule.warmup}, {"min_lr", t.schedule.min_lr}}},
               {"grad_clip", t.grad_clip}};
  if (!t.data_dir.empty()) task["data_dir"] = t.data_dir;
  if (t.dataset == "synthetic") {
    task["input"] = {{"channels", t.input.channels},
                     {"height", t.input.height},
                     {"width", t.input.width},
                     {"classes", t.input.classes}};
  }
  if (t.target) task["target"] = {{"metric", t.target->metric}, {"value", t.target->value}};
  if (t.dataset == "bev-synthetic") {
    const BevTaskSpec& b = t.bev;
    task["bev"] = {{"cameras", b.cameras},         {"height", b.height},
                   {"width", b.width},             {"fov_deg", b.fov_deg},
                   {"grid", b.grid},               {"resolution", b.resolution},
                   {"max_boxes", b.max_boxes},     {"train_samples", b.train_samples},
                   {"val_samples", b.val_samples}, {"test_samples", b.test_samples},
                   {"data_seed", b.data_seed},     {"noise", b.noise}};
  }
  json out = {{"schema", s.schema},
          {"trial_id", s.trial_id},
          {"seed", s.seed},
          {"task", task},
          {"arch",
           {{"stem",
             {{"kind", s.arch.stem.kind},
              {"width", s.arch.stem.width},
              {"stride", s.arch.stem.stride},
              {"depth", s.arch.stem.depth}}},
            {"stages", stages},
            {"norm", s.arch.norm},
            {"norm_groups", s.arch.norm_groups},
            {"activation", s.arch.activation},
            {"width_mult", s.arch.width_mult},
            {"depth_mult", s.arch.depth_mult},
            {"dropout", s.arch.dropout},
            {"ops", {{"attention_kernel", s.arch.ops.attention_kernel}}}}},
          {"runtime", RuntimeJson(s.runtime)},
          {"profile", ProfileJson(s.profile)},
          {"latency", LatencyJson(s.latency)}};
  if (s.deploy.enabled) out["deploy"] = DeployJson(s.deploy);
  if (s.arch.bev.enabled) {
    const BevArchSpec& b = s.arch.bev;
    out["arch"]["bev"] = {{"view_transform", b.view_transform},
                          {"pooling", b.pooling},
                          {"depth_bins", b.depth_bins},
                          {"depth_min", b.depth_min},
                          {"depth_max", b.depth_max},
                          {"channels", b.channels},
                          {"heights", b.heights},
                          {"max_height", b.max_height},
                          {"depth_loss_weight", b.depth_loss_weight},
                          {"neck", b.neck},
                          {"neck_levels", b.neck_levels},
                          {"neck_channels", b.neck_channels},
                          {"neck_repeats", b.neck_repeats},
                          {"encoder", StagesJson(b.encoder)}};
  }
  return out;
}

}  // namespace frontier
