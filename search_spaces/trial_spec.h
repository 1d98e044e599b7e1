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

#include <nlohmann/json.hpp>

#include "search_spaces/runtime_kinds.h"

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
// The version of the trial protocol command trials speak (docs/trial-protocol.md).
inline constexpr int kTrialProtocol = 1;
// The largest trial spec text ParseTrialSpecText reads (specs are a few KiB).
inline constexpr size_t kMaxTrialSpecBytes = size_t{1} << 20;

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
  // val_accuracy (maximize, classification) | val_iou (maximize, bev-synthetic) | val_loss (minimize)
  std::string metric = "val_accuracy";
  double value = 0;
};

// Input tensor of one sample and the number of classes.
struct InputShape {
  int channels = 1;
  int height = 28;
  int width = 28;
  int classes = 10;
};

// Scene generator and camera rig of the bev-synthetic dataset (docs/bev.md).
// The rig is fixed for the whole dataset, as on a real vehicle.
struct BevTaskSpec {
  int cameras = 6;             // a ring of pinhole cameras, the first looking forward (+x)
  int height = 32, width = 88;  // image size in pixels
  double fov_deg = 0;          // horizontal field of view; 0 = 360 / cameras + 20 (overlapping views)
  int grid = 48;               // BEV label: grid x grid cells, ego vehicle at the centre
  double resolution = 1.0;     // metres per BEV cell
  int max_boxes = 10;          // 0..max_boxes boxes per scene
  int train_samples = 2000, val_samples = 256, test_samples = 256;
  int64_t data_seed = 1;       // the dataset is a function of this seed only (not of the trial seed)
  double noise = 0.02;         // Gaussian pixel noise, standard deviation in [0, 1] intensity units
};

struct TaskSpec {
  std::string dataset = "fashion-mnist";  // fashion-mnist | synthetic | bev-synthetic
  std::string data_dir;                   // empty: the Debian package's folder
  InputShape input;                       // fixed for fashion-mnist; free for synthetic
  int batch_size = 128;
  int steps = 400;
  int eval_every = 100;     // 0: evaluate only at the end
  int warmup_steps = 10;    // excluded from step-time statistics
  int val_size = 5000;      // held out from the end of the training file
  int test_size = 10000;    // the first test_size samples of the test file
  BevTaskSpec bev;          // bev-synthetic only
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

// A stage's mixture-of-experts MLP (block moe; docs/trial-spec.md, Block
// families): `experts` MLPs of hidden width width x expansion, each token
// routed to its `top_k` experts by a linear router, at most
// ceil(capacity_factor x tokens x top_k / experts) tokens per expert (the
// rest pass through the residual), and a Switch/GShard load-balancing loss
// aux_loss_weight x experts x sum_e f_e P_e added to the training loss.
struct MoeSpec {
  int experts = 4;
  int top_k = 1;                  // at most experts
  double capacity_factor = 1.25;  // expert slots per token share
  double aux_loss_weight = 0.01;  // 0: no load-balancing loss
};

struct StageSpec {
  std::string block = "basic";  // basic | bottleneck | convnext | mbconv | fused_mbconv | moe
  int width = 32;
  int depth = 2;
  int stride = 1;
  int kernel = 0;       // 0: the family's default (3; convnext 7)
  double expansion = 0; // 0: the family's default (bottleneck 4 = reduction; convnext 4; mbconv 4; fused 4)
  bool se = false;      // squeeze-excite in mbconv / fused_mbconv
  AttentionSpec attention;
  MoeSpec moe;          // block moe only (other families ignore it, so a space can vary the block)
};

struct StemSpec {
  std::string kind = "conv3x3";  // conv3x3 | patchify | resnet
  int width = 32;
  int stride = 0;  // 0: the kind's default (conv3x3 2, patchify 4, resnet 2)
  int depth = 2;   // conv3x3 only: number of 3x3 convs
};

// The BEV head of a network for bev-synthetic: the backbone runs on every
// camera image (shared weights), a view transform lifts image features into
// the BEV grid, an encoder of block stages runs on the grid and a head
// predicts per-cell occupancy logits. docs/bev.md.
struct BevArchSpec {
  bool enabled = false;                 // true when the spec has an arch.bev section
  std::string view_transform = "lss";  // lss | ipm | mean_lift
  std::string pooling = "naive";        // lss only: naive (frustum + index_add) | fused (intervals over the frustum) | depth_fused (no frustum)
  int depth_bins = 24;                  // lss: depth distribution bins
  double depth_min = 2.0, depth_max = 38.0;  // lss: metres covered by the bins (uniform)
  int channels = 32;                    // BEV feature channels the view transform produces
  int heights = 4;                      // mean_lift: sample heights from 0 to max_height
  double max_height = 2.0;              // mean_lift: metres
  // lss: weight of BEVDepth-style depth supervision (0 = off): cross-entropy
  // of the depth logits against the bin of the ray-cast depth of each feature
  // pixel (the nearest surface in its image patch; sky and depths outside
  // [depth_min, depth_max) are ignored), added to the occupancy loss.
  // ipm and mean_lift predict no depth and ignore it (so that a space can
  // vary the view transform from a depth-supervised lss baseline).
  double depth_loss_weight = 0.0;
  std::vector<StageSpec> encoder;       // BEV encoder stages (may be empty)
  // Multi-scale neck between the backbone and the view transform
  // (docs/bev.md, Neck): none | fpn (top-down fusion of the last neck_levels
  // stages' maps) | bifpn (weighted top-down and bottom-up fusion, fast
  // normalized weights, neck_repeats layers). Its output, at the finest fused
  // level with neck_channels channels, is what the view transform lifts.
  std::string neck = "none";
  int neck_levels = 2;    // the last this many backbone stages (at least 2)
  int neck_channels = 0;  // 0: the backbone's output width
  int neck_repeats = 1;   // bifpn only: BiFPN layers
};

// The variant of each op the network runs (docs/plugins.md): a name from the
// op's registry in frontier-trial, checked against the op's reference by the
// correctness gate before the trial times anything. BEV pooling's variant is
// arch.bev.pooling (the space shorthand ops.bev_pool).
struct OpsSpec {
  // The softmax attention kinds' softmax(q k^T / sqrt(d)) v (mhsa, window,
  // gqa): naive (scores materialized, the reference) | chunked (keys in
  // blocks with a running max and sum, CPU). Kinds without it ignore it.
  std::string attention_kernel = "naive";
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
  BevArchSpec bev;
  OpsSpec ops;
};

struct RuntimeSpec {
  Precision precision = Precision::kFp32;
  MemoryFormat memory_format = MemoryFormat::kContiguous;
  int threads = 0;                         // intra-op threads (per rank); 0 = all cores
  std::string device = "auto";             // auto | cpu | cuda | cuda:N
  // Data parallelism (docs/distributed.md): the trial's rank processes and
  // the nodes they span; how the batch is shared (split_global: task.batch_size
  // is the global batch; fixed_per_rank: it is each rank's); the gradient
  // buckets' size and whether their all-reduce overlaps backward.
  int ranks = 1;
  int nodes = 1;
  BatchPolicy batch_policy = BatchPolicy::kSplitGlobal;
  double bucket_cap_mb = 25;
  bool overlap = true;
  // Shared libraries frontier-trial loads before it builds the model
  // (docs/plugins.md): they register stems, block families, attention kinds
  // and op variants. A search space's relative paths are resolved against the
  // space file's folder; a trial spec's against the working directory.
  std::vector<std::string> plugins;
  // Training steps at which the first call of each op whose variant is not
  // the op's reference is compared with the reference, its gradients
  // included (docs/plugins.md#spot-checks); 0 = none. Drawn from the seed
  // among the measured steps, at most half of them; kept out of step
  // statistics, train time and peak memory.
  int spot_checks = 2;
};
inline constexpr size_t kMaxPlugins = 16;

// Profiling of a few training steps (docs/profiling.md). On by default for
// frontier-trial's own trials: the bottleneck verdict rests on it.
inline constexpr int kDefaultProfileSteps = 3;
struct ProfileSpec {
  int steps = kDefaultProfileSteps;  // profiled steps; 0 = off (a spec without a profile section: 3)
  int start = -1;  // -1: extra steps after the last training step, outside every training figure;
                   // N >= 0: training steps N.. (kept out of step statistics and train time)
  std::string tool = "libtorch";  // libtorch (in-process trace) | nsys | ncu (wrap the trial process)
};

// Inference latency, measured once training and evaluation are done
// (docs/trial-output.md, Latency).
struct LatencySpec {
  int batch_size = 0;     // the second batch size measured besides 1; 0 = task.batch_size
  int repetitions = 100;  // timed forward passes per batch size; 0 = off
  int warmup = 5;         // untimed forward passes before them
};

// Onboard inference (docs/trial-output.md, Deploy): after training and
// evaluation, the network as it would ship, measured in each format: `float`
// (fp32, batch norms folded into their convs, inference mode), `torchscript`
// (that network traced into a TorchScript graph, frozen-graph optimizations)
// and `int8`
// (post-training static quantization: per-channel int8 weights, per-tensor
// uint8 activations calibrated on training images). Off unless the spec has
// a deploy section.
inline constexpr const char* kDeployFormats[] = {"float", "torchscript", "int8"};
inline constexpr int kMaxDeploySettings = 8;  // batch sizes, thread counts each
struct DeploySpec {
  bool enabled = false;
  std::vector<std::string> formats = {"float", "int8"};
  std::vector<int> batch = {1};    // the first is the headline (deploy.<format>.latency_ms)
  std::vector<int> threads = {1};  // intra-op threads; the first is the headline
  std::string engine;              // int8: onednn | qnnpack; empty = the first this build supports
  int calibration_batches = 8;     // training images calibrating int8 activations, in task.batch_size batches
  int repetitions = 100;           // timed forward passes per setting
  int warmup = 5;
};

// A command trial (docs/trial-protocol.md): the user's own training program
// instead of frontier-trial. Its configuration is the free-form `params`.
struct CommandSpec {
  bool enabled = false;           // true when the spec has a command section
  std::vector<std::string> argv;  // run as given, no arguments added
  std::string workdir;            // absolute; empty: the worker's working directory
  double time_limit_s = 0;        // 0: the worker's --trial-timeout
};

// A call of one of frontier-trial's ops (attention_kernel) at given input
// shapes, without a model: what the kernel lab judges a candidate at when
// its calls come from a command trial's recorded operators
// (docs/kernel-lab.md). Runs in runtime.precision.
struct LabOpCall {
  std::string op;                            // "attention_kernel"
  std::vector<std::vector<int64_t>> shapes;  // the op's inputs in order: q, k, v
};

struct TrialSpec {
  int schema = kTrialSpecSchema;
  std::string trial_id;
  int64_t seed = 0;
  TaskSpec task;       // command trials use steps, eval_every, warmup_steps and target only
  ArchSpec arch;       // built-in trials only
  RuntimeSpec runtime;
  ProfileSpec profile; // built-in trials only
  LatencySpec latency; // built-in trials only
  DeploySpec deploy;   // command trials: passed to the program (the SDK's measure_deploy)
  CommandSpec command;
  nlohmann::json params = nlohmann::json::object();  // command trials: stored and passed exactly as given
  std::vector<LabOpCall> op_calls;  // command trials: the kernel lab's calls (`op_calls`), usually none
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
  MoeSpec moe;                           // block moe only
};

// The BEV part after defaults: the encoder's stages run on the grid x grid map.
struct ResolvedBev {
  bool enabled = false;
  BevArchSpec spec;
  int grid = 0;                        // label and feature grid side
  std::vector<ResolvedStage> encoder;
  int encoder_features = 0;            // channels into the head
  int encoder_height = 0, encoder_width = 0;  // map leaving the encoder
  // The map the view transform lifts: the backbone's output, or the neck's
  // (its finest fused level, stage neck_from_stage's resolution).
  int neck_from_stage = 0;  // with a neck: the first backbone stage it fuses
  int lift_channels = 0, lift_height = 0, lift_width = 0;
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
  int features = 0;  // channels out of the backbone (into the classifier or the view transform)
  int feature_height = 0, feature_width = 0;  // backbone output map
  ResolvedBev bev;
  OpsSpec ops;
};

// Parses and validates a trial spec. Unknown keys are errors (a typo must not
// silently fall back to a default). Throws SpecError.
TrialSpec ParseTrialSpec(const nlohmann::json& j);
// The text must be JSON within the bounds of ParseBoundedJson
// (input_bounds.h) and at most kMaxTrialSpecBytes.
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
// The same for a task: also resolves arch.bev against task.bev (bev-synthetic).
ResolvedArch ResolveArch(const ArchSpec& arch, const TaskSpec& task);

}  // namespace frontier
