// The conformance tests themselves (one translation unit; the fixture is in
// store_conformance.h, the instantiations in each store's test file).
#include "tests/server/store_conformance.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace frontier {

TEST_P(StoreConformanceTest, CreatesExperimentsWithTrials) {
  const std::string id = NewExperiment(3);
  auto e = store_->GetExperiment(id);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->name, "x");
  EXPECT_EQ(e->state, "running");
  EXPECT_EQ(e->skipped, std::vector<std::string>{"{\"a\":1}: reason"});
  EXPECT_EQ(e->created_ms, 1000);
  auto trials = store_->ListTrials(id);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].id, id + "-t0001");
  EXPECT_EQ(trials[2].seed, 3);
  EXPECT_TRUE(trials[0].is_baseline);
  EXPECT_EQ(nlohmann::json::parse(trials[1].spec_json)["trial_id"], id + "-t0002");  // the spec knows its id
  EXPECT_EQ(store_->CountTrials(id).pending, 3);
  const std::string second = NewExperiment(1);
  EXPECT_NE(second, id);
  EXPECT_EQ(store_->ListExperiments(10).front().id, second);  // newest first
  EXPECT_FALSE(store_->GetExperiment("exp-999999").has_value());
}

TEST_P(StoreConformanceTest, NamesAreStoredVerbatim) {
  ExperimentRecord e;
  e.name = "x'); DROP TABLE trials; --";
  e.space_yaml = "name: \"x'); DROP TABLE trials; --\"";
  e.source_name = "weird 'name'.yaml";
  const std::string id = store_->CreateExperiment(e, {Trial(1)}, 5);
  EXPECT_EQ(store_->GetExperiment(id)->name, e.name);
  EXPECT_EQ(store_->ListTrials(id).size(), 1u);
}

// Progress events arriving together (the PostgreSQL store records them in one
// statement): each caller gets its own answer, every held event is recorded
// verbatim once, each lease renewed as its own event says, none of the others.
TEST_P(StoreConformanceTest, ConcurrentProgressEventsEachGetTheirOwnAnswer) {
  constexpr int kTrials = 16;
  const std::string id = NewExperiment(kTrials);
  std::vector<TrialRow> leased;
  for (int i = 0; i < kTrials; ++i)
    leased.push_back(*store_->LeaseNextTrial("w" + std::to_string(i), 2000, 500));
  // Per trial: its holder renewing (its lease ends at 2500, before renew_before), the same event from
  // another worker, and one for another attempt. The payload needs escaping in any batch encoding.
  const auto event = [](int i) {
    return R"({"event":"progress","step":)" + std::to_string(i) + R"(,"note":"a \"q\" \\ é,{}"})";
  };
  std::atomic<int> ready{0};
  std::vector<int> answers(3 * kTrials, -1);
  std::vector<std::thread> threads;
  for (int k = 0; k < 3 * kTrials; ++k) {
    threads.emplace_back([&, k] {
      const int i = k % kTrials, kind = k / kTrials;
      const TrialRow& t = leased[i];
      ++ready;
      while (ready < 3 * kTrials) std::this_thread::yield();  // all at once
      const std::string worker = kind == 1 ? "intruder" : t.worker_id;
      answers[k] = store_->RecordProgress(
          {t.id, kind == 2 ? t.attempt + 1 : t.attempt, i, event(i), 2100 + i}, worker, 9000 + i, 3000);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < kTrials; ++i) {
    SCOPED_TRACE("trial " + std::to_string(i));
    EXPECT_EQ(answers[i], 1);                // the holder
    EXPECT_EQ(answers[kTrials + i], 0);      // another worker
    EXPECT_EQ(answers[2 * kTrials + i], 0);  // another attempt
    const std::vector<ProgressRow> recorded = store_->ListProgress(leased[i].id);
    ASSERT_EQ(recorded.size(), 1u);
    EXPECT_EQ(recorded[0].event_json, event(i));
    EXPECT_EQ(recorded[0].step, i);
    EXPECT_EQ(recorded[0].at_ms, 2100 + i);
    EXPECT_EQ(store_->GetTrial(leased[i].id)->lease_expires_ms, 9000 + i);
  }
  EXPECT_EQ(store_->CountTrials(id).running, kTrials);
}

TEST_P(StoreConformanceTest, RecordsWhoSubmitted) {
  ExperimentRecord e;
  e.name = "owned";
  e.owner = "alice";
  const std::string id = store_->CreateExperiment(e, {Trial(1)}, 5);
  EXPECT_EQ(store_->GetExperiment(id)->owner, "alice");
  EXPECT_EQ(store_->ListExperiments(1).front().owner, "alice");
  EXPECT_EQ(store_->GetExperiment(NewExperiment(1))->owner, "");  // no tokens: nobody
}

TEST_P(StoreConformanceTest, FindsExperimentsByOwnerAndSubmitId) {
  ExperimentRecord e;
  e.name = "keyed";
  e.owner = "alice";
  e.submit_id = "cli-0123:a_b.c";
  const std::string id = store_->CreateExperiment(e, {Trial(1), Trial(2)}, 5);
  const std::optional<ExperimentRecord> found = store_->FindSubmittedExperiment("alice", e.submit_id);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, id);
  EXPECT_EQ(found->submit_id, e.submit_id);
  EXPECT_EQ(store_->GetExperiment(id)->submit_id, e.submit_id);
  EXPECT_FALSE(store_->FindSubmittedExperiment("bob", e.submit_id).has_value());
  EXPECT_FALSE(store_->FindSubmittedExperiment("alice", "other").has_value());
  // One experiment per (owner, key): a second is refused and nothing of it stored.
  e.name = "second";
  EXPECT_THROW(store_->CreateExperiment(e, {Trial(1)}, 6), StoreError);
  EXPECT_EQ(store_->ListExperiments(10).size(), 1u);
  EXPECT_EQ(store_->FindSubmittedExperiment("alice", e.submit_id)->name, "keyed");
  // The same key of another owner is another experiment; no key is never found and never unique.
  e.owner = "bob";
  const std::string bobs = store_->CreateExperiment(e, {Trial(1)}, 7);
  EXPECT_EQ(store_->FindSubmittedExperiment("bob", e.submit_id)->id, bobs);
  EXPECT_NE(NewExperiment(1), NewExperiment(1));
  EXPECT_FALSE(store_->FindSubmittedExperiment("", "").has_value());
  EXPECT_EQ(store_->GetExperiment(NewExperiment(1))->submit_id, "");
  EXPECT_EQ(store_->ListExperiments(10).size(), 5u);
  EXPECT_EQ(store_->ListTrials(id).size(), 2u);
  EXPECT_EQ(store_->CountTrials(bobs).total, 1);
}

TEST_P(StoreConformanceTest, LeasesInOrderAndOnlyOnce) {
  const std::string id = NewExperiment(2);
  auto a = store_->LeaseNextTrial("w1", 2000, 500);
  auto b = store_->LeaseNextTrial("w2", 2000, 500);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->id, id + "-t0001");
  EXPECT_EQ(b->id, id + "-t0002");
  EXPECT_EQ(a->attempt, 1);
  EXPECT_EQ(a->state, "running");
  EXPECT_EQ(a->worker_id, "w1");
  EXPECT_EQ(a->lease_expires_ms, 2500);
  EXPECT_FALSE(store_->LeaseNextTrial("w3", 2000, 500).has_value());
}

TEST_P(StoreConformanceTest, ConcurrentLeasesNeverCollide) {
  const std::string id = NewExperiment(40);
  std::vector<std::vector<std::string>> got(4);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      while (auto t = store_->LeaseNextTrial("w" + std::to_string(w), 2000, 500)) got[w].push_back(t->id);
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> all;
  size_t n = 0;
  for (const auto& g : got) {
    n += g.size();
    all.insert(g.begin(), g.end());
  }
  EXPECT_EQ(n, 40u);
  EXPECT_EQ(all.size(), 40u);
}

TEST_P(StoreConformanceTest, FinishIsIdempotentAndRejectsStaleAttempts) {
  const std::string id = NewExperiment(1);
  auto t = store_->LeaseNextTrial("w1", 2000, 500);
  EXPECT_EQ(store_->FinishTrial(t->id, 2, "completed", "{}", "", 2100), Transition::kStale);
  EXPECT_EQ(store_->FinishTrial(t->id, 1, "completed", R"({"status":"completed"})", "", 2100),
            Transition::kApplied);
  EXPECT_EQ(store_->FinishTrial(t->id, 1, "completed", R"({"status":"completed"})", "", 2200),
            Transition::kDuplicate);
  EXPECT_EQ(store_->FinishTrial("nope", 1, "completed", "{}", "", 2200), Transition::kNotFound);
  auto row = store_->GetTrial(t->id);
  EXPECT_EQ(row->state, "completed");
  EXPECT_EQ(row->finished_ms, 2100);
  EXPECT_EQ(row->result_json, R"({"status":"completed"})");
  EXPECT_EQ(store_->ExperimentsReadyToComplete(), std::vector<std::string>{id});
}

TEST_P(StoreConformanceTest, FinishAndLeaseEndsOneTrialAndLeasesTheNext) {
  NewExperiment(3);
  auto first = store_->LeaseNextTrial("w1", 2000, 500);
  ASSERT_TRUE(first.has_value());
  const Store::FinishedAndLeased r = store_->FinishTrialAndLease(
      first->id, 1, "completed", R"({"status":"completed"})", "", 2100, "w1", 700);
  EXPECT_EQ(r.finished, Transition::kApplied);
  const auto done = store_->GetTrial(first->id);
  EXPECT_EQ(done->state, "completed");
  EXPECT_EQ(done->finished_ms, 2100);
  EXPECT_EQ(done->result_json, R"({"status":"completed"})");
  ASSERT_TRUE(r.next.has_value());
  EXPECT_NE(r.next->id, first->id);
  EXPECT_EQ(r.next->state, "running");
  EXPECT_EQ(r.next->attempt, 1);
  EXPECT_EQ(r.next->worker_id, "w1");
  EXPECT_EQ(r.next->lease_expires_ms, 2800);
  EXPECT_EQ(r.next->started_ms, 2100);
  EXPECT_FALSE(r.next->spec_json.empty());
  EXPECT_EQ(store_->GetTrial(r.next->id)->state, "running");

  // A repeated completion is a duplicate, and still leases (the third trial);
  // a stale attempt is named so; with nothing pending the lease is empty.
  const Store::FinishedAndLeased again = store_->FinishTrialAndLease(
      first->id, 1, "completed", R"({"status":"completed"})", "", 2200, "w2", 700);
  EXPECT_EQ(again.finished, Transition::kDuplicate);
  ASSERT_TRUE(again.next.has_value());
  EXPECT_EQ(again.next->worker_id, "w2");
  const Store::FinishedAndLeased stale =
      store_->FinishTrialAndLease(r.next->id, 2, "completed", "{}", "", 2300, "w1", 700);
  EXPECT_EQ(stale.finished, Transition::kStale);
  EXPECT_FALSE(stale.next.has_value());
  EXPECT_EQ(store_->GetTrial(r.next->id)->state, "running");
  const TrialCountsRow counts = store_->CountTrials(first->experiment_id);
  EXPECT_EQ(counts.completed, 1);
  EXPECT_EQ(counts.running, 2);
  EXPECT_EQ(counts.pending, 0);
}

// Completions arriving together (the PostgreSQL store finishes and leases
// them in one statement): each finish applies once with its own result, each
// caller gets its own answer, and every pending trial is leased to one
// caller, with that caller's worker and lease, none twice; a pending profile
// run of a trial of the running experiment (a candidate twice over: as a
// profile run and as a pending trial) too, before the others.
TEST_P(StoreConformanceTest, ConcurrentFinishAndLeaseCallsEachGetTheirOwnAnswer) {
  constexpr int kRunning = 12, kProfileRuns = 3, kPending = 20;
  const std::string id = NewExperiment(kRunning);
  std::vector<TrialRow> held;
  for (int i = 0; i < kRunning; ++i)
    held.push_back(*store_->LeaseNextTrial("w" + std::to_string(i), 2000, 500));
  // Profile runs (the first caller, alone, may take one by itself), then more pending trials than
  // callers: in trial order the profile runs come first also among the experiment's pending trials.
  std::vector<std::string> profile_runs;
  for (int i = 0; i < kProfileRuns; ++i)
    profile_runs.push_back(store_->AddProfileRun(held[i].id, Trial(1), 2500));
  std::vector<TrialRow> more;
  for (int i = 0; i < kPending; ++i) more.push_back(Trial(2));
  store_->AddTrials(id, more, 2600);
  // Per running trial its holder's completion (the result needs escaping in any batch encoding),
  // and for two of them a stale one (another attempt) from another worker.
  const auto result = [](int i) {
    return R"({"status":"completed","n":)" + std::to_string(i) + R"(,"q":"\"é\\"})";
  };
  constexpr int kCalls = kRunning + 2;
  std::atomic<int> ready{0};
  std::vector<Store::FinishedAndLeased> answers(kCalls);
  std::vector<std::thread> threads;
  for (int k = 0; k < kCalls; ++k) {
    threads.emplace_back([&, k] {
      const TrialRow& t = held[k % kRunning];
      const bool stale = k >= kRunning;
      const std::string worker = stale ? "late" + std::to_string(k) : t.worker_id;
      ++ready;
      while (ready < kCalls) std::this_thread::yield();
      answers[k] = store_->FinishTrialAndLease(t.id, stale ? 2 : 1, "completed", result(k), "", 3000 + k,
                                               worker, 100 + k);
    });
  }
  for (auto& thread : threads) thread.join();
  std::vector<std::string> leased;
  for (int k = 0; k < kCalls; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(answers[k].finished, k < kRunning ? Transition::kApplied : Transition::kStale);
    ASSERT_TRUE(answers[k].next.has_value());  // more pending trials than callers: one each
    const TrialRow& next = *answers[k].next;
    EXPECT_EQ(next.worker_id, k < kRunning ? held[k].worker_id : "late" + std::to_string(k));
    EXPECT_EQ(next.state, "running");
    EXPECT_EQ(next.attempt, 1);
    EXPECT_EQ(next.started_ms, 3000 + k);
    EXPECT_EQ(next.lease_expires_ms, 3000 + k + 100 + k);
    EXPECT_FALSE(next.spec_json.empty());
    leased.push_back(next.id);
  }
  for (const std::string& run : profile_runs) {
    EXPECT_NE(std::find(leased.begin(), leased.end(), run), leased.end()) << run;
    EXPECT_EQ(store_->GetTrial(run)->state, "running");
  }
  std::sort(leased.begin(), leased.end());
  EXPECT_EQ(std::unique(leased.begin(), leased.end()), leased.end());
  for (int i = 0; i < kRunning; ++i) {
    const TrialRow done = *store_->GetTrial(held[i].id);
    EXPECT_EQ(done.state, "completed");
    EXPECT_EQ(done.result_json, result(i));
    EXPECT_EQ(done.finished_ms, 3000 + i);
  }
  const TrialCountsRow counts = store_->CountTrials(id);  // profile runs apart
  EXPECT_EQ(counts.completed, kRunning);
  EXPECT_EQ(counts.running, kCalls - kProfileRuns);
  EXPECT_EQ(counts.pending, kPending - (kCalls - kProfileRuns));
}

TEST_P(StoreConformanceTest, ExpiredLeasesRequeueUntilMaxAttempts) {
  const std::string id = NewExperiment(1, /*max_attempts=*/2);
  auto first = store_->LeaseNextTrial("w1", 2000, 500);
  EXPECT_TRUE(store_->ExpireLeases(2400).empty());  // not yet
  EXPECT_TRUE(store_->ExtendLease(first->id, 1, "w1", 3000));
  EXPECT_FALSE(store_->ExtendLease(first->id, 1, "w2", 9000));  // not its lease
  auto expired = store_->ExpireLeases(3001);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].state, "pending");
  // The old attempt can no longer report.
  EXPECT_EQ(store_->FinishTrial(first->id, 1, "completed", "{}", "", 3002), Transition::kStale);
  auto second = store_->LeaseNextTrial("w2", 3003, 500);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->attempt, 2);
  expired = store_->ExpireLeases(4000);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].state, "failed");
  EXPECT_NE(expired[0].error.find("lease expired (attempt 2 of 2"), std::string::npos) << expired[0].error;
  EXPECT_FALSE(store_->LeaseNextTrial("w3", 4001, 500).has_value());
}

TEST_P(StoreConformanceTest, FailedAttemptsRetryThenFail) {
  NewExperiment(1, /*max_attempts=*/2);
  auto t = store_->LeaseNextTrial("w1", 2000, 500);
  EXPECT_EQ(store_->FailAttempt(t->id, 1, "crashed: SIGSEGV", true, "", 2100), Transition::kApplied);
  EXPECT_EQ(store_->FailAttempt(t->id, 1, "crashed: SIGSEGV", true, "", 2101), Transition::kDuplicate);
  EXPECT_EQ(store_->GetTrial(t->id)->state, "pending");
  t = store_->LeaseNextTrial("w1", 2200, 500);
  EXPECT_EQ(store_->FailAttempt(t->id, 2, "crashed again", true, "", 2300), Transition::kApplied);
  auto row = store_->GetTrial(t->id);
  EXPECT_EQ(row->state, "failed");
  EXPECT_EQ(row->error, "crashed again");
}

TEST_P(StoreConformanceTest, NonRetryableFailureIsFinal) {
  NewExperiment(1);
  auto t = store_->LeaseNextTrial("w1", 2000, 500);
  EXPECT_EQ(store_->FailAttempt(t->id, 1, "spec: bad", false, R"({"status":"failed"})", 2100),
            Transition::kApplied);
  EXPECT_EQ(store_->GetTrial(t->id)->state, "failed");
}

TEST_P(StoreConformanceTest, CancelAndRestartGrace) {
  const std::string id = NewExperiment(3);
  auto running = store_->LeaseNextTrial("w1", 2000, 500);
  store_->SetExperimentState(id, "cancelled");
  store_->CancelPendingTrials(id, 2100);
  const TrialCountsRow c = store_->CountTrials(id);
  EXPECT_EQ(c.cancelled, 2);
  EXPECT_EQ(c.running, 1);
  EXPECT_FALSE(store_->LeaseNextTrial("w2", 2200, 500).has_value());
  store_->ExtendAllLeases(10000);
  EXPECT_TRUE(store_->ExpireLeases(9999).empty());
  EXPECT_EQ(store_->GetTrial(running->id)->lease_expires_ms, 10000);
}

TEST_P(StoreConformanceTest, ProgressAndWorkers) {
  NewExperiment(1);
  auto t = store_->LeaseNextTrial("w1", 2000, 500);
  store_->AddProgress({t->id, 1, 20, R"({"event":"progress","step":20})", 2100});
  store_->AddProgress({t->id, 1, 10, R"({"event":"progress","step":10})", 2050});
  // ListTrialOutcomes: every trial, as ListTrials, without the spec.
  const std::vector<TrialRow> all = store_->ListTrials(t->experiment_id),
                              outcomes = store_->ListTrialOutcomes(t->experiment_id);
  ASSERT_EQ(outcomes.size(), all.size());
  EXPECT_FALSE(all[0].spec_json.empty());
  EXPECT_TRUE(outcomes[0].spec_json.empty());
  EXPECT_EQ(outcomes[0].id, all[0].id);
  EXPECT_EQ(outcomes[0].state, all[0].state);
  EXPECT_EQ(outcomes[0].worker_id, all[0].worker_id);
  auto p = store_->ListProgress(t->id);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].step, 10);
  // RecordProgress: only the attempt holding the lease records; its lease
  // (until 2500) is extended only when it ends before the renewal point.
  EXPECT_TRUE(
      store_->RecordProgress({t->id, 1, 30, R"({"event":"progress","step":30})", 2200}, "w1", 9000, 2400));
  EXPECT_EQ(store_->GetTrial(t->id)->lease_expires_ms, 2500);  // far enough from its end: left
  EXPECT_TRUE(
      store_->RecordProgress({t->id, 1, 35, R"({"event":"progress","step":35})", 2250}, "w1", 9000, 2600));
  EXPECT_EQ(store_->GetTrial(t->id)->lease_expires_ms, 9000);  // renewed
  EXPECT_TRUE(store_->RecordProgress({t->id, 1, 36, "{}", 2260}, "w1", 8000, 9500));
  EXPECT_EQ(store_->GetTrial(t->id)->lease_expires_ms, 9000);                            // never shortened
  EXPECT_FALSE(store_->RecordProgress({t->id, 1, 40, "{}", 2300}, "w2", 9900, 99000));   // another worker
  EXPECT_FALSE(store_->RecordProgress({t->id, 2, 40, "{}", 2300}, "w1", 9900, 99000));   // another attempt
  EXPECT_FALSE(store_->RecordProgress({"nope", 1, 40, "{}", 2300}, "w1", 9900, 99000));  // unknown trial
  EXPECT_EQ(store_->GetTrial(t->id)->lease_expires_ms, 9000);
  ASSERT_EQ(store_->ListProgress(t->id).size(), 5u);
  EXPECT_EQ(store_->ListProgress(t->id)[2].step, 30);
  EXPECT_EQ(store_->ListProgress(t->id)[4].step, 36);
  ASSERT_EQ(store_->FinishTrial(t->id, 1, trial_state::kCompleted, "{}", "", 2400), Transition::kApplied);
  EXPECT_FALSE(store_->RecordProgress({t->id, 1, 50, "{}", 2500}, "w1", 9900, 99000));  // no longer running
  EXPECT_EQ(store_->ListProgress(t->id).size(), 5u);
  WorkerRecord w;
  w.host = "node1";
  w.device = "cuda";
  w.device_name = "NVIDIA H200";
  w.device_count = 8;
  const std::string wid = store_->RegisterWorker(w, 3000);
  EXPECT_TRUE(store_->TouchWorker(wid, 3500));
  EXPECT_FALSE(store_->TouchWorker("worker-unknown", 3500));
  auto workers = store_->ListWorkers();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].device_count, 8);
  EXPECT_EQ(workers[0].last_heartbeat_ms, 3500);
}

TEST_P(StoreConformanceTest, KeepsProposersRationalesPausesAndProposerCalls) {
  ExperimentRecord e;
  e.name = "ext";
  TrialRow proposed = Trial(1);
  proposed.proposer = "llm:qwen";
  proposed.rationale = "fewer channels: 'cheaper' \"and\" ünïcode";
  const std::string id = store_->CreateExperiment(e, {Trial(1), proposed}, 5);
  const std::vector<std::string> added = store_->AddTrials(id, {proposed}, 6);
  EXPECT_EQ(store_->GetExperiment(id)->paused, "");
  const std::vector<TrialRow> trials = store_->ListTrials(id);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].proposer, "");
  EXPECT_EQ(trials[1].proposer, "llm:qwen");
  EXPECT_EQ(trials[1].rationale, proposed.rationale);
  EXPECT_EQ(store_->ListTrialOutcomes(id)[2].rationale, proposed.rationale);
  EXPECT_EQ(store_->GetTrial(added.at(0))->proposer, "llm:qwen");

  store_->SetExperimentPaused(id, "proposer at 127.0.0.1:1 unavailable: unreachable");
  EXPECT_EQ(store_->GetExperiment(id)->paused, "proposer at 127.0.0.1:1 unavailable: unreachable");
  EXPECT_EQ(store_->ListExperiments(1).front().paused, "proposer at 127.0.0.1:1 unavailable: unreachable");
  EXPECT_EQ(store_->GetExperiment(id)->state, "running");
  store_->SetExperimentPaused(id, "");
  EXPECT_EQ(store_->GetExperiment(id)->paused, "");

  ProposerCallRow call;
  call.experiment_id = id;
  call.at_ms = 7;
  call.proposer = "llm:qwen";
  call.latency_ms = 1234;
  call.asked = 4;
  call.accepted = 3;
  call.rejected = 1;
  call.prompt_tokens = 5000000000;  // 64-bit
  call.completion_tokens = 321;
  call.model_calls = 2;
  ProposerCallRow failed = call;
  failed.at_ms = 8;
  failed.accepted = failed.rejected = 0;
  failed.error = "unreachable";
  store_->AddProposerCalls({call, failed});
  const std::vector<ProposerCallRow> calls = store_->ListProposerCalls(id);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].latency_ms, 1234);
  EXPECT_EQ(calls[0].prompt_tokens, 5000000000);
  EXPECT_EQ(calls[0].completion_tokens, 321);
  EXPECT_EQ(calls[0].asked, 4);
  EXPECT_EQ(calls[0].accepted, 3);
  EXPECT_EQ(calls[0].rejected, 1);
  EXPECT_EQ(calls[0].model_calls, 2);
  EXPECT_EQ(calls[1].error, "unreachable");
  EXPECT_TRUE(store_->ListProposerCalls(NewExperiment(1)).empty());
}

TEST_P(StoreConformanceTest, OpRunsAreFoundByIdOrNameListedNewestFirstAndNamedOnce) {
  const std::string first = store_->CreateOpRun(OpRun("attn-lab", 1000));
  const std::string second = store_->CreateOpRun(OpRun("bev 'lab'; --", 1100));
  EXPECT_NE(first, second);
  EXPECT_TRUE(IsOpRunId(first)) << first;
  const std::optional<OpRunRecord> by_id = store_->FindOpRun(first);
  ASSERT_TRUE(by_id.has_value());
  EXPECT_EQ(by_id->id, first);
  EXPECT_EQ(by_id->name, "attn-lab");
  EXPECT_EQ(by_id->op, "attention_kernel");
  EXPECT_EQ(by_id->spec_json, OpRun("x").spec_json);
  EXPECT_EQ(by_id->state, op_run_state::kRunning);
  EXPECT_EQ(by_id->owner, "alice");
  EXPECT_EQ(by_id->created_ms, 1000);
  EXPECT_EQ(by_id->updated_ms, 1000);  // created_ms when not given
  EXPECT_EQ(store_->FindOpRun("bev 'lab'; --")->id, second);
  EXPECT_FALSE(store_->FindOpRun("op-999999").has_value());
  EXPECT_FALSE(store_->FindOpRun("").has_value());
  const std::vector<OpRunRecord> runs = store_->ListOpRuns(10);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].id, second);
  EXPECT_EQ(runs[1].id, first);
  EXPECT_EQ(store_->ListOpRuns(1).size(), 1u);

  // A name is one run's; an empty name or one of an id's form is no name. Nothing of a refused run stays.
  EXPECT_THROW(store_->CreateOpRun(OpRun("attn-lab", 1200)), StoreError);
  EXPECT_THROW(store_->CreateOpRun(OpRun("", 1200)), StoreError);
  EXPECT_THROW(store_->CreateOpRun(OpRun("op-000123", 1200)), StoreError);
  EXPECT_EQ(store_->ListOpRuns(10).size(), 2u);
  EXPECT_EQ(store_->FindOpRun("attn-lab")->created_ms, 1000);

  store_->SetOpRunState(first, op_run_state::kStopped, 1500);
  EXPECT_EQ(store_->FindOpRun(first)->state, op_run_state::kStopped);
  EXPECT_EQ(store_->FindOpRun(first)->updated_ms, 1500);
  store_->SetOpRunState(first, op_run_state::kRunning, 1600);  // resumed
  store_->SetOpRunState(first, op_run_state::kCompleted, 1700);
  const OpRunRecord done = *store_->FindOpRun("attn-lab");
  EXPECT_EQ(done.state, op_run_state::kCompleted);
  EXPECT_EQ(done.updated_ms, 1700);
  EXPECT_EQ(done.created_ms, 1000);
  EXPECT_EQ(store_->FindOpRun(second)->state, op_run_state::kRunning);  // only that run
  store_->SetOpRunState("op-999999", op_run_state::kStopped, 1800);     // no such run: nothing
  EXPECT_EQ(store_->ListOpRuns(10).size(), 2u);
  EXPECT_TRUE(store_->ListExperiments(10).empty());  // runs are not experiments
}

TEST_P(StoreConformanceTest, OpCandidatesRoundTripInOrderAndAreRecordedOncePerNameAndSource) {
  const std::string run = store_->CreateOpRun(OpRun("attn-lab"));
  const std::string other = store_->CreateOpRun(OpRun("other"));
  OpCandidateRow folder = OpCandidate(run, "tiled.cc", "// tiled\nint f() { return 1; }\n");
  folder.source = "// Ünïcode: naïve → tiled, 注意力\n#include <x>\n\tint f() { return 'q' + \"\\\"; }\n";
  folder.source_hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  folder.speedup = 1.2345678901234567;
  folder.speedup_low = 0.1;
  folder.speedup_high = 2.5e10;
  std::string result = R"({"outcome":"timed","samples":[)";
  for (int i = 0; result.size() < 100 * 1024; ++i) result += (i ? "," : "") + std::to_string(0.001 * i);
  result += "]}";
  folder.result_json = result;
  folder.created_ms = 5000000000;  // 64-bit
  OpCandidateRow llm = OpCandidate(run, "llm-r2-c1", "int g();");
  llm.source_kind = "llm";
  llm.round = 2;
  llm.outcome = "compile_error";
  llm.speedup = llm.speedup_low = llm.speedup_high = 0;
  llm.result_json = R"({"outcome":"compile_error","error":"x.cc:1: error: 'g' ..."})";
  EXPECT_TRUE(store_->RecordOpCandidate(llm));
  EXPECT_TRUE(store_->RecordOpCandidate(folder));
  EXPECT_TRUE(store_->RecordOpCandidate(OpCandidate(run, "third.cc", "int h();")));

  // Again (a resumed run), by name with another source, or by source under another name: refused, nothing
  // changed.
  OpCandidateRow same_name = OpCandidate(run, "tiled.cc", "int other();");
  same_name.outcome = "crashed";
  OpCandidateRow same_source = folder;
  same_source.candidate = "copy.cc";
  same_source.speedup = 9;
  EXPECT_FALSE(store_->RecordOpCandidate(folder));
  EXPECT_FALSE(store_->RecordOpCandidate(same_name));
  EXPECT_FALSE(store_->RecordOpCandidate(same_source));

  const std::vector<OpCandidateRow> got = store_->ListOpCandidates(run);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].candidate, "llm-r2-c1");
  EXPECT_EQ(got[2].candidate, "third.cc");
  const OpCandidateRow& f = got[1];
  EXPECT_EQ(f.run_id, run);
  EXPECT_EQ(f.candidate, "tiled.cc");
  EXPECT_EQ(f.source_kind, "folder");
  EXPECT_EQ(f.round, 0);
  EXPECT_EQ(f.source_hash, folder.source_hash);
  EXPECT_EQ(f.source, folder.source);
  EXPECT_EQ(f.outcome, "timed");
  EXPECT_EQ(f.speedup, folder.speedup);  // exactly
  EXPECT_EQ(f.speedup_low, 0.1);
  EXPECT_EQ(f.speedup_high, 2.5e10);
  EXPECT_EQ(f.result_json, result);
  EXPECT_EQ(f.created_ms, 5000000000);
  EXPECT_EQ(got[0].source_kind, "llm");
  EXPECT_EQ(got[0].round, 2);
  EXPECT_EQ(got[0].outcome, "compile_error");
  EXPECT_EQ(got[0].speedup, 0.0);
  EXPECT_EQ(got[0].result_json, llm.result_json);

  // Another run's candidates are its own: the same names and sources are new there.
  EXPECT_TRUE(store_->ListOpCandidates(other).empty());
  EXPECT_TRUE(store_->RecordOpCandidate(OpCandidate(other, "tiled.cc", "int other();")));
  OpCandidateRow copied = folder;
  copied.run_id = other;
  copied.candidate = "copied.cc";
  EXPECT_TRUE(store_->RecordOpCandidate(copied));
  ASSERT_EQ(store_->ListOpCandidates(other).size(), 2u);
  EXPECT_EQ(store_->ListOpCandidates(other)[0].source, "int other();");
  EXPECT_EQ(store_->ListOpCandidates(run).size(), 3u);
  EXPECT_TRUE(store_->ListOpCandidates("op-999999").empty());
  EXPECT_THROW(store_->RecordOpCandidate(OpCandidate("op-999999", "a.cc", "int a();")), StoreError);
}

}  // namespace frontier
