#include "daemon/peer_client.h"

#include <grpcpp/grpcpp.h>

#include "daemon/status.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

constexpr absl::Duration kNoticeTimeout = absl::Seconds(2);

}  // namespace

PeerClient::PeerClient() : worker_([this] { RunNotices(); }) {}

PeerClient::~PeerClient() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  worker_.join();
}

cclo::v1::Peer::Stub* PeerClient::StubFor(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[address];
  if (!stub) {
    stub = cclo::v1::Peer::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
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

void PeerClient::NotifyLeave(const std::string& address, cclo::v1::PeerLeaveRequest request) {
  absl::MutexLock lock(&mu_);
  notices_.emplace_back(address, std::move(request));
}

absl::Status PeerClient::Leave(const std::string& address,
                               const cclo::v1::PeerLeaveRequest& request,
                               absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  cclo::v1::PeerLeaveResponse response;
  return FromGrpc(StubFor(address)->Leave(&context, request, &response));
}

void PeerClient::RunNotices() {
  for (;;) {
    std::pair<std::string, cclo::v1::PeerLeaveRequest> notice;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopping_ || !notices_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (notices_.empty()) return;
      notice = std::move(notices_.front());
      notices_.pop_front();
    }
    absl::Status sent = Leave(notice.first, notice.second, kNoticeTimeout);
    if (!sent.ok()) {
      spdlog::warn("leave notice to {} failed: {}", notice.first, std::string(sent.message()));
    }
  }
}

}  // namespace cclo::daemon
