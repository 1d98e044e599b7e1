#include "server/cli/experiment_source.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "server/cli/cli.h"
#include "server/rpc/artifact_reads.h"
#include "server/rpc/proto_conversion.h"
#include "server/rpc/rpc_status.h"
#include "server/rpc/stored_report.h"
#include "server/store/open_store.h"

namespace frontier {
namespace {

using grpc::Status;
using grpc::StatusCode;

class Server final : public ExperimentSource {
 public:
  explicit Server(Client& client) : client_(client) {}
  Status GetExperiment(const v1::GetExperimentRequest& req, v1::Experiment* out) override {
    return client_.stub().GetExperiment(client_.Context().get(), req, out);
  }
  Status ListExperiments(const v1::ListExperimentsRequest& req, v1::ListExperimentsResponse* out) override {
    return client_.stub().ListExperiments(client_.Context().get(), req, out);
  }
  Status ListTrials(const v1::ListTrialsRequest& req, v1::ListTrialsResponse* out) override {
    return client_.stub().ListTrials(client_.Context(120).get(), req, out);
  }
  Status GetReport(const v1::GetReportRequest& req, v1::GetReportResponse* out) override {
    return client_.stub().GetReport(client_.Context(120).get(), req, out);
  }
  Status ListArtifacts(const v1::ListArtifactsRequest& req, v1::ListArtifactsResponse* out) override {
    return client_.stub().ListArtifacts(client_.Context().get(), req, out);
  }
  Status ReadArtifact(const v1::ReadArtifactRequest& req, v1::ReadArtifactResponse* out) override {
    return client_.stub().ReadArtifact(client_.Context(120).get(), req, out);
  }
  std::string ArtifactsHref(const std::string&) const override { return ""; }
  int Failure(const Status& status, const std::string& what) const override {
    return client_.Failure(status, what);
  }

 private:
  Client& client_;
};

Status NotFound(const std::string& id) { return Status(StatusCode::NOT_FOUND, "no experiment '" + id + "'"); }

// The ExperimentService's read calls answered from the store itself.
class Stored final : public ExperimentSource {
 public:
  Stored(std::string url, std::unique_ptr<Store> store, std::unique_ptr<ArtifactStore> artifacts)
      : url_(std::move(url)), store_(std::move(store)), artifacts_(std::move(artifacts)) {}
  Status GetExperiment(const v1::GetExperimentRequest& req, v1::Experiment* out) override {
    return Guarded("GetExperiment", [&] {
      auto e = store_->GetExperiment(req.experiment_id());
      if (!e) return NotFound(req.experiment_id());
      FillExperiment(*store_, *e, out, true);
      return Status::OK;
    });
  }
  Status ListExperiments(const v1::ListExperimentsRequest& req, v1::ListExperimentsResponse* out) override {
    return Guarded("ListExperiments", [&] {
      for (const auto& e : store_->ListExperiments(req.limit() > 0 ? req.limit() : 100)) {
        FillExperiment(*store_, e, out->add_experiments(), false);
      }
      return Status::OK;
    });
  }
  Status ListTrials(const v1::ListTrialsRequest& req, v1::ListTrialsResponse* out) override {
    return Guarded("ListTrials", [&] {
      return FillTrialList(*store_, req, out) ? Status::OK : NotFound(req.experiment_id());
    });
  }
  Status GetReport(const v1::GetReportRequest& req, v1::GetReportResponse* out) override {
    return Guarded("GetReport", [&] {
      ReportRequest request;
      request.experiment_id = req.experiment_id();
      request.format = req.format();
      request.front_only = req.front_only();
      request.wide = req.wide();
      request.compare.assign(req.compare().begin(), req.compare().end());
      request.artifacts = artifacts_.get();
      request.artifacts_href = req.artifacts_href();
      std::optional<RenderedReport> rendered;
      try {
        rendered = RenderStoredReport(*store_, request);
      } catch (const std::invalid_argument& e) {
        return Status(StatusCode::INVALID_ARGUMENT, e.what());
      }
      if (!rendered) return NotFound(req.experiment_id());
      out->set_content(std::move(rendered->content));
      out->set_content_type(std::move(rendered->content_type));
      return Status::OK;
    });
  }
  Status ListArtifacts(const v1::ListArtifactsRequest& req, v1::ListArtifactsResponse* out) override {
    return ListStoredArtifacts(*store_, artifacts_.get(), kNoArtifacts, req, out);
  }
  Status ReadArtifact(const v1::ReadArtifactRequest& req, v1::ReadArtifactResponse* out) override {
    return ReadStoredArtifact(*store_, artifacts_.get(), kNoArtifacts, req, out);
  }
  std::string ArtifactsHref(const std::string& html_file) const override {
    if (!artifacts_) return "";
    std::error_code ec;
    const std::filesystem::path page_dir = std::filesystem::absolute(html_file, ec).parent_path();
    return std::filesystem::absolute(artifacts_->root(), ec).lexically_relative(page_dir).generic_string();
  }
  int Failure(const Status& s, const std::string& what) const override {
    std::cerr << "frontier: " << what << ": " << s.error_message() << " (store " << url_ << ")\n";
    if (s.error_code() == StatusCode::INVALID_ARGUMENT) return kCliInvalid;
    if (s.error_code() == StatusCode::NOT_FOUND) return kCliNotFound;
    return kCliFailed;
  }

 private:
  static constexpr const char* kNoArtifacts =
      "no ARTIFACTS folder beside the store; name the coordinator's with --artifacts-dir DIR";
  std::string url_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ArtifactStore> artifacts_;  // null: none
};

}  // namespace

std::unique_ptr<ExperimentSource> ServerSource(Client& client) { return std::make_unique<Server>(client); }

std::unique_ptr<ExperimentSource> StoreSource(const std::string& url, const std::string& artifacts_dir) {
  const bool postgres = url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0;
  std::string artifacts = artifacts_dir;
  std::error_code ec;
  if (!postgres) {
    const std::string path = url.rfind("sqlite:", 0) == 0 ? url.substr(7) : url;
    if (!std::filesystem::is_regular_file(path, ec)) {
      throw std::runtime_error("no store at '" + path + "' (the SQLite file `frontier run` wrote, e.g. " +
                               "runs/quickstart/frontier.db)");
    }
    const std::filesystem::path beside = std::filesystem::path(path).parent_path() / "artifacts";
    if (artifacts.empty() && std::filesystem::is_directory(beside, ec)) artifacts = beside.string();
  }
  if (!artifacts.empty() && !std::filesystem::is_directory(artifacts, ec)) {
    throw std::runtime_error("no artifact folder at '" + artifacts + "'");
  }
  spdlog::set_level(spdlog::level::warn);  // the coordinator's per-report timings are not the CLI's output
  return std::make_unique<Stored>(url, OpenStore(url, OpenMode::kReadOnly),
                                  artifacts.empty() ? nullptr : std::make_unique<ArtifactStore>(artifacts));
}

}  // namespace frontier
