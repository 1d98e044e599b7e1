#include "worker/trial/plugin.h"

#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <set>

namespace frontier {
namespace {

template <typename F>
F Symbol(void* handle, const char* name) {
  return reinterpret_cast<F>(dlsym(handle, name));
}

void LoadPlugin(const std::string& path) {
  static std::set<std::string> loaded;
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path canonical = fs::canonical(path, error);
  if (error) throw PluginError("plugin " + path + ": " + error.message());
  if (!fs::is_regular_file(canonical)) throw PluginError("plugin " + path + ": not a file");
  if (loaded.count(canonical.string())) return;
  void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw PluginError("plugin " + path + " could not be loaded: " + (why ? why : "dlopen failed"));
  }
  const auto torch_version = Symbol<const char* (*)()>(handle, "frontier_plugin_torch_version");
  const auto api_version = Symbol<int (*)()>(handle, "frontier_plugin_api_version");
  const auto registration = Symbol<void (*)()>(handle, "frontier_plugin_register");
  if (!torch_version || !api_version || !registration) {
    dlclose(handle);
    throw PluginError("plugin " + path + " is not a Frontier plugin: it does not end with FRONTIER_PLUGIN(...) "
                      "(docs/plugins.md)");
  }
  if (std::strcmp(torch_version(), TORCH_VERSION) != 0) {
    const std::string theirs = torch_version();
    dlclose(handle);
    throw PluginError("plugin " + path + " was built against LibTorch " + theirs + ", this frontier-trial uses " +
                      TORCH_VERSION + ": rebuild the plugin against this LibTorch");
  }
  if (api_version() != kPluginApiVersion) {
    const int theirs = api_version();
    dlclose(handle);
    throw PluginError("plugin " + path + " was built for plugin API " + std::to_string(theirs) +
                      ", this frontier-trial has API " + std::to_string(kPluginApiVersion) +
                      ": rebuild it against this Frontier's headers");
  }
  loaded.insert(canonical.string());  // registered entries point into it: it stays loaded
  try {
    registration();
  } catch (const c10::Error& e) {
    throw PluginError("plugin " + path + ": its registration failed: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw PluginError("plugin " + path + ": its registration failed: " + e.what());
  } catch (...) {
    throw PluginError("plugin " + path + ": its registration threw a non-standard exception");
  }
}

}  // namespace

void LoadPlugins(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) LoadPlugin(path);
}

}  // namespace frontier
