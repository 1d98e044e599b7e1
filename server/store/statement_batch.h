// Concurrent calls whose writes share one statement (group commit in the
// application): the first caller to find no batch being recorded takes every
// item queued so far, records them with one call of `record` and answers
// each; the others wait for their answer (or, when the caller finds its own
// item still queued after a batch, the next of them records the next batch).
// Alone, an item is recorded at once. PostgresStore batches progress events
// and completions this way (docs/deploy.md).
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <vector>

namespace frontier {

// `Item` carries its own inputs and answer, and a `std::exception_ptr
// failure` that the caller rethrows.
template <typename Item>
class StatementBatch {
 public:
  // Returns once a batch holding `item` has been recorded by
  // `record(const std::vector<Item*>&)`, which sets each item's answer. An
  // exception out of `record` becomes the failure of every item it was given.
  template <typename Record>
  void Add(Item& item, Record&& record) {
    Waiting me{&item};
    std::unique_lock<std::mutex> lock(mu_);
    queued_.push_back(&me);
    while (!me.answered) {
      if (recording_) {
        answered_.wait(lock);
        continue;
      }
      recording_ = true;
      std::vector<Waiting*> batch;
      batch.swap(queued_);
      lock.unlock();
      try {
        std::vector<Item*> items;
        items.reserve(batch.size());
        for (Waiting* w : batch) items.push_back(w->item);
        record(items);
      } catch (...) {
        for (Waiting* w : batch) w->item->failure = std::current_exception();
      }
      lock.lock();
      for (Waiting* w : batch) w->answered = true;
      recording_ = false;
      answered_.notify_all();
    }
  }

 private:
  struct Waiting {
    Item* item;
    bool answered = false;
  };
  std::mutex mu_;  // guards what follows
  std::condition_variable answered_;
  std::vector<Waiting*> queued_;  // items of callers that wait
  bool recording_ = false;
};

}  // namespace frontier
