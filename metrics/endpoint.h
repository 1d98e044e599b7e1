// The /metrics HTTP endpoint of frontier-server and frontier-worker: a
// prometheus-cpp Exposer (civetweb) serving one registry in Prometheus' text
// format at http://HOST:PORT/metrics.
#pragma once

#include <memory>
#include <string>

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace frontier {

// True when a --metrics-listen value asks for no endpoint: "" or "0".
bool MetricsDisabled(const std::string& address);

class MetricsEndpoint {
 public:
  // Serves `registry` at http://ADDRESS/metrics, ADDRESS being HOST:PORT (an
  // IPv4 address or host name, or [IPv6]; port 0 picks a free port). Throws
  // std::runtime_error when the address is malformed or cannot be bound.
  MetricsEndpoint(const std::string& address, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsEndpoint();

  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // The bound port (the chosen one when the address asked for port 0).
  int port() const { return port_; }
  // "http://HOST:PORT/metrics" with the bound port.
  const std::string& url() const { return url_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;  // the exposer holds it weakly
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  std::string url_;
};

}  // namespace frontier
