#include "server/rpc/call_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace frontier {

CallPool::CallPool(int threads, int niceness) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    threads_.emplace_back([this, niceness] {
      if (niceness != 0) {  // relative to the thread that made the pool (setpriority sets an absolute value)
        const auto tid = static_cast<id_t>(syscall(SYS_gettid));
        setpriority(PRIO_PROCESS, tid, std::clamp(getpriority(PRIO_PROCESS, tid) + niceness, -20, 19));
      }
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock<std::mutex> lock(mu_);
          ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
          if (tasks_.empty()) return;  // stopping, nothing left
          task = std::move(tasks_.front());
          tasks_.pop_front();
        }
        task();
      }
    });
  }
}

CallPool::~CallPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void CallPool::Run(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

}  // namespace frontier
