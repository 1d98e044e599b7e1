#include "worker/trial/measure/cpu_allocator.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

namespace frontier {
namespace {

class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* inner) : inner_(inner), inner_delete_(inner->raw_deleter()) {}

  c10::DataPtr allocate(size_t bytes) const override {
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
      sizes_[data] = bytes;
      current_ += static_cast<int64_t>(bytes);
      peak_ = std::max(peak_, current_);
    }
    return {data, data, &Delete, device};
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
  static void Delete(void* data) {
    CountingCpuAllocator& self = *instance;
    {
      std::lock_guard<std::mutex> lock(self.mutex_);
      const auto it = self.sizes_.find(data);
      if (it != self.sizes_.end()) {
        self.current_ -= static_cast<int64_t>(it->second);
        self.sizes_.erase(it);
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

}  // namespace frontier
