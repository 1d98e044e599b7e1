#include "server/search/external.h"
#include "os/monotonic.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

namespace frontier {
namespace {

using nlohmann::json;

// The baseline's value of a dimension: the value its first path has in the base spec.
std::optional<size_t> BaselineIndex(const SearchSpace& space, const Dimension& dim) {
  for (size_t i = 0; i < dim.choices.size(); ++i) {
    if (IsBaseline(space, json{{dim.name, dim.choices[i]}})) return i;
  }
  return std::nullopt;
}

// What a proposer sends (rationales, names, messages) is shown in tables and
// stored as text: one line, bounded, no control characters (a NUL would not
// even fit PostgreSQL's TEXT).
std::string OneBoundedLine(const std::string& text) {
  constexpr size_t kMax = 2000;
  std::string out;
  for (char c : text.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? ' ' : c;
  }
  // Do not cut a UTF-8 sequence in half.
  if (text.size() > kMax) {
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80)) out.pop_back();
  }
  return out;
}

class ExternalStrategy final : public Strategy {
 public:
  ExternalStrategy(const SearchSpace& space, int steps, std::unique_ptr<ProposerClient> client,
                   ExternalOptions options)
      : space_(space), steps_(steps), client_(std::move(client)), options_(options) {
    const size_t grid = GridSize(space_);
    const bool baseline_in_grid =
        std::all_of(space_.dimensions.begin(), space_.dimensions.end(),
                    [&](const Dimension& dim) { return BaselineIndex(space_, dim).has_value(); });
    space_size_ = grid == SIZE_MAX ? 0 : grid - (baseline_in_grid && grid > 0 ? 1 : 0);
    worker_ = std::thread([this] { Run(); });
  }

  ~ExternalStrategy() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    client_->Cancel();
    worker_.join();
  }

  std::vector<Proposal> Ask() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Proposal> out = std::move(arrived_);
    arrived_.clear();
    MaybeCall();
    return out;
  }

  void Tell(const Evaluation& evaluation) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (evaluation.config.empty()) {
      baseline_ = evaluation;
      return;
    }
    auto it = index_.find(ConfigKey(evaluation.config));
    if (it == index_.end()) return;
    ToldProposal& entry = proposals_[it->second];
    if (!entry.evaluation) {
      entry.evaluation = evaluation;
      --outstanding_;
    }
    MaybeCall();
  }

  bool Finished() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return Done() && arrived_.empty() && !in_flight_;
  }

  const std::vector<std::string>& Skipped() const override { return skipped_; }
  bool Asynchronous() const override { return true; }

  std::string Paused() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return paused_;
  }

  std::vector<ProposerCallRecord> TakeCalls() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ProposerCallRecord> out = std::move(calls_);
    calls_.clear();
    return out;
  }

  void Attach(const std::string& experiment_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    experiment_id_ = experiment_id;
    attached_ = true;
    MaybeCall();
  }

  bool Restore(const std::optional<Evaluation>& baseline,
               const std::vector<StoredProposal>& history) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (baseline) baseline_ = *baseline;
    for (const StoredProposal& stored : history) {
      const std::string key = ConfigKey(stored.proposal.config);
      if (index_.count(key)) continue;
      index_[key] = proposals_.size();
      proposals_.push_back({stored.proposal, stored.evaluation});
      if (!stored.evaluation) ++outstanding_;
    }
    return true;
  }

 private:
  // The following require mu_.
  bool Done() const {
    if (proposer_finished_) return true;
    if (options_.trials > 0 && proposals_.size() >= static_cast<size_t>(options_.trials)) return true;
    return space_size_ > 0 && proposals_.size() + invalid_keys_.size() >= space_size_;
  }

  int Wanted() const {
    int wanted = options_.batch - outstanding_;
    if (options_.trials > 0)
      wanted = std::min<int>(wanted, options_.trials - static_cast<int>(proposals_.size()));
    return wanted;
  }

  void MaybeCall() {
    if (!attached_ || in_flight_ || Done() || Wanted() <= 0 || Monotonic::now() < retry_at_) return;
    in_flight_ = true;
    wake_.notify_all();
  }

  ProposerCall MakeCall() const {
    ProposerCall call;
    call.experiment_id = experiment_id_;
    call.count = Wanted();
    call.baseline = baseline_;
    call.proposals = proposals_;
    call.rejections = rejections_;
    call.max_configs = options_.trials;
    return call;
  }

  void Backoff() {
    retry_ms_ = retry_ms_ == 0 ? options_.retry_ms : std::min(retry_ms_ * 2, options_.max_retry_ms);
    retry_at_ = Monotonic::now() + std::chrono::milliseconds(retry_ms_);
  }

  // Validates an answer; accepted proposals go to arrived_. Returns how many.
  int Apply(const ProposerAnswer& answer, int asked) {
    rejections_.clear();
    const std::string proposer = answer.proposer.empty() ? "external" : OneBoundedLine(answer.proposer);
    int accepted = 0;
    std::string last_reason;
    for (const ProposedChoices& proposed : answer.configs) {
      CheckedProposal checked;
      if (accepted >= asked) {
        checked.reason = "beyond the " + std::to_string(asked) + " configurations asked for";
      } else {
        checked = CheckProposal(space_, proposed, steps_,
                                [&](const std::string& key) { return index_.count(key) > 0; });
      }
      if (!checked.config) {
        if (checked.reason.rfind("invalid trial spec", 0) == 0)
          invalid_keys_.insert(ConfigKey(proposed.choices));
        rejections_.push_back({proposed.choices, checked.reason});
        last_reason = checked.reason;
        continue;
      }
      const std::string label =
          proposed.fallback.empty() ? proposer : FallbackProposer(proposer, OneBoundedLine(proposed.fallback));
      Proposal proposal{*checked.config, steps_, label, OneBoundedLine(proposed.rationale)};
      index_[ConfigKey(proposal.config)] = proposals_.size();
      proposals_.push_back({proposal, std::nullopt});
      arrived_.push_back(std::move(proposal));
      ++outstanding_;
      ++accepted;
    }
    if (answer.finished) proposer_finished_ = true;
    if (accepted > 0 || proposer_finished_) {
      paused_.clear();
      fruitless_ = 0;
      retry_ms_ = 0;
      return accepted;
    }
    ++fruitless_;
    Backoff();
    if (!answer.error.empty()) {
      // The proposer says it cannot propose (its model is down, refuses the key, ...): waiting for
      // max_invalid answers would only hide it.
      paused_ = OneBoundedLine("proposer " + proposer + " at " + client_->Where() +
                               " cannot propose: " + answer.error);
    } else if (fruitless_ >= options_.max_invalid_answers) {
      paused_ = OneBoundedLine(
          "proposer at " + client_->Where() + " proposed no valid configuration in " +
          std::to_string(fruitless_) + " answers in a row (" +
          (answer.configs.empty() ? std::string("it proposed nothing") : "last rejected: " + last_reason) +
          ")");
    }
    return accepted;
  }

  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || in_flight_; });
      if (stop_) return;
      const ProposerCall call = MakeCall();
      lock.unlock();
      std::optional<ProposerAnswer> answer;
      std::string error;
      const auto started = Monotonic::now();
      try {
        answer = client_->Propose(call);
      } catch (const ProposerUnavailable& e) {
        error = OneBoundedLine(e.what());  // the proposer's own message may be anything
      } catch (const std::exception& e) {
        error = OneBoundedLine(std::string("unexpected error: ") + e.what());
      }
      ProposerCallRecord record;
      record.latency_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(Monotonic::now() - started).count();
      record.asked = call.count;
      lock.lock();
      in_flight_ = false;
      if (stop_) return;
      if (answer) {
        record.accepted = Apply(*answer, call.count);
        record.rejected = static_cast<int>(rejections_.size());
        record.proposer = answer->proposer.empty() ? "external" : OneBoundedLine(answer->proposer);
        record.prompt_tokens = answer->usage.prompt_tokens;
        record.completion_tokens = answer->usage.completion_tokens;
        record.model_calls = answer->usage.model_calls;
        record.error = OneBoundedLine(answer->error);
      } else {
        paused_ = "proposer at " + client_->Where() + " unavailable: " + error;
        record.proposer = client_->Where();
        record.error = error;
        Backoff();
      }
      if (calls_.size() < 10000) calls_.push_back(std::move(record));  // taken at every scheduler tick
    }
  }

  const SearchSpace space_;
  const int steps_;
  std::unique_ptr<ProposerClient> client_;
  const ExternalOptions options_;
  size_t space_size_ = 0;  // runnable configurations at most; 0: too many to count
  std::vector<std::string> skipped_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::string experiment_id_;
  bool attached_ = false;
  bool stop_ = false;
  bool in_flight_ = false;  // a call is wanted or under way
  std::optional<Evaluation> baseline_;
  std::vector<ToldProposal> proposals_;        // accepted, in order
  std::map<std::string, size_t> index_;        // ConfigKey -> proposals_ index
  int outstanding_ = 0;                        // accepted and not told
  std::vector<Proposal> arrived_;              // accepted, not yet returned by Ask
  std::vector<ProposerRejection> rejections_;  // of the last answer
  std::set<std::string> invalid_keys_;         // choices rejected for an invalid trial spec
  bool proposer_finished_ = false;
  int fruitless_ = 0;  // answers in a row without a valid proposal
  int64_t retry_ms_ = 0;
  Monotonic::time_point retry_at_{};
  std::string paused_;
  std::vector<ProposerCallRecord> calls_;  // not taken yet
  std::thread worker_;                     // last: started once everything above is built
};

}  // namespace

std::string FallbackProposer(const std::string& proposer, const std::string& fallback) {
  return kFallbackProposerPrefix + fallback.substr(0, 100) + " (" + proposer + ")";
}

bool IsFallbackProposer(const std::string& proposer) { return proposer.rfind(kFallbackProposerPrefix, 0) == 0; }

Choices ChoicesOf(const SearchSpace& space, const Config& config) {
  Choices choices;
  for (const Dimension& dim : space.dimensions) {
    if (config.contains(dim.name)) {
      const auto it = std::find(dim.choices.begin(), dim.choices.end(), config[dim.name]);
      if (it != dim.choices.end()) choices[dim.name] = static_cast<int>(it - dim.choices.begin());
    } else if (std::optional<size_t> base = BaselineIndex(space, dim)) {
      choices[dim.name] = static_cast<int>(*base);
    }
  }
  return choices;
}

CheckedProposal CheckProposal(const SearchSpace& space, const ProposedChoices& proposed, int full_steps,
                              const std::function<bool(const std::string& config_key)>& proposed_before) {
  CheckedProposal out;
  for (const auto& [name, index] : proposed.choices) {
    const std::string& dimension = name;  // C++17 lambdas cannot capture a structured binding (clang)
    const bool known = std::any_of(space.dimensions.begin(), space.dimensions.end(),
                                   [&](const Dimension& dim) { return dim.name == dimension; });
    if (!known) {
      out.reason = "unknown dimension '" + name + "'";
      return out;
    }
  }
  if (proposed.steps != 0 && proposed.steps != full_steps) {
    out.reason = "steps " + std::to_string(proposed.steps) + ": every configuration runs at the task's " +
                 std::to_string(full_steps) + " steps (0 means those)";
    return out;
  }
  Config config = json::object();
  for (const Dimension& dim : space.dimensions) {
    const auto it = proposed.choices.find(dim.name);
    if (it == proposed.choices.end()) {
      const std::optional<size_t> base = BaselineIndex(space, dim);
      if (!base) {
        out.reason = "dimension '" + dim.name + "' not set (the baseline's value is none of its choices)";
        return out;
      }
      config[dim.name] = dim.choices[*base];
      continue;
    }
    if (it->second < 0 || static_cast<size_t>(it->second) >= dim.choices.size()) {
      out.reason = "dimension '" + dim.name + "': choice " + std::to_string(it->second) + " out of range (" +
                   std::to_string(dim.choices.size()) + " choices, 0.." +
                   std::to_string(dim.choices.size() - 1) + ")";
      return out;
    }
    config[dim.name] = dim.choices[static_cast<size_t>(it->second)];
  }
  if (IsBaseline(space, config)) {
    out.reason = "the baseline (it runs anyway)";
    return out;
  }
  if (proposed_before(ConfigKey(config))) {
    out.reason = "proposed before";
    return out;
  }
  if (std::optional<std::string> why = WhyInvalid(space, config)) {
    out.reason = "invalid trial spec: " + *why;
    return out;
  }
  out.config = std::move(config);
  return out;
}

std::unique_ptr<Strategy> MakeExternalStrategy(const SearchSpace& space, int steps,
                                               std::unique_ptr<ProposerClient> client,
                                               ExternalOptions options) {
  return std::make_unique<ExternalStrategy>(space, steps, std::move(client), options);
}

}  // namespace frontier
