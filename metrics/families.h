// The one way frontier-server and frontier-worker declare their metric
// families (server/rpc/coordinator_metrics, worker/agent/worker_metrics):
// a family registered in a prometheus-cpp registry from its name and help
// text, and the forward declarations their headers need. Names follow
// docs/metrics.md. Registering a name twice in one registry throws
// std::invalid_argument (prometheus-cpp's rule), so each family has one
// declaration.
#pragma once

#include <string>

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace frontier {

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry,
                                                       const std::string& name, const std::string& help);
prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& registry, const std::string& name,
                                                   const std::string& help);
prometheus::Family<prometheus::Histogram>& HistogramFamily(prometheus::Registry& registry,
                                                           const std::string& name, const std::string& help);

}  // namespace frontier
