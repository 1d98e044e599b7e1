// server/proposer's gRPC client against an in-process Proposer service: the
// request reaches it with the bearer token, the answer comes back, and a
// proposer past its deadline, one that fails or one that is not a Proposer
// service at all is a ProposerUnavailable naming what happened (the external
// strategy's paused status), never a crash.
#include "server/proposer/grpc_proposer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "frontier/v1/proposer.grpc.pb.h"
#include "server/search/external.h"

namespace frontier {
namespace {

class FakeProposer final : public v1::Proposer::Service {
 public:
  grpc::Status Propose(grpc::ServerContext* context, const v1::ProposeRequest* request,
                       v1::ProposeResponse* response) override {
    const auto auth = context->client_metadata().find("authorization");
    authorization = auth == context->client_metadata().end() ? "" : std::string(auth->second.data(), auth->second.size());
    last = *request;
    if (mode == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    if (mode == "fail") return grpc::Status(grpc::StatusCode::INTERNAL, "KeyError: 'x'");
    v1::ProposedConfig* c = response->add_configs();
    (*c->mutable_config()->mutable_choices())["stages[*].block"] = 1;
    c->set_rationale("from the fake");
    response->set_proposer("fake");
    response->mutable_usage()->set_prompt_tokens(7);
    return grpc::Status::OK;
  }
  std::string mode = "ok";
  std::string authorization;
  v1::ProposeRequest last;
};

SearchSpace Space(int port, const std::string& extra) {
  return ParseSearchSpace(R"(
name: g
task: {dataset: synthetic, input: {channels: 1, height: 8, width: 8, classes: 3}, batch_size: 8, steps: 4,
       warmup_steps: 1, eval_every: 0}
baseline:
  arch: {stem: {kind: conv3x3, width: 8, stride: 1}, stages: [{block: basic, width: 8, depth: 1}]}
space:
  stages[*].block: [basic, mbconv]
objectives: [{metric: val_accuracy}]
strategy: {name: external, address: "127.0.0.1:)" + std::to_string(port) + "\", deadline_s: 0.3" + extra + "}\n",
                          "g.yaml");
}

class GrpcProposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_GT(port_, 0);
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now()); }

  FakeProposer fake_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(GrpcProposerTest, AsksWithTheTokenAndReadsTheAnswer) {
  const std::filesystem::path token = std::filesystem::temp_directory_path() / "grpc_proposer_test.token";
  std::ofstream(token) << "proposer-secret-0123456789\n";
  const SearchSpace space = Space(port_, ", token_file: " + token.string());
  std::unique_ptr<ProposerClient> client = GrpcProposerFactory()(space);
  EXPECT_EQ(client->Where(), "127.0.0.1:" + std::to_string(port_));
  ProposerCall call;
  call.experiment_id = "exp-9";
  call.count = 2;
  const ProposerAnswer answer = client->Propose(call);
  std::filesystem::remove(token);
  EXPECT_EQ(fake_.authorization, "Bearer proposer-secret-0123456789");
  EXPECT_EQ(fake_.last.experiment_id(), "exp-9");
  EXPECT_EQ(fake_.last.count(), 2);
  EXPECT_EQ(fake_.last.steps(), 4);
  ASSERT_EQ(answer.configs.size(), 1u);
  EXPECT_EQ(answer.configs[0].choices.at("stages[*].block"), 1);
  EXPECT_EQ(answer.configs[0].rationale, "from the fake");
  EXPECT_EQ(answer.proposer, "fake");
  EXPECT_EQ(answer.usage.prompt_tokens, 7);
}

TEST_F(GrpcProposerTest, ASlowOrFailingProposerIsUnavailableWithTheReason) {
  std::unique_ptr<ProposerClient> client = GrpcProposerFactory()(Space(port_, ""));
  ProposerCall call;
  call.count = 1;
  fake_.mode = "slow";
  try {
    client->Propose(call);
    FAIL() << "answered";
  } catch (const ProposerUnavailable& e) {
    EXPECT_EQ(std::string(e.what()).rfind("no answer within the deadline (0.3", 0), 0u) << e.what();
  }
  fake_.mode = "fail";
  try {
    client->Propose(call);
    FAIL() << "answered";
  } catch (const ProposerUnavailable& e) {
    EXPECT_EQ(std::string(e.what()), "internal error: KeyError: 'x'");
  }
}

TEST_F(GrpcProposerTest, AnUnreadableTokenFileIsASpaceErrorAndNoServiceIsUnavailable) {
  EXPECT_THROW(GrpcProposerFactory()(Space(port_, ", token_file: /nonexistent/t")), SpaceError);
  server_->Shutdown(std::chrono::system_clock::now());
  std::unique_ptr<ProposerClient> client = GrpcProposerFactory()(Space(port_, ""));
  ProposerCall call;
  call.count = 1;
  try {
    client->Propose(call);
    FAIL() << "answered";
  } catch (const ProposerUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("unreachable"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace frontier
