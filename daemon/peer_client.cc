#include "daemon/peer_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "daemon/status.h"

namespace cclo::daemon {

std::shared_ptr<cclo::v1::Peer::Stub> PeerClient::StubFor(const std::string& address) {
  Channel& channel = channels_[address];
  channel.used = ++uses_;
  if (!channel.stub || channel.channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    // Subchannels of its own: a new channel must not share the old one's backoff.
    grpc::ChannelArguments arguments;
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel.channel = grpc::CreateCustomChannel(address, credentials_, arguments);
    channel.stub = cclo::v1::Peer::NewStub(channel.channel);
  }
  std::shared_ptr<cclo::v1::Peer::Stub> stub = channel.stub;
  if (channels_.size() > kMaxChannels) {
    // A call still using the evicted stub keeps it alive until it returns.
    channels_.erase(std::min_element(
        channels_.begin(), channels_.end(),
        [](const auto& a, const auto& b) { return a.second.used < b.second.used; }));
  }
  return stub;
}

absl::StatusOr<cclo::v1::PeerJoinResponse> PeerClient::Join(
    const std::string& root_address, const cclo::v1::PeerJoinRequest& request,
    hw::SteadyTime deadline, grpc::ClientContext& context) {
  context.set_deadline(hw::ToWallDeadline(deadline));
  std::shared_ptr<cclo::v1::Peer::Stub> stub;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return ShuttingDown();
    calls_.insert(&context);
    stub = StubFor(root_address);
  }
  cclo::v1::PeerJoinResponse response;
  grpc::Status status = stub->Join(&context, request, &response);
  absl::MutexLock lock(&mu_);
  calls_.erase(&context);
  if (status.ok()) return response;
  return stopped_ ? ShuttingDown() : FromGrpc(status);
}

void PeerClient::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  for (grpc::ClientContext* call : calls_) call->TryCancel();
}

size_t PeerClient::channels() const {
  absl::MutexLock lock(&mu_);
  return channels_.size();
}

}  // namespace cclo::daemon
