// Plugins (docs/plugins.md): shared libraries that add stems, block families,
// attention kinds and op variants to frontier-trial's registries, loaded with
// dlopen before the model is built (runtime.plugins of a trial spec).
//
// A plugin is built against the same LibTorch and these headers, links
// LibTorch, and ends with FRONTIER_PLUGIN(its registration function); the
// function calls one Register... below per name. Everything frontier-trial
// itself uses (model/model.h's layers, ops/bev_pool.h's plan and helpers,
// ops/attention_kernel.h's kernels)
// resolves against frontier-trial's own symbols at load time.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <torch/version.h>

#include "worker/trial/model/model.h"
#include "worker/trial/ops/attention_kernel.h"
#include "worker/trial/ops/bev_pool.h"

namespace frontier {

// Bumped whenever a registry's entry type or a header a plugin may use
// changes incompatibly (2: AttentionImpl's constructor takes the attention
// kernel; tests/worker/plugins/broken_plugins.cc states the current one).
inline constexpr int kPluginApiVersion = 2;

namespace plugin {

// One call per name; a name already registered (built in or by another
// plugin) throws std::logic_error, which fails the trial naming the plugin.
inline void RegisterStem(const std::string& name, model::StemBuilder builder) {
  model::StemRegistry().Add(name, std::move(builder));
}
inline void RegisterBlock(const std::string& name, model::BlockBuilder builder) {
  model::BlockRegistry().Add(name, std::move(builder));
}
inline void RegisterAttention(const std::string& name, model::AttentionKind kind) {
  model::AttentionRegistry().Add(name, kind);
}
// A variant of the op "bev_pool" (arch.bev.pooling): depth (B, N, D, h, w) x
// features (B, N, h, w, C) -> (B, cells, C), differentiable in both. Checked
// against "naive" by the correctness gate before the trial times anything.
inline void RegisterBevPoolVariant(const std::string& name, bev::PoolVariant variant) {
  bev::PoolRegistry().Add(name, variant);
}
// A variant of the op "attention_kernel" (arch.ops.attention_kernel):
// q (B, h, L, d) x k, v (B, h, S, d) -> softmax(q k^T / sqrt(d)) v (B, h, L, d)
// in q's dtype, differentiable in all three. Checked against "naive" by the
// correctness gate before the trial times anything.
inline void RegisterAttentionKernelVariant(const std::string& name, attention::KernelVariant variant) {
  attention::KernelRegistry().Add(name, variant);
}

}  // namespace plugin

// Thrown when a plugin cannot be loaded: the trial fails with error_kind
// "plugin" and this message (which names the file).
class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Loads each plugin once per process, in order: the file must exist, be a
// shared library built with FRONTIER_PLUGIN against this LibTorch version and
// plugin API, and its registration must not throw.
void LoadPlugins(const std::vector<std::string>& paths);

}  // namespace frontier

// Ends a plugin's source: `void Register() { plugin::RegisterBlock(...); }
// FRONTIER_PLUGIN(Register)`. Exports what the loader checks and calls.
#define FRONTIER_PLUGIN(registration)                                                                      \
  extern "C" __attribute__((visibility("default"))) const char* frontier_plugin_torch_version() {         \
    return TORCH_VERSION;                                                                                  \
  }                                                                                                        \
  extern "C" __attribute__((visibility("default"))) int frontier_plugin_api_version() {                   \
    return ::frontier::kPluginApiVersion;                                                                  \
  }                                                                                                        \
  extern "C" __attribute__((visibility("default"))) void frontier_plugin_register() { registration(); }
