// Threads that run the worker RPCs' bodies, which block on the store, off
// gRPC's callback threads. gRPC runs callback handlers on a couple of
// threads; a handler that waits there for a synchronous commit holds back
// every other call, so no more than two commits are ever in flight and a
// durable PostgreSQL flushes its WAL for one or two of them at a time. With
// the bodies on this pool, as many commits wait at once as the pool has
// threads (and the store connections), and PostgreSQL flushes them together
// (group commit). Tasks run in the order given; the destructor runs what is
// queued, then joins. `niceness` > 0 lowers the threads' CPU priority (a pool
// whose work may wait while the others' runs first).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace frontier {

class CallPool {
 public:
  explicit CallPool(int threads, int niceness = 0);
  ~CallPool();
  CallPool(const CallPool&) = delete;
  CallPool& operator=(const CallPool&) = delete;

  void Run(std::function<void()> task);

 private:
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace frontier
