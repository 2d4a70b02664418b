#include "daemon/services.h"
#include "daemon/status.h"
#include "daemon/version.h"

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
  response->set_peer_address(peer_address_);
  response->set_data_address(device_->DataAddress());
  response->set_uptime_seconds(
      static_cast<uint64_t>(absl::ToInt64Seconds(absl::Now() - start_)));
  std::vector<SessionPtr> sessions = sessions_->All();
  response->set_sessions(static_cast<uint32_t>(sessions.size()));
  uint64_t buffers = 0, buffer_bytes = 0;
  for (const SessionPtr& session : sessions) {
    buffers += session->BufferCount();
    buffer_bytes += session->BufferBytes();
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
  response->set_data_sessions_up(stats.sessions_up);
  response->set_wire_errors(stats.wire_errors);
  return snapshot;
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

}  // namespace cclo::daemon
