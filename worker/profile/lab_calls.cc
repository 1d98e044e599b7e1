#include "worker/profile/lab_calls.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace frontier {
namespace {

using json = nlohmann::json;
using Shape = std::vector<int64_t>;

bool IsProduct(const std::string& name) { return name == "aten::matmul" || name == "aten::bmm"; }
bool IsSoftmax(const std::string& name) { return name == "aten::softmax" || name == "aten::_softmax"; }

// q, k, v of attention_kernel from a product, a softmax and a product; empty when they are not one.
std::vector<Shape> Attention(const ProfiledCall& scores, const ProfiledCall& softmax, const ProfiledCall& mix) {
  if (scores.shapes.size() < 2 || softmax.shapes.empty() || mix.shapes.size() < 2) return {};
  const Shape& q = scores.shapes[0];
  const Shape& kt = scores.shapes[1];
  const Shape& p = softmax.shapes[0];
  const Shape& v = mix.shapes[1];
  const size_t rank = q.size();
  if ((rank != 3 && rank != 4) || kt.size() != rank || p.size() != rank || mix.shapes[0] != p || v.size() != rank) {
    return {};
  }
  const Shape batch(q.begin(), q.end() - 2);
  if (!std::equal(batch.begin(), batch.end(), kt.begin()) || !std::equal(batch.begin(), batch.end(), p.begin()) ||
      !std::equal(batch.begin(), batch.end(), v.begin())) {
    return {};
  }
  const int64_t L = q[rank - 2], d = q[rank - 1], S = kt[rank - 1];
  if (kt[rank - 2] != d || p[rank - 2] != L || p[rank - 1] != S || v[rank - 2] != S || v[rank - 1] != d) return {};
  const int64_t B = rank == 4 ? batch[0] : 1;
  const int64_t h = rank == 4 ? batch[1] : batch[0];
  // Within what a spec's op_calls take (search_spaces/trial_spec.cc): dimensions in [1, 2^20], at most
  // 2^28 elements an input.
  for (const int64_t n : {B, h, L, S, d}) {
    if (n < 1 || n > (int64_t{1} << 20)) return {};
  }
  const double largest = static_cast<double>(B) * static_cast<double>(h) * static_cast<double>(std::max(L, S)) *
                         static_cast<double>(d);
  if (largest > static_cast<double>(int64_t{1} << 28)) return {};
  return {{B, h, L, d}, {B, h, S, d}, {B, h, S, d}};
}

}  // namespace

json LabOpCalls(const ProfileRecording& recording) {
  // The products and softmaxes inside the recorded steps, each thread's in order, nested ones left out
  // (aten::matmul's own aten::bmm).
  std::map<uint64_t, std::vector<const ProfiledCall*>> by_thread;
  for (const ProfiledCall& c : recording.calls) {
    if ((IsProduct(c.name) || IsSoftmax(c.name)) && InRecordedSteps(recording, c)) by_thread[c.thread].push_back(&c);
  }
  std::map<std::vector<Shape>, int> counted;
  for (auto& [thread, calls] : by_thread) {
    std::sort(calls.begin(), calls.end(), [](const ProfiledCall* a, const ProfiledCall* b) {
      return a->start_us != b->start_us ? a->start_us < b->start_us : a->end_us > b->end_us;
    });
    std::vector<const ProfiledCall*> outer;
    for (const ProfiledCall* c : calls) {
      if (!outer.empty() && c->start_us < outer.back()->end_us) continue;
      outer.push_back(c);
    }
    for (size_t i = 0; i + 2 < outer.size(); ++i) {
      if (!IsProduct(outer[i]->name) || !IsSoftmax(outer[i + 1]->name) || !IsProduct(outer[i + 2]->name)) continue;
      std::vector<Shape> qkv = Attention(*outer[i], *outer[i + 1], *outer[i + 2]);
      if (qkv.empty()) continue;
      ++counted[qkv];
      i += 2;
    }
  }
  json found = json::array();
  const double steps = std::max<size_t>(1, recording.steps.size());
  for (const auto& [shapes, n] : counted) {
    found.push_back({{"op", "attention_kernel"},
                     {"shapes", shapes},
                     {"calls_per_step", n / steps},
                     {"recognized_from", "matmul (..., L, d) x (..., d, S), softmax, matmul (..., L, S) x (..., S, d)"}});
  }
  return found;
}

}  // namespace frontier
