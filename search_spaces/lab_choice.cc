// A kernel lab's kept variant as a dimension's choice, `lab:DIR`
// (SpaceParser::LabChoice; docs/kernel-lab.md): the variant's manifest read
// and checked against the dimension's op, its plugin added to the baseline.
#include "search_spaces/space_parser.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "search_spaces/input_bounds.h"

namespace frontier::space_reading {

// A kernel lab's kept variant (docs/kernel-lab.md): `lab:DIR` names the
// folder `frontier ops optimize` kept (DIR/manifest.json, DIR/plugin.so),
// relative to the space file. The choice becomes the variant's name, and its
// plugin joins the baseline's runtime.plugins, so every trial can load it.
std::string SpaceParser::LabChoice(const std::string& at, const std::string& field, const Dimension& dim,
                                   const std::string& choice, SearchSpace& space) const {
  const std::string dir = InSpaceFolder(choice.substr(std::string(kLabChoicePrefix).size()));
  const std::string manifest_path = dir + "/manifest.json";
  std::ifstream in(manifest_path, std::ios::binary);
  if (!in) FailAt(at, field, "'" + Abbreviated(choice, kMaxQuotedBytes) + "': no kernel lab variant at " + manifest_path);
  std::string text(64 * 1024 + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  json manifest;
  try {
    manifest = ParseBoundedJson(text, 64 * 1024);
  } catch (const std::exception& e) {
    FailAt(at, field, manifest_path + ": " + e.what());
  }
  const auto text_field = [&](const char* key) {
    if (!manifest.is_object() || !manifest.contains(key) || !manifest[key].is_string() ||
        manifest[key].get<std::string>().empty()) {
      FailAt(at, field, manifest_path + ": no '" + key + "'");
    }
    return manifest[key].get<std::string>();
  };
  const std::string op = text_field("op"), variant = text_field("variant"), plugin = text_field("plugin");
  const std::map<std::string, std::string> op_paths = {{"attention_kernel", "arch.ops.attention_kernel"},
                                                       {"bev_pool", "arch.bev.pooling"}};
  const auto expected = op_paths.find(op);
  for (const std::string& path : dim.paths) {
    if (expected == op_paths.end() || path != expected->second) {
      FailAt(at, field, "'" + Abbreviated(choice, kMaxQuotedBytes) + "' is a variant of the op " + op + ", not a choice of " + path);
    }
  }
  if (plugin.find('/') != std::string::npos) FailAt(at, field, manifest_path + ": 'plugin' must be a file name");
  json& runtime = space.base["runtime"];
  if (!runtime.is_object()) runtime = json::object();
  if (!runtime.contains("plugins") || !runtime["plugins"].is_array()) runtime["plugins"] = json::array();
  const std::string library = dir + "/" + plugin;
  if (std::find(runtime["plugins"].begin(), runtime["plugins"].end(), library) == runtime["plugins"].end()) {
    runtime["plugins"].push_back(library);
  }
  return variant;
}

}  // namespace frontier::space_reading
