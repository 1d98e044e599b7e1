#include "worker/trial/tasks/task.h"

#include <algorithm>

namespace frontier {

Registry<TaskEntry>& TaskRegistry() {
  static Registry<TaskEntry> registry = [] {
    Registry<TaskEntry> r("task");
    r.Add("classification", {{"fashion-mnist", "synthetic"}, MakeClassificationTask});
    r.Add("bev", {{"bev-synthetic"}, MakeBevTask});
    return r;
  }();
  return registry;
}

std::unique_ptr<Task> MakeTask(const TaskSpec& task) {
  const Registry<TaskEntry>& registry = TaskRegistry();
  for (const std::string& name : registry.Names()) {
    const TaskEntry& entry = registry.At(name);
    if (std::find(entry.datasets.begin(), entry.datasets.end(), task.dataset) != entry.datasets.end()) {
      return entry.make();
    }
  }
  throw SpecError("task.dataset", "no task serves the dataset '" + task.dataset + "'");
}

}  // namespace frontier
