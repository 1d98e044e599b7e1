// The trial spec: what one worker runs (task + architecture + runtime + seed).
//
// Torch-free on purpose: the coordinator validates every trial with this code
// before any worker sees it, and the worker's model builder builds from the
// ResolvedArch computed here, so both sides agree on widths, depths, strides
// and feature-map sizes. The JSON schema is documented in docs/trial-spec.md.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace frontier {

// Thrown for any invalid spec. `path()` is the JSON path of the offending field
// (e.g. "arch.stages[1].attention.heads"); what() reads "<path>: <problem>".
class SpecError : public std::runtime_error {
 public:
  SpecError(std::string path, const std::string& problem);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline constexpr int kTrialSpecSchema = 1;

struct OptimizerSpec {
  std::string name = "sgd";  // sgd | adamw
  double lr = 0.1;
  double momentum = 0.9;     // sgd only
  bool nesterov = false;     // sgd only
  double weight_decay = 5e-4;
  double beta1 = 0.9;        // adamw only
  double beta2 = 0.999;      // adamw only
};

struct ScheduleSpec {
  std::string name = "cosine";  // cosine | constant
  int warmup = 0;               // linear warm-up steps from lr/warmup to lr
  double min_lr = 0.0;          // cosine decays to this
};

struct AugmentSpec {
  bool flip = false;     // random horizontal flip
  int crop_padding = 0;  // random crop after zero padding by this many pixels
};

struct TargetSpec {
  std::string metric = "val_accuracy";  // val_accuracy (maximize) | val_loss (minimize)
  double value = 0;
};

// Input tensor of one sample and the number of classes.
struct InputShape {
  int channels = 1;
  int height = 28;
  int width = 28;
  int classes = 10;
};

struct TaskSpec {
  std::string dataset = "fashion-mnist";  // fashion-mnist | synthetic
  std::string data_dir;                   // empty: the Debian package's folder
  InputShape input;                       // fixed for fashion-mnist; free for synthetic
  int batch_size = 128;
  int steps = 400;
  int eval_every = 100;     // 0: evaluate only at the end
  int warmup_steps = 10;    // excluded from step-time statistics
  int val_size = 5000;      // held out from the end of the training file
  AugmentSpec augment;
  OptimizerSpec optimizer;
  ScheduleSpec schedule;
  double grad_clip = 0;     // max global grad norm; 0 disables
  std::optional<TargetSpec> target;
};

struct AttentionSpec {
  std::string kind = "none";  // none | mhsa | window | gqa | linear
  int heads = 4;
  int head_dim = 0;  // 0: stage width / heads (which must divide)
  int kv_heads = 1;  // gqa only; must divide heads (1 = multi-query)
  int window = 7;    // window only; must divide the stage's feature map
  int blocks = 0;    // attention follows the last `blocks` blocks; 0 = every block
};

struct StageSpec {
  std::string block = "basic";  // basic | bottleneck | convnext | mbconv | fused_mbconv
  int width = 32;
  int depth = 2;
  int stride = 1;
  int kernel = 0;       // 0: the family's default (3; convnext 7)
  double expansion = 0; // 0: the family's default (bottleneck 4 = reduction; convnext 4; mbconv 4; fused 4)
  bool se = false;      // squeeze-excite in mbconv / fused_mbconv
  AttentionSpec attention;
};

struct StemSpec {
  std::string kind = "conv3x3";  // conv3x3 | patchify | resnet
  int width = 32;
  int stride = 0;  // 0: the kind's default (conv3x3 2, patchify 4, resnet 2)
  int depth = 2;   // conv3x3 only: number of 3x3 convs
};

struct ArchSpec {
  StemSpec stem;
  std::vector<StageSpec> stages;
  std::string norm = "batch";  // batch | group | layer | none
  int norm_groups = 8;         // group norm only; must divide every width
  std::string activation = "relu";  // relu | gelu | silu
  double width_mult = 1.0;
  double depth_mult = 1.0;
  double dropout = 0.0;  // before the classifier
};

struct RuntimeSpec {
  std::string precision = "fp32";          // fp32 | bf16 | fp16
  std::string memory_format = "contiguous";  // contiguous | channels_last
  int threads = 0;                         // intra-op threads; 0 = all cores
  std::string device = "auto";             // auto | cpu | cuda | cuda:N
};

// Optional profiling of a few training steps (docs/profiling.md).
struct ProfileSpec {
  int steps = 0;                 // profiled steps; 0 = off
  int start = -1;                // first profiled step (0-based); -1 = right after task.warmup_steps
  std::string tool = "libtorch";  // libtorch (in-process trace) | nsys | ncu (wrap the trial process)
};

struct TrialSpec {
  int schema = kTrialSpecSchema;
  std::string trial_id;
  int64_t seed = 0;
  TaskSpec task;
  ArchSpec arch;
  RuntimeSpec runtime;
  ProfileSpec profile;
};

// One stage after width_mult/depth_mult and defaults are applied, with the
// feature-map size it sees. Everything the model builder needs.
struct ResolvedStage {
  std::string block;
  int in_width = 0;
  int width = 0;
  int depth = 0;
  int stride = 1;
  int kernel = 3;
  double expansion = 1;
  bool se = false;
  int in_height = 0, in_width_px = 0;    // feature map entering the stage
  int out_height = 0, out_width_px = 0;  // feature map leaving the stage
  AttentionSpec attention;               // head_dim, blocks resolved
  int attention_from_block = 0;          // blocks [from, depth) carry attention
};

struct ResolvedArch {
  StemSpec stem;  // stride resolved
  int stem_out_height = 0, stem_out_width = 0;
  std::vector<ResolvedStage> stages;
  std::string norm;
  int norm_groups = 8;
  std::string activation;
  double dropout = 0;
  InputShape input;
  int features = 0;  // channels into the classifier
};

// Parses and validates a trial spec. Unknown keys are errors (a typo must not
// silently fall back to a default). Throws SpecError.
TrialSpec ParseTrialSpec(const nlohmann::json& j);
TrialSpec ParseTrialSpecText(const std::string& text);
TrialSpec LoadTrialSpecFile(const std::string& path);

// The spec back as JSON (every field, defaults filled in).
nlohmann::json ToJson(const TrialSpec& spec);

// Input shape the task's dataset produces.
InputShape InputShapeOf(const TaskSpec& task);

// Applies multipliers and defaults, propagates feature-map sizes and checks
// everything that depends on them (heads divide width, window divides the
// map, groups divide widths, the map does not vanish). Throws SpecError.
ResolvedArch ResolveArch(const ArchSpec& arch, const InputShape& input);

}  // namespace frontier
