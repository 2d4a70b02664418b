#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "cclo/v1/attach.h"
#include "cclo/v1/ring.h"
#include "daemon/services.h"
#include "daemon/status.h"
#include "daemon/version.h"
#include "firmware/registry.h"
#include "hw/poe/wire.h"
#include "hw/types.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {

grpc::Status AdminService::Status(grpc::ServerContext*, const cclo::v1::StatusRequest*,
                                  cclo::v1::StatusResponse* response) {
  *response = Snapshot();
  return grpc::Status::OK;
}

cclo::v1::StatusResponse AdminService::Snapshot() const {
  cclo::v1::StatusResponse snapshot;
  cclo::v1::StatusResponse* response = &snapshot;
  response->set_version(kVersion);
  response->set_data_wire_version(hw::poe::kWireVersion);
  response->set_selection_version(firmware::kSelectionVersion);
  response->set_attach_version(attach::kVersion);
  response->set_ring_version(ring::kVersion);
  response->set_peer_address(peer_address_);
  response->set_data_address(device_->DataAddress());
  response->set_uptime_seconds(static_cast<uint64_t>(absl::ToInt64Seconds(hw::Since(start_))));
  std::vector<SessionPtr> sessions = sessions_->All();
  response->set_sessions(static_cast<uint32_t>(sessions.size()));
  uint64_t buffers = 0, buffer_bytes = 0;
  for (const SessionPtr& session : sessions) {
    const Session::BufferCounts counts = session->CountBuffers();
    buffers += counts.count;
    buffer_bytes += counts.bytes;
  }
  response->set_buffers(static_cast<uint32_t>(buffers));
  response->set_buffer_bytes(buffer_bytes);
  response->set_communicators(static_cast<uint32_t>(communicators_->Count()));
  hw::DeviceStats stats = device_->Stats();
  response->set_ops_completed(stats.calls_completed);
  response->set_ops_failed(stats.calls_failed);
  response->set_bytes_sent(stats.bytes_sent);
  response->set_bytes_received(stats.bytes_received);
  response->set_rx_pool_bytes_total(stats.rx_pool_bytes_total);
  response->set_rx_pool_bytes_used(stats.rx_pool_bytes_used);
  response->set_rx_pool_bytes_peak(stats.rx_pool_bytes_peak);
  response->set_data_sessions_up(stats.sessions_up);
  response->set_wire_errors(stats.wire_errors);
  response->set_accept_pauses_data(stats.accept_pauses);
  auto pauses = [this](Listener socket) {
    return accept_pauses_[static_cast<size_t>(socket)].load(std::memory_order_relaxed);
  };
  response->set_accept_pauses_attach(pauses(Listener::kAttach));
  response->set_accept_pauses_client(pauses(Listener::kClient));
  response->set_accept_pauses_admin(pauses(Listener::kAdmin));
  response->set_accept_pauses_peer(pauses(Listener::kPeer));
  response->set_join_retries(peers_->retries());
  response->set_engine_turn_bytes(stats.turn_bytes);
  response->set_scratch_bytes_limit(stats.scratch_bytes_limit);
  response->set_scratch_bytes_used(stats.scratch_bytes_used);
  response->set_scratch_bytes_kept(stats.scratch_bytes_kept);
  response->set_policy_version(policies_->Current()->version());
  response->set_draining(drain_->draining());
  absl::MutexLock lock(&reload_mu_);
  response->set_reloads_applied(reloads_applied_);
  response->set_reloads_rejected(reloads_rejected_);
  response->set_reload_error(reload_error_);
  return snapshot;
}

void AdminService::CountReload(const absl::Status& outcome) {
  absl::MutexLock lock(&reload_mu_);
  ++(outcome.ok() ? reloads_applied_ : reloads_rejected_);
  // The reason may quote the file's bytes, which the Status answer's string must not hold
  // unless they are UTF-8.
  const std::string reason(outcome.message());
  reload_error_ = hw::EscapeControl(reason, reason.size());
}

grpc::Status AdminService::ListCommunicators(grpc::ServerContext*,
                                             const cclo::v1::ListCommunicatorsRequest*,
                                             cclo::v1::ListCommunicatorsResponse* response) {
  for (cclo::v1::CommunicatorInfo& info : communicators_->List()) {
    *response->add_communicators() = std::move(info);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::ShowCommunicator(grpc::ServerContext*,
                                            const cclo::v1::ShowCommunicatorRequest* request,
                                            cclo::v1::ShowCommunicatorResponse* response) {
  absl::StatusOr<cclo::v1::ShowCommunicatorResponse> show =
      communicators_->Show(request->comm_id());
  if (!show.ok()) return ToGrpc(show.status());
  *response = *std::move(show);
  return grpc::Status::OK;
}

cclo::v1::ListTenantsResponse AdminService::Tenants() const {
  std::map<std::string, Session::OpCounts> ops;
  for (const SessionPtr& session : sessions_->All()) {
    const Session::OpCounts counts = session->CountOps();
    Session::OpCounts& sum = ops[session->tenant()->name()];
    sum.queued += counts.queued;
    sum.running += counts.running;
  }
  const std::map<uint32_t, hw::TenantScratch> scratch = device_->Stats().tenant_scratch;
  cclo::v1::ListTenantsResponse response;
  for (const TenantPtr& tenant : tenants_->All()) {
    cclo::v1::TenantInfo& info = *response.add_tenants();
    info.set_name(tenant->name());
    info.set_weight(tenant->weight());
    const auto limits = tenant->Limits();
    const auto used = tenant->Usage();
    const auto refusals = tenant->Refusals();
    for (size_t slot = 0; slot < kResourceCount; ++slot) {
      cclo::v1::QuotaUse& quota = *info.add_quotas();
      quota.set_name(ResourceName(static_cast<Resource>(slot)));
      quota.set_limit(limits[slot]);
      quota.set_used(used[slot]);
      quota.set_refusals(refusals[slot]);
      info.set_refusals(info.refusals() + refusals[slot]);
    }
    const auto engine = scratch.find(tenant->index());
    const hw::TenantScratch held = engine == scratch.end() ? hw::TenantScratch{} : engine->second;
    cclo::v1::QuotaUse& quota = *info.add_quotas();
    quota.set_name("scratch_bytes");
    quota.set_limit(tenant->scratch_bytes());
    quota.set_used(held.used_bytes);
    quota.set_refusals(held.refusals);
    info.set_refusals(info.refusals() + held.refusals);
    info.set_ops_queued(ops[tenant->name()].queued);
    info.set_ops_running(ops[tenant->name()].running);
  }
  return response;
}

grpc::Status AdminService::ListTenants(grpc::ServerContext*, const cclo::v1::ListTenantsRequest*,
                                       cclo::v1::ListTenantsResponse* response) {
  *response = Tenants();
  return grpc::Status::OK;
}

grpc::Status AdminService::ListSessions(grpc::ServerContext*, const cclo::v1::ListSessionsRequest*,
                                        cclo::v1::ListSessionsResponse* response) {
  for (const SessionPtr& session : sessions_->All()) {
    cclo::v1::SessionInfo& info = *response->add_sessions();
    info.set_session_id(session->id());
    info.set_tenant(session->tenant()->name());
    info.set_pid(static_cast<uint32_t>(session->credentials().pid));
    info.set_uid(session->credentials().uid);
    info.set_gid(session->credentials().gid);
    const Session::BufferCounts counts = session->CountBuffers();
    info.set_buffers(static_cast<uint32_t>(counts.count));
    info.set_buffer_bytes(counts.bytes);
    info.set_communicators(static_cast<uint32_t>(session->CommHandles().size()));
    const Session::OpCounts ops = session->CountOps();
    info.set_ops_queued(ops.queued);
    info.set_ops_running(ops.running);
    info.set_attached_unix_ms(static_cast<uint64_t>(absl::ToUnixMillis(session->attached())));
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::ListBuffers(grpc::ServerContext*, const cclo::v1::ListBuffersRequest*,
                                       cclo::v1::ListBuffersResponse* response) {
  for (const SessionPtr& session : sessions_->All()) {
    for (const auto& [id, use] : session->Buffers()) {
      cclo::v1::BufferInfo& info = *response->add_buffers();
      info.set_buffer_id(id);
      info.set_session_id(session->id());
      info.set_tenant(session->tenant()->name());
      info.set_bytes(use.bytes);
      info.set_freed(use.freed);
    }
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::SetLogLevel(grpc::ServerContext*,
                                       const cclo::v1::SetLogLevelRequest* request,
                                       cclo::v1::SetLogLevelResponse* response) {
  absl::StatusOr<spdlog::level::level_enum> level = ParseLogLevel(request->level());
  if (!level.ok()) {
    return ToGrpc(absl::InvalidArgumentError(absl::StrCat("log level ", level.status().message())));
  }
  response->set_previous(LogLevelName(spdlog::get_level()));
  // Logged before the change, which may silence warnings.
  spdlog::warn("log level set to {} through the admin socket (was {})", request->level(),
               response->previous());
  spdlog::set_level(*level);
  return grpc::Status::OK;
}

grpc::Status AdminService::DestroyCommunicator(
    grpc::ServerContext*, const cclo::v1::AdminDestroyCommunicatorRequest* request,
    cclo::v1::AdminDestroyCommunicatorResponse* response) {
  absl::StatusOr<cclo::v1::AdminDestroyCommunicatorResponse> destroyed =
      communicators_->DestroyByOperator(request->comm_id());
  if (!destroyed.ok()) return ToGrpc(destroyed.status());
  *response = *std::move(destroyed);
  return grpc::Status::OK;
}

grpc::Status AdminService::Drain(grpc::ServerContext*, const cclo::v1::DrainRequest* request,
                                 cclo::v1::DrainResponse* response) {
  const absl::Duration timeout =
      request->timeout_ms() > 0 ? absl::Milliseconds(request->timeout_ms()) : absl::Seconds(60);
  absl::StatusOr<cclo::v1::DrainResponse> drained = drain_->Run(timeout);
  if (!drained.ok()) return ToGrpc(drained.status());
  *response = *std::move(drained);
  return grpc::Status::OK;
}

grpc::Status AdminService::Stats(grpc::ServerContext*, const cclo::v1::StatsRequest*,
                                 cclo::v1::StatsResponse* response) {
  const OpTotals totals = op_stats_->Totals();
  for (const auto& [key, row] : totals.ops) {
    cclo::v1::OpStats& stats = *response->add_ops();
    stats.set_tenant(key.tenant);
    stats.set_collective(std::string(hw::CollectiveName(key.collective)));
    stats.set_algorithm(key.algorithm);
    stats.set_protocol(std::string(hw::ProtocolName(key.protocol)));
    stats.set_ops_ok(row.ok);
    stats.set_ops_failed(row.failed);
    stats.set_bytes(row.bytes);
    stats.set_latency_p50_seconds(row.latency.Quantile(0.5));
    stats.set_latency_p99_seconds(row.latency.Quantile(0.99));
  }
  for (const auto& [code, ops] : totals.errors) {
    cclo::v1::ErrorCount& error = *response->add_errors();
    error.set_reason(StatusCodeLabel(code));
    error.set_ops(ops);
  }
  for (const auto& [code, submits] : totals.refused) {
    cclo::v1::ErrorCount& refusal = *response->add_refused();
    refusal.set_reason(StatusCodeLabel(code));
    refusal.set_ops(submits);
  }
  return grpc::Status::OK;
}

}  // namespace cclo::daemon
