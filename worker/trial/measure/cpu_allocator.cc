#include "worker/trial/measure/cpu_allocator.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

namespace frontier {
namespace {

class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* inner) : inner_(inner), inner_delete_(inner->raw_deleter()) {}

  c10::DataPtr allocate(size_t bytes) const override {
    if (void* data = TakeKept(bytes)) return {data, data, &Delete, c10::Device(c10::DeviceType::CPU)};
    c10::DataPtr block = inner_->allocate(bytes);
    // Only blocks whose context is their address, freed by the inner
    // allocator's raw deleter, can be handed out under our deleter.
    if (block.get() == nullptr || block.get_context() != block.get() ||
        block.get_deleter() != inner_delete_) {
      return block;
    }
    const c10::Device device = block.device();
    void* data = block.release_context();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Count(data, bytes);
    }
    return {data, data, &Delete, device};
  }

  int64_t Kept() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return kept_bytes_;
  }

  void Reuse(bool on) {
    std::vector<void*> freed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      reuse_ = on;
      if (on) return;
      for (auto& [bytes, blocks] : kept_) freed.insert(freed.end(), blocks.begin(), blocks.end());
      kept_.clear();
      kept_bytes_ = 0;
    }
    for (void* data : freed) inner_delete_(data);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  CpuAllocatedBytes Counts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {current_, peak_};
  }

  int64_t ResetPeak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = current_;
    return current_;
  }

  static CountingCpuAllocator* instance;

 private:
  // Under the mutex.
  void Count(void* data, size_t bytes) const {
    sizes_[data] = bytes;
    current_ += static_cast<int64_t>(bytes);
    peak_ = std::max(peak_, current_);
  }

  // A kept block of exactly `bytes`, counted, or null.
  void* TakeKept(size_t bytes) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!reuse_ || bytes == 0) return nullptr;
    const auto it = kept_.find(bytes);
    if (it == kept_.end() || it->second.empty()) return nullptr;
    void* data = it->second.back();
    it->second.pop_back();
    kept_bytes_ -= static_cast<int64_t>(bytes);
    Count(data, bytes);
    return data;
  }

  static void Delete(void* data) {
    CountingCpuAllocator& self = *instance;
    {
      std::lock_guard<std::mutex> lock(self.mutex_);
      const auto it = self.sizes_.find(data);
      if (it != self.sizes_.end()) {
        const size_t bytes = it->second;
        self.current_ -= static_cast<int64_t>(bytes);
        self.sizes_.erase(it);
        if (self.reuse_ && self.kept_bytes_ + static_cast<int64_t>(bytes) <= CpuBlockReuse::kMaxReusedBytes) {
          self.kept_[bytes].push_back(data);
          self.kept_bytes_ += static_cast<int64_t>(bytes);
          return;
        }
      }
    }
    self.inner_delete_(data);
  }

  c10::Allocator* inner_;
  c10::DeleterFnPtr inner_delete_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, size_t> sizes_;
  mutable int64_t current_ = 0;
  mutable int64_t peak_ = 0;
  bool reuse_ = false;                                           // a CpuBlockReuse lives
  mutable std::unordered_map<size_t, std::vector<void*>> kept_;  // freed blocks by size, while reuse_
  mutable int64_t kept_bytes_ = 0;
};

CountingCpuAllocator* CountingCpuAllocator::instance = nullptr;

}  // namespace

bool InstallCountingCpuAllocator() {
  static const bool installed = [] {
    c10::Allocator* current = c10::GetCPUAllocator();
    if (current != c10::GetDefaultCPUAllocator() || current->raw_deleter() == nullptr) return false;
    // Never freed: blocks handed out under its deleter may outlive any scope.
    CountingCpuAllocator::instance = new CountingCpuAllocator(current);
    c10::SetCPUAllocator(CountingCpuAllocator::instance, /*priority=*/1);
    return c10::GetCPUAllocator() == CountingCpuAllocator::instance;
  }();
  return installed;
}

CpuAllocatedBytes CountedCpuBytes() {
  if (CountingCpuAllocator::instance == nullptr) return {};
  return CountingCpuAllocator::instance->Counts();
}

int64_t ResetCpuAllocatedPeak() {
  if (CountingCpuAllocator::instance == nullptr) return 0;
  return CountingCpuAllocator::instance->ResetPeak();
}

CpuBlockReuse::CpuBlockReuse() {
  if (CountingCpuAllocator::instance != nullptr) CountingCpuAllocator::instance->Reuse(true);
}

int64_t CpuBlockReuse::KeptBytes() {
  return CountingCpuAllocator::instance == nullptr ? 0 : CountingCpuAllocator::instance->Kept();
}

CpuBlockReuse::~CpuBlockReuse() {
  if (CountingCpuAllocator::instance != nullptr) CountingCpuAllocator::instance->Reuse(false);
}

}  // namespace frontier
