// Libraries the plugin loader must refuse, without LibTorch (quick to build):
// by the PLUGIN_KIND definition, one that claims another LibTorch, one built
// for an earlier plugin API, one whose registration throws, and one that is
// no Frontier plugin at all.
#include <stdexcept>

// kPluginApiVersion of worker/trial/plugin.h (not included: it needs LibTorch).
constexpr int kCurrentApi = 2;

#if PLUGIN_KIND_old_torch
extern "C" __attribute__((visibility("default"))) const char* frontier_plugin_torch_version() { return "1.12.1"; }
extern "C" __attribute__((visibility("default"))) int frontier_plugin_api_version() { return kCurrentApi; }
extern "C" __attribute__((visibility("default"))) void frontier_plugin_register() {}
#elif PLUGIN_KIND_old_api
#include <torch/version.h>
extern "C" __attribute__((visibility("default"))) const char* frontier_plugin_torch_version() {
  return TORCH_VERSION;
}
extern "C" __attribute__((visibility("default"))) int frontier_plugin_api_version() {
  return kCurrentApi - 1;
}
extern "C" __attribute__((visibility("default"))) void frontier_plugin_register() {}
#elif PLUGIN_KIND_throws
#include <torch/version.h>
extern "C" __attribute__((visibility("default"))) const char* frontier_plugin_torch_version() { return TORCH_VERSION; }
extern "C" __attribute__((visibility("default"))) int frontier_plugin_api_version() { return kCurrentApi; }
extern "C" __attribute__((visibility("default"))) void frontier_plugin_register() {
  throw std::runtime_error("this plugin's registration fails on purpose");
}
#else
extern "C" __attribute__((visibility("default"))) int not_a_frontier_plugin() { return 0; }
#endif
