#include "server/cli/commands.h"

#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "server/cli/cli.h"
#include "server/cli/output.h"

namespace frontier {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<std::string> ReadSpaceFile(const std::string& path) {
  if (!std::ifstream(path)) throw std::runtime_error("cannot read '" + path + "'");
  try {
    std::string text = ReadSearchSpaceFile(path);
    ParseSearchSpace(text, path);
    return text;
  } catch (const std::exception& e) {  // SpaceError, or SpecError from a trial spec of the space
    std::cerr << "frontier: submit " << path << ": " << e.what() << "\n";
    return std::nullopt;
  }
}

int Submit(Client& client, const std::string& space_file, const std::string& output) {
  const std::optional<std::string> space = ReadSpaceFile(space_file);
  if (!space) return kCliInvalid;
  v1::SubmitExperimentRequest req;
  req.set_space_yaml(*space);
  req.set_source_name(space_file);
  v1::SubmitExperimentResponse resp;
  const grpc::Status s = client.SubmitExperiment(req, &resp);
  if (!s.ok()) return client.Failure(s, "submit " + space_file);
  if (output == "json") {
    std::cout << ExperimentJson(resp.experiment()).dump(2) << "\n";
  } else {
    std::cout << resp.experiment().id() << "\n";
    std::cerr << ExperimentLine(resp.experiment()) << "\n";
  }
  return kCliOk;
}

int ShowExperiment(Client& client, const std::string& id, bool cancel, const std::string& output) {
  v1::Experiment e;
  grpc::Status s;
  if (cancel) {
    v1::CancelExperimentRequest req;
    req.set_experiment_id(id);
    s = client.stub().CancelExperiment(client.Context().get(), req, &e);
  } else {
    v1::GetExperimentRequest req;
    req.set_experiment_id(id);
    s = client.stub().GetExperiment(client.Context().get(), req, &e);
  }
  if (!s.ok()) return client.Failure(s, "experiment " + id);
  if (output == "json") {
    std::cout << ExperimentJson(e).dump(2) << "\n";
  } else {
    std::cout << ExperimentLine(e) << "\n";
  }
  return kCliOk;
}

int Watch(Client& client, const std::string& id) {
  v1::WatchExperimentRequest req;
  req.set_experiment_id(id);
  grpc::ClientContext ctx;  // no deadline: the stream lasts as long as the experiment
  auto reader = client.stub().WatchExperiment(&ctx, req);
  v1::ExperimentEvent event;
  v1::ExperimentState last = v1::EXPERIMENT_RUNNING;
  while (reader->Read(&event)) {
    const auto& c = event.experiment().counts();
    std::cout << "[" << Finished(c) << "/" << c.total() << "] " << event.message() << "\n" << std::flush;
    last = event.experiment().state();
  }
  const grpc::Status s = reader->Finish();
  if (!s.ok()) return client.Failure(s, "watch " + id);
  return last == v1::EXPERIMENT_COMPLETED ? kCliOk : kCliFailed;
}

}  // namespace frontier
