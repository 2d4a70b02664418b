// Prometheus exposition: a collectable that turns the daemon's status snapshot into
// `cclod_*` metrics on every scrape, with Prometheus's standard `process_*` metrics of the
// daemon's own process, served over HTTP at /metrics. docs/operations.md lists the metrics.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cclo/v1/admin.pb.h"
#include "daemon/op_stats.h"

namespace prometheus {
class Exposer;
}

namespace cclo::daemon {

/// What a scrape shows: the daemon's status, its tenants, what its ops added up to, its
/// data sessions to peer engines by state and how many of those were ever lost.
struct Snapshot {
  cclo::v1::StatusResponse status;
  cclo::v1::ListTenantsResponse tenants;
  OpTotals ops;
  std::map<std::string, uint64_t> peer_sessions;
  uint64_t peer_sessions_lost_total = 0;
};
using SnapshotFn = std::function<Snapshot()>;

class MetricsServer {
 public:
  /// Serves /metrics on host:port (port 0 picks a free one). An IPv6 host where the HTTP
  /// server was built without IPv6 is INVALID_ARGUMENT saying so.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& host,
                                                              uint16_t port, SnapshotFn snapshot);
  /// Whether Start can listen on `host` (an address or a name): INVALID_ARGUMENT when it
  /// never can (a name that does not resolve; only IPv6 addresses, where civetweb has no
  /// IPv6 and looks up a name's IPv4 addresses only), UNAVAILABLE when the resolver fails
  /// for now. `port` is named in the message.
  static absl::Status CheckHost(const std::string& host, uint16_t port);
  ~MetricsServer();
  /// "host:port" served, with the port picked.
  const std::string& address() const { return address_; }

 private:
  MetricsServer() = default;

  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<void> collectable_;
  std::string host_;
  uint16_t port_ = 0;
  std::string address_;
};

}  // namespace cclo::daemon
