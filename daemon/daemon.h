// One cclod: the engine, the sessions, the communicators and the servers around them.
#pragma once

#include <grpcpp/server.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/attach_server.h"
#include "daemon/communicators.h"
#include "daemon/config.h"
#include "daemon/drain.h"
#include "daemon/ops.h"
#include "daemon/peer_client.h"
#include "daemon/peer_server.h"
#include "daemon/peer_tls.h"
#include "daemon/policy.h"
#include "daemon/rings.h"
#include "daemon/root_gather.h"
#include "daemon/runtime_lock.h"
#include "daemon/services.h"
#include "daemon/sessions.h"
#include "daemon/telemetry.h"
#include "daemon/tenants.h"
#include "daemon/unix_listener.h"
#include "hw/device.h"

namespace cclo::daemon {

class Daemon {
 public:
  /// Creates and locks the runtime dir (FAILED_PRECONDITION while another cclod holds
  /// it), creates the sockets, starts the engine and every server.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const Config& config);
  /// Tells peers it is leaving, stops the servers, ends sessions, removes the sockets.
  ~Daemon();

  /// Applies what may change at run time: the log level, the policy (for communicators
  /// created afterwards) and the tenants' identities, weights and quotas. A config that did
  /// not load (its error is returned), that the next start would refuse (a runtime dir
  /// another user may write, a peer TLS file or congestion control this host lacks, a host
  /// that is no address where peer_port is 0, an admin group or a host or metrics_host name
  /// that differs from the last config taken and does not resolve now, or one the metrics
  /// server cannot serve), or whose tenants cannot be applied (INVALID_ARGUMENT), changes
  /// nothing. Other keys that differ keep their running value until a restart; they are
  /// named in the returned list. Status and the metrics count the reload.
  absl::StatusOr<std::vector<std::string>> Reload(const absl::StatusOr<Config>& loaded);

  /// "host:port" of the Peer service, as other daemons reach it.
  const std::string& peer_address() const { return peer_address_; }

 private:
  Daemon(const Config& config, RuntimeLock lock, hw::DevicePtr device, std::string peer_address,
         const std::optional<PeerTls>& peer_tls);
  absl::Status StartServers(int peer_port);
  /// Gives the engine the scheduler of the config and the tenants' current weights.
  void ApplyScheduling();

  const Config config_;
  /// The last config applied, the start's or a reload's: its host names were looked up then.
  Config taken_;
  const RuntimeLock lock_;  ///< held until every other member is gone
  hw::DevicePtr device_;
  const std::string peer_address_;
  TenantStore tenants_;
  /// TLS or plaintext for the Peer server, as the config asks.
  const std::shared_ptr<grpc::ServerCredentials> peer_server_credentials_;
  PeerClient peer_client_;
  RootGather root_gather_;
  PolicyStore policies_;
  SessionRegistry sessions_;
  Communicators communicators_;
  OpStats op_stats_;
  /// Once a drain finished, it stops the daemon as SIGTERM does.
  Drain drain_;
  Ops ops_;
  ClientService client_service_;
  PeerService peer_service_;
  AdminService admin_service_;
  std::unique_ptr<grpc::Server> client_server_;
  std::unique_ptr<grpc::Server> admin_server_;
  std::unique_ptr<PeerServer> peer_server_;
  /// Accept client.sock's and admin.sock's connections for their servers; stopped first.
  std::unique_ptr<GrpcUnixListener> client_listener_;
  std::unique_ptr<GrpcUnixListener> admin_listener_;
  /// Before attach_server_, whose sessions' ends close their rings. The engine polls it
  /// (Device::AddPoller): ~Daemon resets device_ first, so nothing polls it once gone.
  std::unique_ptr<Rings> rings_;
  std::unique_ptr<AttachServer> attach_server_;
  std::unique_ptr<MetricsServer> metrics_server_;
};

}  // namespace cclo::daemon
