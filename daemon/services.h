// The three gRPC services of cclod. Each checks its caller and its fields, then calls
// into the daemon's components; absl::Status becomes grpc::Status only here.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cclo/v1/admin.grpc.pb.h"
#include "cclo/v1/client.grpc.pb.h"
#include "cclo/v1/peer.grpc.pb.h"
#include "daemon/communicators.h"
#include "daemon/config.h"
#include "daemon/drain.h"
#include "daemon/op_stats.h"
#include "daemon/ops.h"
#include "daemon/peer_client.h"
#include "daemon/root_gather.h"
#include "daemon/sessions.h"
#include "daemon/tenants.h"
#include "hw/clock.h"
#include "hw/device.h"

namespace cclo::daemon {

/// Client service on client.sock; every call carries `cclo-session: <token>`.
class ClientService final : public cclo::v1::Client::Service {
 public:
  /// Refuses new buffers, joins and ops once `drain` began.
  ClientService(const Config* config, SessionRegistry* sessions, Communicators* communicators,
                Ops* ops, const Drain* drain)
      : config_(config),
        sessions_(sessions),
        communicators_(communicators),
        ops_(ops),
        drain_(drain) {}

  grpc::Status AllocBuffer(grpc::ServerContext* context,
                           const cclo::v1::AllocBufferRequest* request,
                           cclo::v1::AllocBufferResponse* response) override;
  grpc::Status FreeBuffer(grpc::ServerContext* context, const cclo::v1::FreeBufferRequest* request,
                          cclo::v1::FreeBufferResponse* response) override;
  grpc::Status CreateCommunicatorId(grpc::ServerContext* context,
                                    const cclo::v1::CreateCommunicatorIdRequest* request,
                                    cclo::v1::CreateCommunicatorIdResponse* response) override;
  grpc::Status JoinCommunicator(grpc::ServerContext* context,
                                const cclo::v1::JoinCommunicatorRequest* request,
                                cclo::v1::JoinCommunicatorResponse* response) override;
  grpc::Status DestroyCommunicator(grpc::ServerContext* context,
                                   const cclo::v1::DestroyCommunicatorRequest* request,
                                   cclo::v1::DestroyCommunicatorResponse* response) override;
  grpc::Status Submit(grpc::ServerContext* context, const cclo::v1::SubmitRequest* request,
                      cclo::v1::SubmitResponse* response) override;
  grpc::Status Wait(grpc::ServerContext* context, const cclo::v1::WaitRequest* request,
                    cclo::v1::WaitResponse* response) override;
  grpc::Status Cancel(grpc::ServerContext* context, const cclo::v1::CancelRequest* request,
                      cclo::v1::CancelResponse* response) override;

 private:
  absl::StatusOr<SessionPtr> Authenticate(const grpc::ServerContext& context) const;

  const Config* const config_;
  SessionRegistry* const sessions_;
  Communicators* const communicators_;
  Ops* const ops_;
  const Drain* const drain_;
  absl::Mutex mu_;
  uint64_t next_buffer_id_ ABSL_GUARDED_BY(mu_) = 1;
};

/// Peer service on the peer TCP port, for other daemons.
class PeerService final : public cclo::v1::Peer::Service {
 public:
  explicit PeerService(RootGather* root_gather) : root_gather_(root_gather) {}

  grpc::Status Join(grpc::ServerContext* context, const cclo::v1::PeerJoinRequest* request,
                    cclo::v1::PeerJoinResponse* response) override;

 private:
  RootGather* const root_gather_;
};

/// Admin service on admin.sock, for ccloctl.
class AdminService final : public cclo::v1::Admin::Service {
 public:
  AdminService(std::string peer_address, const TenantStore* tenants, SessionRegistry* sessions,
               Communicators* communicators, PolicyStore* policies, hw::Device* device,
               daemon::Drain* drain, const OpStats* op_stats, const PeerClient* peers)
      : peer_address_(std::move(peer_address)),
        tenants_(tenants),
        sessions_(sessions),
        communicators_(communicators),
        policies_(policies),
        device_(device),
        drain_(drain),
        op_stats_(op_stats),
        peers_(peers) {}

  grpc::Status Status(grpc::ServerContext* context, const cclo::v1::StatusRequest* request,
                      cclo::v1::StatusResponse* response) override;

  /// The daemon's state as Status reports it; also a source of the metrics.
  cclo::v1::StatusResponse Snapshot() const;
  /// The tenants as ListTenants reports them; also a source of the metrics.
  cclo::v1::ListTenantsResponse Tenants() const;
  /// Counts a config reload: applied (OK), or rejected for `outcome`, which Status reports
  /// until a reload is applied.
  void CountReload(const absl::Status& outcome);
  /// The sockets whose pauses in accepting Status reports, besides the data port's (the
  /// engine's).
  enum class Listener { kAttach, kClient, kAdmin, kPeer };
  /// Counts a pause in accepting on `socket` after an accept (hw::PausesAccepting) or the
  /// wait for one failed.
  void CountAcceptPause(Listener socket) {
    accept_pauses_[static_cast<size_t>(socket)].fetch_add(1, std::memory_order_relaxed);
  }
  grpc::Status ListCommunicators(grpc::ServerContext* context,
                                 const cclo::v1::ListCommunicatorsRequest* request,
                                 cclo::v1::ListCommunicatorsResponse* response) override;
  grpc::Status ShowCommunicator(grpc::ServerContext* context,
                                const cclo::v1::ShowCommunicatorRequest* request,
                                cclo::v1::ShowCommunicatorResponse* response) override;
  grpc::Status ListTenants(grpc::ServerContext* context,
                           const cclo::v1::ListTenantsRequest* request,
                           cclo::v1::ListTenantsResponse* response) override;
  grpc::Status ListSessions(grpc::ServerContext* context,
                            const cclo::v1::ListSessionsRequest* request,
                            cclo::v1::ListSessionsResponse* response) override;
  grpc::Status ListBuffers(grpc::ServerContext* context,
                           const cclo::v1::ListBuffersRequest* request,
                           cclo::v1::ListBuffersResponse* response) override;
  grpc::Status SetLogLevel(grpc::ServerContext* context,
                           const cclo::v1::SetLogLevelRequest* request,
                           cclo::v1::SetLogLevelResponse* response) override;
  grpc::Status DestroyCommunicator(grpc::ServerContext* context,
                                   const cclo::v1::AdminDestroyCommunicatorRequest* request,
                                   cclo::v1::AdminDestroyCommunicatorResponse* response) override;
  grpc::Status Drain(grpc::ServerContext* context, const cclo::v1::DrainRequest* request,
                     cclo::v1::DrainResponse* response) override;
  // Policy (admin_policy.cc).
  grpc::Status GetPolicy(grpc::ServerContext* context, const cclo::v1::GetPolicyRequest* request,
                         cclo::v1::GetPolicyResponse* response) override;
  grpc::Status SetPolicy(grpc::ServerContext* context, const cclo::v1::SetPolicyRequest* request,
                         cclo::v1::GetPolicyResponse* response) override;
  grpc::Status ValidatePolicy(grpc::ServerContext* context,
                              const cclo::v1::SetPolicyRequest* request,
                              cclo::v1::ValidatePolicyResponse* response) override;
  grpc::Status ExplainPolicy(grpc::ServerContext* context,
                             const cclo::v1::ExplainPolicyRequest* request,
                             cclo::v1::ExplainPolicyResponse* response) override;
  grpc::Status Stats(grpc::ServerContext* context, const cclo::v1::StatsRequest* request,
                     cclo::v1::StatsResponse* response) override;

 private:
  /// The policy YAML parsed and checked against this daemon's tenants.
  absl::StatusOr<cclo::v1::Policy> ParseForThisDaemon(const std::string& yaml) const;
  /// The configured tenants' names, in order.
  std::vector<std::string> TenantNames() const;

  const std::string peer_address_;
  const TenantStore* const tenants_;
  const hw::SteadyTime start_ = hw::SteadyNow();
  SessionRegistry* const sessions_;
  Communicators* const communicators_;
  PolicyStore* const policies_;
  hw::Device* const device_;
  daemon::Drain* const drain_;
  const OpStats* const op_stats_;
  const PeerClient* const peers_;
  mutable absl::Mutex reload_mu_;
  uint64_t reloads_applied_ ABSL_GUARDED_BY(reload_mu_) = 0;
  uint64_t reloads_rejected_ ABSL_GUARDED_BY(reload_mu_) = 0;
  std::string reload_error_ ABSL_GUARDED_BY(reload_mu_);  ///< of the last reload
  std::array<std::atomic<uint64_t>, 4> accept_pauses_{};  ///< by Listener
};

}  // namespace cclo::daemon
