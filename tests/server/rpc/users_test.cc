// Named users (proto/auth.h TokenTable, docs/security.md): the token file's
// refusals, who owns an experiment, who may cancel it, the roles' limits,
// and rotation by reloading the file. Each refusal has its own test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "tests/server/rpc/coordinator_harness.h"

namespace frontier {
namespace {

constexpr const char* kAlice = "alice-token-0123456789";
constexpr const char* kBob = "bob-token-0123456789ab";
constexpr const char* kOps = "ops-token-0123456789ab";
constexpr const char* kGpu = "gpu-token-0123456789ab";

class UsersTest : public ::testing::Test {
 protected:
  UsersTest() { std::filesystem::create_directories(dir_); }
  ~UsersTest() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }
  std::string Users() {
    return Write(std::string("# USER ROLE TOKEN\n\nalice user ") + kAlice + "\nbob user " + kBob +
                 "\nops admin " + kOps + "\ngpu-pool worker " + kGpu + "\n");
  }
  // The message TokenTable throws for `text`; fails the test when it reads it.
  std::string Refusal(const std::string& text) {
    try {
      TokenTable table(Write(text));
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    ADD_FAILURE() << "accepted: " << text;
    return "";
  }
  ServerSecurity Security() {
    ServerSecurity s;
    s.users = std::make_shared<TokenTable>(Users());
    return s;
  }

  const std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("users_test." + std::to_string(::getpid()));
  const std::string path_ = (dir_ / "tokens").string();
};

std::string Submit(CoordinatorHarness& h, const std::string& token, grpc::Status* status = nullptr) {
  v1::SubmitExperimentRequest req;
  req.set_space_yaml(TinySpace());
  v1::SubmitExperimentResponse resp;
  const grpc::Status s = h.UserStub(token)->SubmitExperiment(CoordinatorHarness::Context().get(), req, &resp);
  if (status) *status = s;
  return resp.experiment().id();
}

grpc::Status Cancel(CoordinatorHarness& h, const std::string& token, const std::string& id) {
  v1::CancelExperimentRequest req;
  req.set_experiment_id(id);
  v1::Experiment resp;
  return h.UserStub(token)->CancelExperiment(CoordinatorHarness::Context().get(), req, &resp);
}

grpc::Status Register(CoordinatorHarness& h, const std::string& token) {
  v1::RegisterWorkerResponse resp;
  return h.WorkerStub(token)->RegisterWorker(CoordinatorHarness::Context().get(), v1::RegisterWorkerRequest(),
                                             &resp);
}

TEST_F(UsersTest, ReadsNamesAndRolesAndKeepsNoTokenInClear) {
  TokenTable table(Users());
  ASSERT_TRUE(table.Find(kAlice).has_value());
  EXPECT_EQ(table.Find(kAlice)->user, "alice");
  EXPECT_EQ(table.Find(kAlice)->role, Role::kUser);
  EXPECT_EQ(table.Find(kOps)->role, Role::kAdmin);
  EXPECT_EQ(table.Find(kGpu)->user, "gpu-pool");
  EXPECT_EQ(table.Find(kGpu)->role, Role::kWorker);
  EXPECT_FALSE(table.Find("alice-token-012345678").has_value());  // a prefix is no token
  EXPECT_FALSE(table.Find("").has_value());
}

TEST_F(UsersTest, RefusesALineWithoutThreeFields) {
  EXPECT_EQ(Refusal(std::string("alice user ") + kAlice + "\nbob user\n"),
            "token file '" + path_ + "' line 2: expected USER ROLE TOKEN");
  EXPECT_NE(
      Refusal(std::string("alice user ") + kAlice + " extra\n").find("line 1: expected USER ROLE TOKEN"),
      std::string::npos);
}

TEST_F(UsersTest, RefusesAnUnknownRole) {
  EXPECT_EQ(Refusal(std::string("alice root ") + kAlice + "\n"),
            "token file '" + path_ + "' line 1: role 'root' is not user, admin or worker");
}

TEST_F(UsersTest, RefusesAShortTokenWithoutPrintingIt) {
  const std::string message = Refusal("alice user short-secret\n");
  EXPECT_EQ(message, "token file '" + path_ + "' line 1: token shorter than 16 characters");
  EXPECT_EQ(message.find("short-secret"), std::string::npos);
}

TEST_F(UsersTest, RefusesOneTokenForTwoUsers) {
  const std::string message =
      Refusal(std::string("alice user ") + kAlice + "\nmallory admin " + kAlice + "\n");
  EXPECT_EQ(message, "token file '" + path_ + "' line 2: the same token as '" + path_ + "' line 1");
  EXPECT_EQ(message.find(kAlice), std::string::npos);
}

TEST_F(UsersTest, RefusesABadUserName) {
  EXPECT_NE(Refusal(std::string("al/ice user ") + kAlice + "\n").find("line 1: user name must be"),
            std::string::npos);
}

TEST_F(UsersTest, RefusesAFileWithoutTokensOrUnreadable) {
  EXPECT_EQ(Refusal("# nobody\n"), "token file '" + path_ + "' has no tokens");
  EXPECT_THROW(TokenTable((dir_ / "missing").string()), std::runtime_error);
}

// A directory of token files (one per team, or a mounted Kubernetes Secret
// with its ..data bookkeeping): every visible regular file is read.
TEST_F(UsersTest, ADirectoryReadsEveryVisibleFile) {
  const std::filesystem::path tokens = dir_ / "tokens.d";
  std::filesystem::create_directories(tokens / "..2026_12_02" / "nested");
  std::ofstream(tokens / "perception") << "alice user " << kAlice << "\n";
  std::ofstream(tokens / "platform") << "# admins\nops admin " << kOps << "\n";
  std::ofstream(tokens / ".hidden") << "mallory admin mallory-token-0123456789\n";
  std::ofstream(tokens / "..2026_12_02" / "nested" / "x") << "eve admin eve-token-0123456789ab\n";
  TokenTable table(tokens.string());
  EXPECT_EQ(table.Find(kAlice)->user, "alice");
  EXPECT_EQ(table.Find(kOps)->role, Role::kAdmin);
  EXPECT_FALSE(table.Find("mallory-token-0123456789").has_value());
  EXPECT_FALSE(table.Find("eve-token-0123456789ab").has_value());
  EXPECT_FALSE(table.Find(kBob).has_value());

  // Rotation: a file added to the directory counts at the next reload.
  std::ofstream(tokens / "robotics") << "bob user " << kBob << "\n";
  EXPECT_EQ(table.Reload(), 3u);
  EXPECT_EQ(table.Find(kBob)->user, "bob");

  // One token in two files is refused, naming both places; the table is kept.
  std::ofstream(tokens / "zz-copy") << "mallory admin " << kAlice << "\n";
  try {
    table.Reload();
    ADD_FAILURE() << "a token in two files was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "token file '" + (tokens / "zz-copy").string() +
                                         "' line 1: the same token as '" + (tokens / "perception").string() +
                                         "' line 1");
    EXPECT_EQ(std::string(e.what()).find(kAlice), std::string::npos);
  }
  EXPECT_EQ(table.Find(kAlice)->user, "alice");
}

TEST_F(UsersTest, AnEmptyDirectoryHasNoTokens) {
  const std::filesystem::path tokens = dir_ / "empty.d";
  std::filesystem::create_directories(tokens);
  std::ofstream(tokens / ".only-hidden") << "alice user " << kAlice << "\n";
  try {
    TokenTable table(tokens.string());
    ADD_FAILURE() << "an empty token directory was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "token file '" + tokens.string() + "' has no tokens");
  }
}

TEST_F(UsersTest, ExperimentsRecordWhoSubmittedThem) {
  CoordinatorHarness h(Security());
  const std::string id = Submit(h, kAlice);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(h.store().GetExperiment(id)->owner, "alice");
  v1::GetExperimentRequest get;
  get.set_experiment_id(id);
  v1::Experiment e;
  ASSERT_TRUE(h.UserStub(kBob)->GetExperiment(CoordinatorHarness::Context().get(), get, &e).ok());
  EXPECT_EQ(e.owner(), "alice");  // everyone may read it
  // The store holds the name, not the token.
  for (const ExperimentRecord& r : h.store().ListExperiments(10)) {
    for (const std::string* field : {&r.name, &r.owner, &r.space_yaml, &r.source_name, &r.goals_json}) {
      EXPECT_EQ(field->find(kAlice), std::string::npos);
    }
  }
}

TEST_F(UsersTest, AnotherUserCannotCancel) {
  CoordinatorHarness h(Security());
  const std::string id = Submit(h, kAlice);
  const grpc::Status s = Cancel(h, kBob, id);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(),
            "experiment " + id + " was submitted by alice; only its owner or an admin may cancel it");
  EXPECT_EQ(h.store().GetExperiment(id)->state, "running");
}

TEST_F(UsersTest, TheOwnerAndAdminsCanCancel) {
  CoordinatorHarness h(Security());
  const std::string mine = Submit(h, kAlice);
  const std::string theirs = Submit(h, kBob);
  EXPECT_TRUE(Cancel(h, kAlice, mine).ok());
  EXPECT_EQ(h.store().GetExperiment(mine)->state, "cancelled");
  const grpc::Status admin = Cancel(h, kOps, theirs);
  EXPECT_TRUE(admin.ok()) << admin.error_message();
  EXPECT_EQ(h.store().GetExperiment(theirs)->state, "cancelled");
}

TEST_F(UsersTest, AWorkerCannotSubmitNorCancel) {
  CoordinatorHarness h(Security());
  const std::string id = Submit(h, kAlice);
  grpc::Status s;
  Submit(h, kGpu, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "this call needs a user token; the token given is a worker token (gpu-pool)");
  EXPECT_EQ(Cancel(h, kGpu, id).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(h.store().ListExperiments(10).size(), 1u);
  EXPECT_EQ(h.store().GetExperiment(id)->state, "running");
}

TEST_F(UsersTest, UsersAndAdminsCannotActAsWorkers) {
  CoordinatorHarness h(Security());
  EXPECT_EQ(Register(h, kAlice).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Register(h, kOps).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Register(h, kGpu).ok());
}

TEST_F(UsersTest, AnUnknownTokenIsUnauthenticated) {
  CoordinatorHarness h(Security());
  grpc::Status s;
  Submit(h, "nobody-token-0123456789", &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  Submit(h, "", &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Register(h, "nobody-token-0123456789").error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(UsersTest, ReloadingRotatesTokensWithoutARestart) {
  ServerSecurity security = Security();
  CoordinatorHarness h(security);
  const std::string id = Submit(h, kAlice);
  const std::string rotated = "alice-rotated-token-9876";
  Write(std::string("alice user ") + rotated + "\nops admin " + kOps + "\n");
  EXPECT_EQ(security.users->Reload(), 2u);
  grpc::Status s;
  Submit(h, kAlice, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);  // the old token stopped working
  Submit(h, kBob, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);  // bob was removed
  EXPECT_TRUE(Cancel(h, rotated, id).ok());                      // still alice: her experiment
}

TEST_F(UsersTest, AReloadOfABadFileKeepsTheTokensInUse) {
  ServerSecurity security = Security();
  CoordinatorHarness h(security);
  Write("alice superuser x\n");
  EXPECT_THROW(security.users->Reload(), std::runtime_error);
  grpc::Status s;
  const std::string id = Submit(h, kAlice, &s);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(h.store().GetExperiment(id)->owner, "alice");
}

}  // namespace
}  // namespace frontier
