// The `arch` section of a trial spec: reading it (stem, stages, blocks,
// attention, moe, bev, ops: ParseArch, trial_spec_arch.h) and resolving it
// against an input's shape (InputShapeOf, ResolveArch: the widths, maps and
// defaults frontier-trial builds from, with the checks only shapes decide).
#include "search_spaces/trial_spec_arch.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "search_spaces/object_reader.h"

namespace frontier {
namespace spec_reading {
namespace {

using nlohmann::json;

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

}  // namespace

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

}  // namespace spec_reading

namespace {

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

}  // namespace frontier
