#include "metrics/endpoint.h"

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <stdexcept>

namespace frontier {

bool MetricsDisabled(const std::string& address) { return address.empty() || address == "0"; }

MetricsEndpoint::MetricsEndpoint(const std::string& address, std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)) {
  const size_t colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos) {
    throw std::runtime_error("metrics address '" + address + "': expected HOST:PORT, e.g. 127.0.0.1:9464");
  }
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/2);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot serve /metrics on " + address + ": " + e.what());
  }
  const std::vector<int> ports = exposer_->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0) throw std::runtime_error("cannot serve /metrics on " + address);
  port_ = ports.front();
  exposer_->RegisterCollectable(registry_);
  url_ = "http://" + host + ":" + std::to_string(port_) + "/metrics";
}

MetricsEndpoint::~MetricsEndpoint() = default;

}  // namespace frontier
