#include "search_spaces/trial_spec.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "search_spaces/input_bounds.h"

namespace frontier {
namespace {

using nlohmann::json;

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

// Reads the fields of one JSON object, remembering which it consumed so that
// unknown (misspelled) keys are reported instead of ignored.
class ObjectReader {
 public:
  ObjectReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) throw SpecError(path_, "expected an object, got " + std::string(j_.type_name()));
  }

  std::string Field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool Has(const std::string& key) const { return j_.contains(key); }

  const json* Get(const std::string& key) {
    seen_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }

  void Int(const std::string& key, int& out, int min, int max) {
    if (const json* v = Get(key)) out = static_cast<int>(CheckedInteger(*v, key, min, max));
  }
  void Int64(const std::string& key, int64_t& out, int64_t min, int64_t max) {
    if (const json* v = Get(key)) out = CheckedInteger(*v, key, min, max);
  }
  void Double(const std::string& key, double& out, double min, double max) {
    const json* v = Get(key);
    if (!v) return;
    if (!v->is_number()) throw SpecError(Field(key), "expected a number");
    double d = v->get<double>();
    if (!std::isfinite(d) || d < min || d > max) {
      std::ostringstream os;
      os << "must be in [" << min << ", " << max << "], got " << d;
      throw SpecError(Field(key), os.str());
    }
    out = d;
  }
  void Bool(const std::string& key, bool& out) {
    const json* v = Get(key);
    if (!v) return;
    if (!v->is_boolean()) throw SpecError(Field(key), "expected true or false");
    out = v->get<bool>();
  }
  void String(const std::string& key, std::string& out) {
    const json* v = Get(key);
    if (!v) return;
    if (!v->is_string()) throw SpecError(Field(key), "expected a string");
    out = v->get<std::string>();
  }
  void Choice(const std::string& key, std::string& out, const std::vector<std::string>& choices) {
    String(key, out);
    if (std::find(choices.begin(), choices.end(), out) == choices.end()) {
      throw SpecError(Field(key), "unknown choice '" + out + "'; expected one of " + Join(choices));
    }
  }
  // A name from one of frontier-trial's registries (stem, block family,
  // attention kind, op variant): one of the built-ins, or, in a spec that
  // loads plugins, any name (a plugin may register it; frontier-trial fails
  // the trial naming it when none did).
  void Kind(const std::string& key, std::string& out, const std::vector<std::string>& builtins) {
    if (!PluginNamesAllowed()) return Choice(key, out, builtins);
    String(key, out);
    if (out.empty() || out.size() > 64) throw SpecError(Field(key), "expected a name of 1 to 64 characters");
  }
  static bool& PluginNamesAllowed() {
    thread_local bool allowed = false;
    return allowed;
  }

  // Call after reading every known field.
  // The first key not read so far, or "".
  std::string Unknown() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!seen_.count(it.key())) return it.key();
    }
    return "";
  }
  void RejectUnknown() const {
    const std::string key = Unknown();
    if (!key.empty()) throw SpecError(Field(key), "unknown field");
  }

 private:
  int64_t CheckedInteger(const json& v, const std::string& key, int64_t min, int64_t max) const {
    if (!v.is_number_integer()) throw SpecError(Field(key), "expected an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      throw SpecError(Field(key), "must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                                      "], got " + v.dump());
    }
    int64_t i = v.get<int64_t>();
    if (i < min || i > max) {
      throw SpecError(Field(key), "must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                                      "], got " + std::to_string(i));
    }
    return i;
  }

  const json& j_;
  std::string path_;
  std::set<std::string> seen_;
};

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

void ParseStage(const json& j, const std::string& path, StageSpec& s);

void ParseBevArch(const json& j, BevArchSpec& b) {
  ObjectReader r(j, "arch.bev");
  b.enabled = true;
  r.Choice("view_transform", b.view_transform, {"lss", "ipm", "mean_lift"});
  r.Kind("pooling", b.pooling, {"naive", "fused", "depth_fused"});
  r.Int("depth_bins", b.depth_bins, 1, 512);
  r.Double("depth_min", b.depth_min, 0.1, 1000);
  r.Double("depth_max", b.depth_max, 0.1, 1000);
  r.Int("channels", b.channels, 1, 4096);
  r.Int("heights", b.heights, 1, 64);
  r.Double("max_height", b.max_height, 0, 100);
  r.Double("depth_loss_weight", b.depth_loss_weight, 0, 1000);
  r.Choice("neck", b.neck, {"none", "fpn", "bifpn"});
  r.Int("neck_levels", b.neck_levels, 2, 16);
  r.Int("neck_channels", b.neck_channels, 0, 4096);
  r.Int("neck_repeats", b.neck_repeats, 1, 16);
  if (const json* e = r.Get("encoder")) {
    if (!e->is_array()) throw SpecError("arch.bev.encoder", "expected a list of stages");
    for (size_t i = 0; i < e->size(); ++i) {
      StageSpec stage;
      ParseStage((*e)[i], "arch.bev.encoder[" + std::to_string(i) + "]", stage);
      b.encoder.push_back(stage);
    }
  }
  r.RejectUnknown();
  if (b.depth_max <= b.depth_min) throw SpecError("arch.bev.depth_max", "must be above depth_min");
  if (b.view_transform != "lss" && b.pooling != "naive") {
    throw SpecError("arch.bev.pooling", "pooling '" + b.pooling + "' applies to view_transform lss only (" +
                                            b.view_transform + " samples, it does not pool)");
  }
}

void ParseAttention(const json& j, const std::string& path, AttentionSpec& a) {
  ObjectReader r(j, path);
  r.Kind("kind", a.kind, {"none", "mhsa", "window", "gqa", "linear"});
  r.Int("heads", a.heads, 1, 1024);
  r.Int("head_dim", a.head_dim, 0, 4096);
  r.Int("kv_heads", a.kv_heads, 1, 1024);
  r.Int("window", a.window, 1, 4096);
  r.Int("blocks", a.blocks, 0, 1024);
  r.RejectUnknown();
  if (a.kind == "gqa" && a.heads % a.kv_heads != 0) {
    throw SpecError(r.Field("kv_heads"), "must divide heads (" + std::to_string(a.heads) + "), got " +
                                              std::to_string(a.kv_heads));
  }
}

// The moe section of a stage (read whatever the block, so that a space can
// vary the block of a stage that configures its experts).
void ParseMoe(const json& j, const std::string& path, MoeSpec& m) {
  ObjectReader r(j, path);
  r.Int("experts", m.experts, 1, 1024);
  r.Int("top_k", m.top_k, 1, 1024);
  r.Double("capacity_factor", m.capacity_factor, 0.01, 1024);
  r.Double("aux_loss_weight", m.aux_loss_weight, 0, 1000);
  r.RejectUnknown();
  if (m.top_k > m.experts) {
    throw SpecError(r.Field("top_k"), "routes each token to " + std::to_string(m.top_k) + " experts but the stage has " +
                                          std::to_string(m.experts) + " (moe.experts)");
  }
}

void ParseStage(const json& j, const std::string& path, StageSpec& s) {
  ObjectReader r(j, path);
  r.Kind("block", s.block, {"basic", "bottleneck", "convnext", "mbconv", "fused_mbconv", "moe"});
  r.Int("width", s.width, 1, 1 << 16);
  r.Int("depth", s.depth, 1, 1024);
  r.Int("stride", s.stride, 1, 8);
  r.Int("kernel", s.kernel, 0, 31);
  if (s.kernel != 0 && s.kernel % 2 == 0) throw SpecError(r.Field("kernel"), "must be odd");
  r.Double("expansion", s.expansion, 0, 64);
  r.Bool("se", s.se);
  if (s.se && s.block != "mbconv" && s.block != "fused_mbconv") {
    throw SpecError(r.Field("se"), "squeeze-excite applies to mbconv and fused_mbconv only");
  }
  if (const json* a = r.Get("attention")) ParseAttention(*a, r.Field("attention"), s.attention);
  if (const json* m = r.Get("moe")) ParseMoe(*m, r.Field("moe"), s.moe);
  r.RejectUnknown();
}

void ParseOps(const json& j, OpsSpec& o) {
  ObjectReader r(j, "arch.ops");
  r.Kind("attention_kernel", o.attention_kernel, {"naive", "chunked"});
  r.RejectUnknown();
}

void ParseArch(const json& j, ArchSpec& a) {
  ObjectReader r(j, "arch");
  if (const json* s = r.Get("stem")) {
    ObjectReader sr(*s, "arch.stem");
    sr.Kind("kind", a.stem.kind, {"conv3x3", "patchify", "resnet"});
    sr.Int("width", a.stem.width, 1, 1 << 16);
    sr.Int("stride", a.stem.stride, 0, 32);
    sr.Int("depth", a.stem.depth, 1, 8);
    sr.RejectUnknown();
  }
  const json* stages = r.Get("stages");
  if (!stages || !stages->is_array() || stages->empty()) {
    throw SpecError("arch.stages", "expected a non-empty list of stages");
  }
  for (size_t i = 0; i < stages->size(); ++i) {
    StageSpec stage;
    ParseStage((*stages)[i], "arch.stages[" + std::to_string(i) + "]", stage);
    a.stages.push_back(stage);
  }
  r.Choice("norm", a.norm, {"batch", "group", "layer", "none"});
  r.Int("norm_groups", a.norm_groups, 1, 1024);
  r.Choice("activation", a.activation, {"relu", "gelu", "silu"});
  r.Double("width_mult", a.width_mult, 0.01, 64);
  r.Double("depth_mult", a.depth_mult, 0.01, 64);
  r.Double("dropout", a.dropout, 0, 0.99);
  if (const json* b = r.Get("bev")) ParseBevArch(*b, a.bev);
  if (const json* o = r.Get("ops")) ParseOps(*o, a.ops);
  r.RejectUnknown();
}

void ParseRuntime(const json& j, RuntimeSpec& rt) {
  ObjectReader r(j, "runtime");
  r.Choice("precision", rt.precision, {"fp32", "bf16", "fp16"});
  r.Choice("memory_format", rt.memory_format, {"contiguous", "channels_last"});
  r.Int("threads", rt.threads, 0, 1024);
  r.String("device", rt.device);
  r.Int("ranks", rt.ranks, 1, 1024);
  r.Int("nodes", rt.nodes, 1, 1024);
  r.Choice("batch_policy", rt.batch_policy, {"split_global", "fixed_per_rank"});
  r.Double("bucket_cap_mb", rt.bucket_cap_mb, 0.001, 65536);
  r.Bool("overlap", rt.overlap);
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

void ParseLatency(const json& j, LatencySpec& l) {
  ObjectReader r(j, "latency");
  r.Int("batch_size", l.batch_size, 0, 65536);
  r.Int("repetitions", l.repetitions, 0, 100000);
  r.Int("warmup", l.warmup, 0, 10000);
  r.RejectUnknown();
}

int DefaultStemStride(const std::string& kind) { return kind == "patchify" ? 4 : 2; }

int DefaultKernel(const std::string& block) { return block == "convnext" ? 7 : 3; }

int ConvOut(int size, int kernel, int stride, int pad) { return (size + 2 * pad - kernel) / stride + 1; }

void CheckGroups(const ArchSpec& a, int width, const std::string& field) {
  if (a.norm == "group" && width % a.norm_groups != 0) {
    throw SpecError(field, "width " + std::to_string(width) + " is not divisible by arch.norm_groups (" +
                               std::to_string(a.norm_groups) + ")");
  }
}

void CheckMap(int h, int w, const std::string& field) {
  if (h < 1 || w < 1) {
    throw SpecError(field, "the feature map vanishes (" + std::to_string(h) + "x" + std::to_string(w) +
                               "); use smaller strides for this input size");
  }
}

// Resolves a list of stages entering at in_width channels on an h x w map;
// updates all three to what leaves the last stage. `prefix` names the list.
std::vector<ResolvedStage> ResolveStages(const std::vector<StageSpec>& stages, const ArchSpec& a,
                                         const std::string& prefix, int& in_width, int& h, int& w) {
  std::vector<ResolvedStage> out;
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageSpec& s = stages[i];
    const std::string path = prefix + "[" + std::to_string(i) + "]";
    ResolvedStage r;
    r.block = s.block;
    r.in_width = in_width;
    r.width = std::max(1, static_cast<int>(std::lround(s.width * a.width_mult)));
    r.depth = std::max(1, static_cast<int>(std::ceil(s.depth * a.depth_mult - 1e-9)));
    r.stride = s.stride;
    r.kernel = s.kernel ? s.kernel : DefaultKernel(s.block);
    r.expansion = s.expansion > 0 ? s.expansion : 4.0;
    r.se = s.se;
    r.moe = s.moe;
    r.in_height = h;
    r.in_width_px = w;
    // Every family downsamples in its first block with padding k/2 (or a
    // stride x stride patch conv for convnext), so the map shrinks as ceil(h/stride).
    h = (h + s.stride - 1) / s.stride;
    w = (w + s.stride - 1) / s.stride;
    if (s.block == "convnext" && s.stride > 1 && (r.in_height % s.stride || r.in_width_px % s.stride)) {
      throw SpecError(path + ".stride", "convnext downsampling needs the " + std::to_string(r.in_height) + "x" +
                                            std::to_string(r.in_width_px) + " map divisible by the stride");
    }
    CheckMap(h, w, path + ".stride");
    r.out_height = h;
    r.out_width_px = w;
    CheckGroups(a, r.width, path + ".width");
    if (s.block == "bottleneck") {
      int mid = static_cast<int>(std::lround(r.width / r.expansion));
      if (mid < 1) throw SpecError(path + ".expansion", "leaves a bottleneck width below 1");
      CheckGroups(a, mid, path + ".expansion");
    }
    if (s.block == "convnext") CheckGroups(a, static_cast<int>(std::lround(r.width * r.expansion)), path + ".expansion");
    if (s.block == "mbconv" || s.block == "fused_mbconv") {
      // The first block expands the stage's input width, the others its width.
      CheckGroups(a, static_cast<int>(std::lround(r.in_width * r.expansion)), path + ".expansion");
      CheckGroups(a, static_cast<int>(std::lround(r.width * r.expansion)), path + ".expansion");
    }

    AttentionSpec att = s.attention;
    if (att.kind != "none") {
      const std::string ap = path + ".attention";
      if (att.head_dim == 0) {
        if (r.width % att.heads != 0) {
          throw SpecError(ap + ".heads", std::to_string(att.heads) + " heads do not divide the stage width " +
                                             std::to_string(r.width) + " (set head_dim to decouple them)");
        }
        att.head_dim = r.width / att.heads;
      }
      if (att.kind == "window" && (h % att.window != 0 || w % att.window != 0)) {
        throw SpecError(ap + ".window", "window " + std::to_string(att.window) + " does not divide the stage's " +
                                            std::to_string(h) + "x" + std::to_string(w) + " feature map");
      }
      if (att.kind == "gqa" && att.heads % att.kv_heads != 0) {
        throw SpecError(ap + ".kv_heads", "must divide heads");
      }
      int blocks = att.blocks == 0 ? r.depth : std::min(att.blocks, r.depth);
      r.attention_from_block = r.depth - blocks;
      att.blocks = blocks;
    }
    r.attention = att;
    out.push_back(r);
    in_width = r.width;
  }
  return out;
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
  spec.profile.steps = 0;  // a command is profiled only by wrapping it
  spec.latency.repetitions = 0;  // the program measures its own (frontier_trial's measure_latency)
  if (const json* p = r.Get("profile")) {
    ParseProfile(*p, spec.task, spec.profile);
    if (spec.profile.tool != "nsys" && spec.profile.tool != "ncu") {
      throw SpecError("profile.tool", "a trial command is profiled by wrapping it: nsys or ncu (the in-process "
                                      "libtorch profiler is frontier-trial's)");
    }
  }
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
  r.RejectUnknown();
  const bool bev_task = spec.task.dataset == "bev-synthetic";
  if (bev_task && !spec.arch.bev.enabled) throw SpecError("arch.bev", "the bev-synthetic dataset needs an arch.bev section");
  if (!bev_task && spec.arch.bev.enabled) throw SpecError("arch.bev", "only the bev-synthetic dataset takes a bev section");
  ResolveArch(spec.arch, spec.task);  // shape-dependent checks
  if (spec.runtime.ranks > spec.task.batch_size && spec.runtime.batch_policy == "split_global") {
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

InputShape InputShapeOf(const TaskSpec& task) {
  if (task.dataset == "fashion-mnist") return InputShape{1, 28, 28, 10};
  if (task.dataset == "bev-synthetic") return InputShape{3, task.bev.height, task.bev.width, 1};  // per camera
  return task.input;
}

ResolvedArch ResolveArch(const ArchSpec& a, const InputShape& input) {
  ResolvedArch out;
  out.input = input;
  out.norm = a.norm;
  out.norm_groups = a.norm_groups;
  out.activation = a.activation;
  out.dropout = a.dropout;
  out.ops = a.ops;
  out.stem = a.stem;
  if (out.stem.stride == 0) out.stem.stride = DefaultStemStride(a.stem.kind);

  int h = input.height, w = input.width;
  const StemSpec& stem = out.stem;
  if (stem.kind == "conv3x3") {
    h = ConvOut(h, 3, stem.stride, 1);
    w = ConvOut(w, 3, stem.stride, 1);
  } else if (stem.kind == "patchify") {
    if (input.height % stem.stride || input.width % stem.stride) {
      throw SpecError("arch.stem.stride", "patch size " + std::to_string(stem.stride) + " does not divide the " +
                                              std::to_string(input.height) + "x" + std::to_string(input.width) +
                                              " input");
    }
    h /= stem.stride;
    w /= stem.stride;
  } else {  // resnet: 7x7/stride conv, then 3x3/2 max-pool
    h = ConvOut(ConvOut(h, 7, stem.stride, 3), 3, 2, 1);
    w = ConvOut(ConvOut(w, 7, stem.stride, 3), 3, 2, 1);
  }
  CheckMap(h, w, "arch.stem.stride");
  CheckGroups(a, stem.width, "arch.stem.width");
  out.stem_out_height = h;
  out.stem_out_width = w;

  int in_width = stem.width;
  out.stages = ResolveStages(a.stages, a, "arch.stages", in_width, h, w);
  out.features = in_width;
  out.feature_height = h;
  out.feature_width = w;
  return out;
}

ResolvedArch ResolveArch(const ArchSpec& a, const TaskSpec& task) {
  ResolvedArch out = ResolveArch(a, InputShapeOf(task));
  if (!a.bev.enabled) return out;
  ResolvedBev& bev = out.bev;
  bev.enabled = true;
  bev.spec = a.bev;
  bev.grid = task.dataset == "bev-synthetic" ? task.bev.grid : BevTaskSpec{}.grid;
  int width = a.bev.channels, h = bev.grid, w = bev.grid;
  CheckGroups(a, width, "arch.bev.channels");
  bev.encoder = ResolveStages(a.bev.encoder, a, "arch.bev.encoder", width, h, w);
  bev.encoder_features = width;
  bev.encoder_height = h;
  bev.encoder_width = w;
  bev.lift_channels = out.features;
  bev.lift_height = out.feature_height;
  bev.lift_width = out.feature_width;
  if (a.bev.neck != "none") {
    const int stages = static_cast<int>(out.stages.size()), levels = a.bev.neck_levels;
    if (levels > stages) {
      throw SpecError("arch.bev.neck_levels", "the " + a.bev.neck + " neck fuses the maps of the last " +
                                                  std::to_string(levels) + " backbone stages but arch.stages has " +
                                                  std::to_string(stages) + (stages == 1 ? " stage" : " stages"));
    }
    bev.neck_from_stage = stages - levels;
    const ResolvedStage& finest = out.stages[bev.neck_from_stage];
    bev.lift_channels = a.bev.neck_channels > 0 ? a.bev.neck_channels : out.features;
    bev.lift_height = finest.out_height;
    bev.lift_width = finest.out_width_px;
    CheckGroups(a, bev.lift_channels, "arch.bev.neck_channels");
  }
  return out;
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
            {"batch_policy", r.batch_policy}, {"bucket_cap_mb", r.bucket_cap_mb}, {"overlap", r.overlap}};
  if (!r.plugins.empty()) j["plugins"] = r.plugins;
  return j;
}

static json ProfileJson(const ProfileSpec& p) { return {{"steps", p.steps}, {"start", p.start}, {"tool", p.tool}}; }

static json LatencyJson(const LatencySpec& l) {
  return {{"batch_size", l.batch_size}, {"repetitions", l.repetitions}, {"warmup", l.warmup}};
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
    if (s.profile.tool != "libtorch") out["profile"] = ProfileJson(s.profile);
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
