// The runtime's closed choices as enums, each with its one table of names:
// a trial's precision, memory format and batch policy (runtime.* of a trial
// spec, docs/trial-spec.md) and the worker's device kind (frontier-worker
// --device). A name is parsed once, where a spec or a flag is read
// (trial_spec.cc, the worker's flags); downstream code compares enums, and
// writes a name back (NameOf, or a json value) only where it prints one.
// Torch-free.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace frontier {

enum class Precision { kFp32, kBf16, kFp16 };
enum class MemoryFormat { kContiguous, kChannelsLast };
// How the global batch is shared between a data-parallel trial's ranks
// (docs/distributed.md). kSplitGlobal: task.batch_size is the global batch.
// kFixedPerRank: it is each rank's, and the global batch is ranks times it.
enum class BatchPolicy { kSplitGlobal, kFixedPerRank };
// What a worker runs its trials on (frontier-worker --device).
enum class DeviceKind { kCpu, kCuda };

template <class E>
struct EnumNames;  // kTable: every value with its name, in the order messages list them

template <>
struct EnumNames<Precision> {
  static constexpr std::array<std::pair<Precision, std::string_view>, 3> kTable{
      {{Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}}};
};
template <>
struct EnumNames<MemoryFormat> {
  static constexpr std::array<std::pair<MemoryFormat, std::string_view>, 2> kTable{
      {{MemoryFormat::kContiguous, "contiguous"}, {MemoryFormat::kChannelsLast, "channels_last"}}};
};
template <>
struct EnumNames<BatchPolicy> {
  static constexpr std::array<std::pair<BatchPolicy, std::string_view>, 2> kTable{
      {{BatchPolicy::kSplitGlobal, "split_global"}, {BatchPolicy::kFixedPerRank, "fixed_per_rank"}}};
};
template <>
struct EnumNames<DeviceKind> {
  static constexpr std::array<std::pair<DeviceKind, std::string_view>, 2> kTable{
      {{DeviceKind::kCpu, "cpu"}, {DeviceKind::kCuda, "cuda"}}};
};

template <class E>
std::string NameOf(E value) {
  for (const auto& [v, name] : EnumNames<E>::kTable) {
    if (v == value) return std::string(name);
  }
  return "?";
}

// The value named `name`; nullopt for any other text.
template <class E>
std::optional<E> ParseName(std::string_view name) {
  for (const auto& [v, n] : EnumNames<E>::kTable) {
    if (n == name) return v;
  }
  return std::nullopt;
}

// Every name, in the table's order.
template <class E>
std::vector<std::string> NamesOf() {
  std::vector<std::string> names;
  for (const auto& entry : EnumNames<E>::kTable) names.emplace_back(entry.second);
  return names;
}

// A result or spec writes the name (no from_json: text is parsed with ParseName, which refuses what it
// does not know, where nlohmann's enum conversion would silently take the first value).
inline void to_json(nlohmann::json& j, Precision v) { j = NameOf(v); }
inline void to_json(nlohmann::json& j, MemoryFormat v) { j = NameOf(v); }
inline void to_json(nlohmann::json& j, BatchPolicy v) { j = NameOf(v); }
inline void to_json(nlohmann::json& j, DeviceKind v) { j = NameOf(v); }

}  // namespace frontier
