#include "worker/agent/worker_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "metrics/families.h"

#include <algorithm>
#include <cctype>

namespace frontier {
namespace {

using nlohmann::json;

constexpr const char* kOutcomes[] = {"completed", "diverged",   "failed",
                                     "stopped",   "lease_lost", "interrupted"};

// Step times from a fraction of a millisecond (tiny CPU models) to seconds (large GPU steps).
const prometheus::Histogram::BucketBoundaries kStepTimeBuckets = {0.0005, 0.001, 0.002, 0.004, 0.008, 0.016,
                                                                  0.032,  0.064, 0.128, 0.256, 0.512, 1.024,
                                                                  2.048,  4.096, 8.192, 16.384};
const prometheus::Histogram::BucketBoundaries kMfuBuckets = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                                             0.15,  0.2,   0.3,   0.4,  0.5,  0.6,  0.8};

// The number at `key` of `object`, or 0 when it is missing or not a number.
double Number(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : 0.0;
}

// "exp-000001-t0003" -> ("exp-000001", 3); ids of another shape -> ("unknown", 0).
std::pair<std::string, int> SplitTrialId(const std::string& trial_id) {
  const size_t t = trial_id.rfind("-t");
  if (t == std::string::npos || t == 0 || t + 2 >= trial_id.size()) return {"unknown", 0};
  const std::string number = trial_id.substr(t + 2);
  if (!std::all_of(number.begin(), number.end(), [](unsigned char c) { return std::isdigit(c); }) ||
      number.size() > 9) {
    return {"unknown", 0};
  }
  return {trial_id.substr(0, t), std::stoi(number)};
}

}  // namespace

struct WorkerMetrics::Running {
  int slot = 0;
  std::string experiment;
  prometheus::Labels labels;  // slot, experiment
  int warmup_steps = 0;
  double batch_size = 0;
  double train_flops_per_step = 0;
  double peak_flops_per_s = 0;
  double data_wait_ms = 0, step_time_ms = 0;  // summed over sampled steps after warm-up
  prometheus::Gauge* current = nullptr;
  prometheus::Gauge* step = nullptr;
  prometheus::Gauge* throughput = nullptr;
  prometheus::Gauge* mfu = nullptr;
  prometheus::Gauge* data_wait = nullptr;
};

struct WorkerMetrics::ExperimentSeries {
  prometheus::Histogram* step_time = nullptr;
  prometheus::Histogram* finished_mfu = nullptr;
};

WorkerMetrics::WorkerMetrics(int slots, const std::string& device, const std::string& device_name,
                             const std::string& version, int kept_experiments)
    : kept_experiments_(std::max(1, kept_experiments)),
      registry_(std::make_shared<prometheus::Registry>()),
      current_trial_(GaugeFamily(*registry_, "frontier_worker_current_trial",
                                 "Number of the trial a slot runs within its experiment (trial id "
                                 "<experiment>-t<number>); absent while the slot is idle")),
      step_(GaugeFamily(*registry_, "frontier_worker_trial_step",
                        "Last reported training step of the slot's running trial")),
      throughput_(GaugeFamily(*registry_, "frontier_worker_trial_throughput_samples_per_second",
                              "Running trial's throughput: batch size / median step time after warm-up")),
      mfu_(GaugeFamily(
          *registry_, "frontier_worker_trial_mfu_ratio",
          "Running trial's model FLOP utilization: train FLOPs per step / median step time / peak "
          "FLOP/s of the device")),
      data_wait_(
          GaugeFamily(*registry_, "frontier_worker_trial_data_wait_ratio",
                      "Running trial's share of time waiting for data: data wait / (step + data wait), "
                      "sampled steps after warm-up")),
      memory_(GaugeFamily(*registry_, "frontier_worker_device_memory_peak_bytes",
                          "Peak device memory of the slot's last finished trial (kind: cuda-max-allocated, "
                          "cpu-allocated-growth or cpu-rss-growth)")),
      step_time_(
          HistogramFamily(*registry_, "frontier_worker_step_time_seconds",
                          "Optimizer step time (forward, backward, update), sampled at each progress event "
                          "after warm-up")),
      finished_mfu_(HistogramFamily(*registry_, "frontier_worker_finished_trial_mfu_ratio",
                                    "Final MFU of completed trials")),
      busy_slots_(GaugeFamily(*registry_, "frontier_worker_busy_slots", "Slots running a trial").Add({})),
      started_(CounterFamily(*registry_, "frontier_worker_trials_started_total",
                             "Trials this worker leased and started")
                   .Add({})),
      finished_(CounterFamily(*registry_, "frontier_worker_trials_finished_total",
                              "Trials this worker ended, by outcome (completed, diverged, failed, stopped, "
                              "lease_lost, interrupted)")) {
  GaugeFamily(*registry_, "frontier_worker_slots", "Trials this worker runs at once").Add({}).Set(slots);
  GaugeFamily(*registry_, "frontier_worker_info", "The worker's device and version (value 1)")
      .Add({{"device", device}, {"device_name", device_name}, {"version", version}})
      .Set(1);
  for (const char* outcome : kOutcomes) finished_.Add({{"outcome", outcome}});
}

WorkerMetrics::~WorkerMetrics() = default;

WorkerMetrics::ExperimentSeries& WorkerMetrics::SeriesFor(const std::string& experiment_id) {
  auto it = experiments_.find(experiment_id);
  if (it != experiments_.end()) {
    experiment_order_.erase(std::find(experiment_order_.begin(), experiment_order_.end(), experiment_id));
    experiment_order_.push_back(experiment_id);
    return *it->second;
  }
  // Evict the least recently started experiments that no slot is running.
  for (auto old = experiment_order_.begin();
       old != experiment_order_.end() && static_cast<int>(experiments_.size()) >= kept_experiments_;) {
    const bool in_use = std::any_of(running_.begin(), running_.end(),
                                    [&](const auto& entry) { return entry.second->experiment == *old; });
    if (in_use) {
      ++old;
      continue;
    }
    const auto evicted = experiments_.find(*old);
    step_time_.Remove(evicted->second->step_time);
    finished_mfu_.Remove(evicted->second->finished_mfu);
    experiments_.erase(evicted);
    old = experiment_order_.erase(old);
  }
  auto series = std::make_unique<ExperimentSeries>();
  series->step_time = &step_time_.Add({{"experiment", experiment_id}}, kStepTimeBuckets);
  series->finished_mfu = &finished_mfu_.Add({{"experiment", experiment_id}}, kMfuBuckets);
  experiment_order_.push_back(experiment_id);
  return *experiments_.emplace(experiment_id, std::move(series)).first->second;
}

void WorkerMetrics::TrialStarted(int slot, const std::string& trial_id, const std::string& spec_json) {
  auto trial = std::make_unique<Running>();
  trial->slot = slot;
  int number = 0;
  std::tie(trial->experiment, number) = SplitTrialId(trial_id);
  trial->labels = {{"slot", std::to_string(slot)}, {"experiment", trial->experiment}};
  const json spec = json::parse(spec_json, nullptr, /*allow_exceptions=*/false);
  if (spec.is_object() && spec.contains("task") && spec["task"].is_object()) {
    trial->batch_size = Number(spec["task"], "batch_size");
    trial->warmup_steps = static_cast<int>(Number(spec["task"], "warmup_steps"));
  }
  started_.Increment();
  std::lock_guard<std::mutex> lock(mutex_);
  SeriesFor(trial->experiment);
  trial->current = &current_trial_.Add(trial->labels);
  trial->current->Set(number);
  trial->step = &step_.Add(trial->labels);
  const auto previous = running_.find(trial_id);
  if (previous != running_.end()) {  // started again without an end: replace it
    RemoveSlotSeries(*previous->second);
    running_.erase(previous);
  } else {
    busy_slots_.Increment();
  }
  running_.emplace(trial_id, std::move(trial));
}

void WorkerMetrics::TrialEvent(const std::string& trial_id, const json& event) {
  if (!event.is_object()) return;
  const auto kind_it = event.find("event");
  if (kind_it == event.end() || !kind_it->is_string()) return;
  const std::string kind = kind_it->get<std::string>();
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = running_.find(trial_id);
  if (it == running_.end()) return;
  Running& trial = *it->second;
  if (kind == "start") {
    trial.train_flops_per_step = Number(event, "train_flops_per_step");
    trial.peak_flops_per_s = Number(event, "peak_flops_per_s");
  } else if (kind == "progress") {
    const double step = Number(event, "step");
    trial.step->Set(step);
    const double step_ms = Number(event, "step_time_ms");
    if (step > trial.warmup_steps && step_ms > 0) {
      SeriesFor(trial.experiment).step_time->Observe(step_ms / 1000.0);
      trial.step_time_ms += step_ms;
      trial.data_wait_ms += Number(event, "data_wait_ms");
      if (trial.data_wait == nullptr) trial.data_wait = &data_wait_.Add(trial.labels);
      trial.data_wait->Set(trial.data_wait_ms / (trial.data_wait_ms + trial.step_time_ms));
    }
    const double median_s = Number(event, "median_step_time_ms") / 1000.0;
    if (median_s > 0 && trial.batch_size > 0) {
      if (trial.throughput == nullptr) trial.throughput = &throughput_.Add(trial.labels);
      trial.throughput->Set(trial.batch_size / median_s);
    }
    if (median_s > 0 && trial.train_flops_per_step > 0 && trial.peak_flops_per_s > 0) {
      if (trial.mfu == nullptr) trial.mfu = &mfu_.Add(trial.labels);
      trial.mfu->Set(trial.train_flops_per_step / median_s / trial.peak_flops_per_s);
    }
  } else if (kind == "eval") {
    trial.step->Set(Number(event, "step"));
  } else if (kind == "result") {
    const auto status = event.find("status");
    const bool completed = status != event.end() && *status == "completed";
    const auto mfu = event.find("mfu");
    if (completed && mfu != event.end() && mfu->is_number()) {
      SeriesFor(trial.experiment).finished_mfu->Observe(mfu->get<double>());
    }
    const auto memory = event.find("peak_memory_mb");
    if (memory != event.end() && memory->is_number()) {
      const auto kind_of_memory = event.find("peak_memory_kind");
      const std::string memory_kind = kind_of_memory != event.end() && kind_of_memory->is_string()
                                          ? kind_of_memory->get<std::string>()
                                          : "";
      memory_.Add({{"slot", std::to_string(trial.slot)}, {"kind", memory_kind}})
          .Set(memory->get<double>() * 1024.0 * 1024.0);
    }
  }
}

void WorkerMetrics::RemoveSlotSeries(Running& trial) {
  const std::pair<prometheus::Gauge**, prometheus::Family<prometheus::Gauge>*> series[] = {
      {&trial.current, &current_trial_},
      {&trial.step, &step_},
      {&trial.throughput, &throughput_},
      {&trial.mfu, &mfu_},
      {&trial.data_wait, &data_wait_}};
  for (const auto& [gauge, family] : series) {
    if (*gauge != nullptr) family->Remove(*gauge);
    *gauge = nullptr;
  }
}

void WorkerMetrics::TrialEnded(const std::string& trial_id, const std::string& outcome) {
  const bool known = std::find(std::begin(kOutcomes), std::end(kOutcomes), outcome) != std::end(kOutcomes);
  finished_.Add({{"outcome", known ? outcome : "other"}}).Increment();
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = running_.find(trial_id);
  if (it == running_.end()) return;
  RemoveSlotSeries(*it->second);
  running_.erase(it);
  busy_slots_.Decrement();
}

}  // namespace frontier
