#include "daemon/peer_client.h"

#include <grpcpp/grpcpp.h>

#include "daemon/status.h"

namespace cclo::daemon {
cclo::v1::Peer::Stub* PeerClient::StubFor(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[address];
  if (!stub) {
    stub = cclo::v1::Peer::NewStub(grpc::CreateChannel(address, credentials_));
  }
  return stub.get();
}

absl::StatusOr<cclo::v1::PeerJoinResponse> PeerClient::Join(
    const std::string& root_address, const cclo::v1::PeerJoinRequest& request,
    absl::Time deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  cclo::v1::PeerJoinResponse response;
  grpc::Status status = StubFor(root_address)->Join(&context, request, &response);
  if (!status.ok()) return FromGrpc(status);
  return response;
}

}  // namespace cclo::daemon
