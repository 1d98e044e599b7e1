// Progress events as a worker reports them (docs/trial-output.md), for the
// scheduler's and the RPC contract's tests. Header-only, torch-free.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace frontier {

// An eval event at `step` with validation accuracy `accuracy`; every trial runs 10 ms steps.
inline std::string EvalEvent(int step, double accuracy) {
  return nlohmann::json{{"event", "eval"},
                        {"step", step},
                        {"val_accuracy", accuracy},
                        {"val_loss", 1.0},
                        {"train_time_s", step * 0.01}}
      .dump();
}

}  // namespace frontier
